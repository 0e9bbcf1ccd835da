#include <sched/scheduler.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <array>
#include <atomic>
#include <csignal>
#include <exception>
#include <future>
#include <latch>
#include <memory>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "support/blocking_call.hpp"
#include "support/child_process.hpp"
#include "support/counter.hpp"
#include "support/error_log.hpp"
#include "support/failing_allocation.hpp"
#include "support/failing_executor.hpp"
#include "support/gate.hpp"
#include "support/hook_clock.hpp"
#include "support/io_fixture.hpp"
#include "support/stderr_capture.hpp"
#include "support/tick_log.hpp"
#include "support/wait.hpp"

using namespace std::chrono_literals;
using boost::asio::cancellation_type;
using sched::manual_clock;
using sched::test::code_in;
using sched::test::counter;
using sched::test::error_log;
using sched::test::eventually;
using sched::test::manual_pool;
using sched::test::manual_scheduler;
using sched::test::seen_tick;
using sched::test::tick_log;

namespace {

using error_code = boost::system::error_code;
using tick = sched::basic_tick<manual_clock>;

struct periodic_fixture : sched::test::scheduler_fixture
{
    std::optional<std::size_t> ticks_at_end;
    std::exception_ptr why;

    auto on_end()
    {
        return [this](std::exception_ptr e, std::size_t ticks) {
            why = e;
            ticks_at_end = ticks;
        };
    }

    // Ends a periodic operation whose slow first tick took the clock from 0 to 105, with skip()
    // every 10 s, and checks that it ticked twice: on time, then at 110, told it missed ten.
    void end_after_the_skip(boost::asio::cancellation_signal& signal, tick_log& log)
    {
        signal.emit(cancellation_type::terminal);
        complete_one();
        BOOST_TEST(ticks_at_end.value_or(0) == 2u);
        const std::vector<seen_tick> expected{seen_tick::on_time(at(0s), 0),
                                              {at(110s), at(110s), 1, 10}};
        BOOST_TEST(log.snapshot() == expected, boost::test_tools::per_element());
    }
};

struct tick_failure : std::runtime_error
{
    tick_failure() : std::runtime_error("tick") {}
};

} // namespace

BOOST_AUTO_TEST_SUITE(test_scheduler)

BOOST_FIXTURE_TEST_CASE(fixed_rate_ticks_on_its_grid_until_cancelled, periodic_fixture)
{
    boost::asio::cancellation_signal signal;
    counter ticks;
    std::vector<manual_clock::time_point> seen;
    scheduler.async_schedule_at_fixed_rate(
        1s, 10s,
        [&] {
            seen.push_back(manual_clock::now());
            ticks.increment();
        },
        boost::asio::bind_cancellation_slot(signal.slot(), on_end()));
    for (int k = 0; k < 3; ++k)
    {
        manual_clock::advance_to(at(1s + k * 10s));
        BOOST_TEST_REQUIRE(ticks.wait_for_at_least(k + 1));
        BOOST_TEST_REQUIRE(eventually([&] { return pool.queue().size() == 1u; })); // re-queued
    }
    signal.emit(cancellation_type::terminal);
    complete_one();
    BOOST_TEST(ticks_at_end.value_or(0) == 3u);
    BOOST_TEST(code_in(why) == boost::asio::error::operation_aborted);
    BOOST_TEST(pool.queue().size() == 0u);
    BOOST_TEST(seen == (std::vector{at(1s), at(11s), at(21s)}));
}

BOOST_FIXTURE_TEST_CASE(fixed_delay_measures_from_the_end_of_each_tick, periodic_fixture)
{
    boost::asio::cancellation_signal signal;
    counter ticks;
    scheduler.async_schedule_with_fixed_delay(
        0s, 10s,
        [&] {
            manual_clock::advance(3s); // the tick takes 3 s
            ticks.increment();
        },
        boost::asio::bind_cancellation_slot(signal.slot(), on_end()));
    BOOST_TEST_REQUIRE(ticks.wait_for_at_least(1));
    BOOST_TEST_REQUIRE(eventually([&] { return pool.queue().size() == 1u; }));
    BOOST_TEST((pool.queue().due_time(*pool.queue().peek()) == at(13s))); // 3 s run + 10 s delay
    signal.emit(cancellation_type::partial);
    complete_one();
    BOOST_TEST(ticks_at_end.value_or(0) == 1u);
}

BOOST_FIXTURE_TEST_CASE(a_throwing_tick_ends_the_operation_with_its_exception, periodic_fixture)
{
    int runs = 0;
    scheduler.async_schedule_at_fixed_rate(
        0s, 1s,
        [&] {
            if (++runs == 2)
                throw tick_failure();
        },
        on_end());
    manual_clock::advance(1s);
    complete_one();
    BOOST_CHECK_THROW(std::rethrow_exception(why), tick_failure);
    BOOST_TEST(ticks_at_end.value_or(0) == 2u);
    BOOST_TEST(pool.queue().size() == 0u);
}

BOOST_FIXTURE_TEST_CASE(total_cancellation_applies_only_before_the_first_tick, periodic_fixture)
{
    boost::asio::cancellation_signal signal;
    counter ticks;
    scheduler.async_schedule_at_fixed_rate(
        0s, 1s, [&] { ticks.increment(); },
        boost::asio::bind_cancellation_slot(signal.slot(), on_end()));
    BOOST_TEST_REQUIRE(ticks.wait_for_at_least(1));
    BOOST_TEST_REQUIRE(eventually([&] { return pool.queue().size() == 1u; }));
    signal.emit(cancellation_type::total); // it has had effects: refused
    BOOST_TEST(pool.queue().size() == 1u);
    signal.emit(cancellation_type::terminal);
    complete_one();
    BOOST_TEST(ticks_at_end.value_or(0) == 1u);

    boost::asio::cancellation_signal before;
    scheduler.async_schedule_at_fixed_rate(
        5s, 1s, [] {}, boost::asio::bind_cancellation_slot(before.slot(), on_end()));
    before.emit(cancellation_type::total);
    complete_one();
    BOOST_TEST(ticks_at_end.value_or(1) == 0u);
    BOOST_TEST(code_in(why) == boost::asio::error::operation_aborted);
}

BOOST_FIXTURE_TEST_CASE(total_cancellation_is_refused_while_the_first_tick_runs,
                        periodic_fixture,
                        *boost::unit_test::timeout(60))
{
    boost::asio::cancellation_signal signal;
    counter started;
    std::promise<void> release;
    auto released = release.get_future().share();
    scheduler.async_schedule_at_fixed_rate(
        0s, 1s,
        [&] {
            started.increment();
            released.wait();
        },
        boost::asio::bind_cancellation_slot(signal.slot(), on_end()));
    BOOST_TEST_REQUIRE(started.wait_for_at_least(1));
    signal.emit(cancellation_type::total); // the running tick is having effects: refused
    release.set_value();
    settle(pool);                          // the tick has ended
    BOOST_TEST(pool.queue().size() == 1u); // queued again, due at 1 s
    BOOST_TEST(run_ready() == 0u);
    BOOST_TEST(!ticks_at_end);
    signal.emit(cancellation_type::terminal);
    complete_one();
    BOOST_TEST(ticks_at_end.value_or(0) == 1u);
    BOOST_TEST(code_in(why) == boost::asio::error::operation_aborted);
}

// A total cancellation accepted just before the first tick begins (after the check that the
// operation is still pending, before the tick starts: in the clock read between them, where a bound
// tick plans its run) prevents the tick, as total cancellation requires: the operation ends with
// no effect. Before, the tick ran all the same (a review's finding: the runner took a cancellation
// that had closed ticking out for one that had not come).
BOOST_AUTO_TEST_CASE(a_total_cancellation_accepted_as_the_first_tick_begins_prevents_it,
                     *boost::unit_test::timeout(60))
{
    using clock = sched::test::hook_clock;
    boost::asio::io_context io;
    boost::asio::io_context ticks_io;
    boost::asio::cancellation_signal signal;
    sched::basic_scheduled_thread_pool<clock> pool(1);
    sched::basic_scheduler<clock> scheduler(io, pool);
    std::atomic<int> ticks{0};
    std::optional<std::size_t> ticks_at_end;
    std::exception_ptr why;
    scheduler.async_schedule_at_fixed_rate(
        0s, 1s, boost::asio::bind_executor(ticks_io, [&] { ++ticks; }),
        boost::asio::bind_cancellation_slot(signal.slot(),
                                            [&](std::exception_ptr e, std::size_t n) {
                                                why = e;
                                                ticks_at_end = n;
                                            }));
    // The tick runs on this thread, which reads the clock as it plans the run.
    clock::on_next_now([&] { signal.emit(cancellation_type::total); });
    BOOST_TEST_REQUIRE(ticks_io.run_one_for(std::chrono::minutes(1)) == 1u);
    io.run_for(std::chrono::minutes(1));
    BOOST_TEST_REQUIRE(io.stopped());
    BOOST_TEST(ticks.load() == 0);
    BOOST_TEST(ticks_at_end.value_or(99) == 0u);
    BOOST_TEST(code_in(why) == boost::asio::error::operation_aborted);
}

BOOST_AUTO_TEST_CASE(a_bound_tick_that_has_started_holds_up_the_pools_destruction,
                     *boost::unit_test::timeout(60))
{
    using clock = sched::test::hook_clock;
    error_log errors;
    std::atomic<int> failed_runs{0};
    sched::pool_options options;
    options.threads = 1;
    options.error_sink = errors.sink();
    options.after_execute = [&](std::exception_ptr e) {
        failed_runs += e != nullptr;
    };
    boost::asio::io_context io;
    boost::asio::io_context ticks_io;
    auto pool = std::make_unique<sched::basic_scheduled_thread_pool<clock>>(options);
    sched::basic_scheduler<clock> scheduler(io, *pool);
    std::atomic<bool> destroyed{false};
    std::atomic<int> ticks{0};
    std::atomic<int> ticks_after_destruction{0};
    std::optional<std::size_t> ticks_at_end;
    std::exception_ptr why;
    scheduler.async_schedule_at_fixed_rate(
        0s, 1s,
        boost::asio::bind_executor(ticks_io,
                                   [&] {
                                       ++ticks;
                                       if (destroyed)
                                           ++ticks_after_destruction;
                                       throw tick_failure();
                                   }),
        [&](std::exception_ptr e, std::size_t n) {
            why = e;
            ticks_at_end = n;
        });
    // The tick runs on this thread, which reads the clock as it plans the run, once the pool
    // has let it start: the pool is destroyed meanwhile, on another thread, whose destructor
    // must wait for the tick (it returned at once, before the tick started, and then the tick
    // still ran), and see its end: its failure reaches the pool's hook and error sink.
    std::thread destroyer;
    clock::on_next_now([&] {
        destroyer = std::thread([&] {
            pool.reset();
            destroyed = true;
        });
        for (int i = 0; i < 200 && !destroyed; ++i)
            std::this_thread::sleep_for(1ms);
    });
    BOOST_TEST_REQUIRE(ticks_io.run_one_for(std::chrono::minutes(1)) == 1u);
    destroyer.join();
    BOOST_TEST(ticks.load() == 1);
    BOOST_TEST(ticks_after_destruction.load() == 0);
    BOOST_TEST(failed_runs.load() == 1);
    BOOST_TEST(errors.snapshot() == std::vector<std::string>{"tick"},
               boost::test_tools::per_element());
    io.run_for(std::chrono::minutes(1));
    BOOST_TEST_REQUIRE(io.stopped());
    BOOST_TEST(ticks_at_end.value_or(99) == 1u);
    BOOST_CHECK_THROW(std::rethrow_exception(why), tick_failure); // its first failure ends it
}

// A pool's hooks may run an io_context (test_io_alarm's polling hook does). Here the after_execute
// hooks of two pools, for a bound tick each, run the io_context of the other pool's ticks, on two
// threads at once: each thread ends a run of the other pool inside a run of its own pool. Both go
// on (each thread held its own pool's link locked across its hook, and waited for the other's).
BOOST_AUTO_TEST_CASE(hooks_of_two_pools_may_each_run_the_others_ticks_at_once,
                     *boost::unit_test::timeout(60))
{
    boost::asio::io_context io;
    std::array<boost::asio::io_context, 2> ticks_io;
    std::latch both_in_hooks(2);
    std::array<std::atomic<bool>, 2> hooked{};
    std::array<std::atomic<std::size_t>, 2> ran{}, others_ran{};
    std::array<std::atomic<int>, 2> ticks{};
    const auto hooking = [&](std::size_t i) {
        sched::pool_options options;
        options.threads = 1;
        options.after_execute = [&, i](std::exception_ptr) {
            if (hooked[i].exchange(true)) // once, for the first tick of pool i
                return;
            both_in_hooks.arrive_and_wait();
            others_ran[i] = ticks_io[1 - i].run_one_for(std::chrono::minutes(1));
        };
        return options;
    };
    sched::scheduled_thread_pool pool0(hooking(0)), pool1(hooking(1));
    std::array<sched::scheduler, 2> schedulers{sched::scheduler(io, pool0),
                                               sched::scheduler(io, pool1)};
    std::array<std::optional<std::size_t>, 4> ticks_at_end;
    for (std::size_t i = 0; i < 2; ++i)
    {
        for (std::size_t k = 0; k < 2; ++k)
        {
            schedulers[i].async_schedule_at_fixed_rate(
                0s, 1h, boost::asio::bind_executor(ticks_io[i], [&, i] { ++ticks[i]; }),
                [&, n = 2 * i + k](std::exception_ptr, std::size_t t) { ticks_at_end[n] = t; });
        }
    }
    std::array<std::thread, 2> threads;
    for (std::size_t i = 0; i < 2; ++i)
        threads[i] =
            std::thread([&, i] { ran[i] = ticks_io[i].run_one_for(std::chrono::minutes(1)); });
    for (std::thread& t : threads)
        t.join();
    for (std::size_t i = 0; i < 2; ++i)
    {
        BOOST_TEST(ran[i].load() == 1u);
        BOOST_TEST(others_ran[i].load() == 1u);
        BOOST_TEST(ticks[i].load() == 2);
    }
    pool0.shutdown();
    pool1.shutdown();
    io.run_for(std::chrono::minutes(1));
    BOOST_TEST_REQUIRE(io.stopped());
    for (const std::optional<std::size_t>& n : ticks_at_end)
        BOOST_TEST(n.value_or(99) == 1u);
}

// A bound tick may destroy its own pool: the destructor does not wait for the tick that calls it,
// and the operation then ends as if the pool had been shut down.
BOOST_AUTO_TEST_CASE(a_bound_tick_may_destroy_its_own_pool, *boost::unit_test::timeout(60))
{
    boost::asio::io_context io;
    auto pool = std::make_unique<sched::scheduled_thread_pool>(1);
    int ticks = 0;
    int completions = 0;
    std::optional<std::size_t> ticks_at_end;
    std::exception_ptr why;
    {
        sched::scheduler scheduler(io, *pool);
        scheduler.async_schedule_at_fixed_rate(0s, 1h,
                                               boost::asio::bind_executor(io,
                                                                          [&] {
                                                                              ++ticks;
                                                                              pool.reset();
                                                                          }),
                                               [&](std::exception_ptr e, std::size_t n) {
                                                   ++completions;
                                                   why = e;
                                                   ticks_at_end = n;
                                               });
    }
    io.run_for(std::chrono::minutes(1));
    BOOST_TEST_REQUIRE(io.stopped());
    BOOST_TEST(!pool);
    BOOST_TEST(ticks == 1);
    BOOST_TEST(completions == 1);
    BOOST_TEST(ticks_at_end.value_or(99) == 1u);
    BOOST_TEST(code_in(why) == make_error_code(sched::error::shutdown));
}

#if defined(__linux__)
// A pool destroyed from its own hook (here a bound tick's after_execute, which runs on the tick's
// executor) would wait for the hook to end, for ever: the process ends instead, saying why.
BOOST_AUTO_TEST_CASE(a_pool_destroyed_from_its_own_hook_ends_the_process_saying_why,
                     *boost::unit_test::precondition(sched::test::child_starts_threads))
{
    sched::test::stderr_capture captured; // the child's too
    const std::optional<int> status = sched::test::child_status([] {
        boost::asio::io_context io;
        std::unique_ptr<sched::scheduled_thread_pool> pool;
        sched::pool_options options;
        options.threads = 1;
        options.after_execute = [&pool](std::exception_ptr) {
            pool.reset();
        };
        pool = std::make_unique<sched::scheduled_thread_pool>(options);
        sched::scheduler scheduler(io, *pool);
        scheduler.async_schedule_at_fixed_rate(0s, 1h, boost::asio::bind_executor(io, [] {}),
                                               [](std::exception_ptr, std::size_t) {});
        io.run_for(std::chrono::minutes(1));
        return 0;
    });
    BOOST_TEST_REQUIRE(status.has_value());
    BOOST_TEST_REQUIRE(WIFSIGNALED(*status));
    BOOST_TEST(WTERMSIG(*status) == SIGABRT); // not SIGALRM: killed after 20 s
    BOOST_TEST(captured.text().find("sched: a pool is being destroyed by code that it runs or "
                                    "ends") != std::string::npos);
}
#endif

BOOST_FIXTURE_TEST_CASE(cancelled_during_a_tick_it_ends_at_once_even_without_remove_on_cancel,
                        periodic_fixture,
                        *boost::unit_test::timeout(60))
{
    sched::pool_options options = single_worker();
    options.remove_on_cancel = false; // for tasks; an operation's handler is told at once
    sched::test::manual_pool keeping(options);
    sched::test::manual_scheduler on_keeping(io, keeping);
    boost::asio::cancellation_signal signal;
    std::atomic<bool> ticking{false};
    std::atomic<bool> go_on{false};
    on_keeping.async_schedule_at_fixed_rate(
        0s, 1s,
        [&] {
            ticking = true;
            while (!go_on)
                std::this_thread::yield();
        },
        boost::asio::bind_cancellation_slot(signal.slot(), on_end()));
    BOOST_TEST_REQUIRE(eventually([&] { return ticking.load(); }));
    signal.emit(cancellation_type::terminal); // while it ticks: not in the queue to take out
    go_on = true;
    complete_one(); // the clock has not moved: the end comes now, not at the next tick
    BOOST_TEST(ticks_at_end.value_or(0) == 1u);
    BOOST_TEST(code_in(why) == boost::asio::error::operation_aborted);
    BOOST_TEST(keeping.queue().empty());
}

// No tick starts after a cancel: one that comes while the pool's before_execute hook runs for the
// tick a worker has taken prevents it (as for a task), and after_execute still ends the run.
BOOST_FIXTURE_TEST_CASE(a_tick_cancelled_while_before_execute_runs_does_not_run,
                        periodic_fixture,
                        *boost::unit_test::timeout(60))
{
    sched::test::blocking_hooks hooks;
    sched::test::manual_pool hooked(hooks.options());
    sched::test::manual_scheduler on_hooked(io, hooked);
    boost::asio::cancellation_signal signal;
    std::atomic<int> ticks{0};
    on_hooked.async_schedule_at_fixed_rate(
        0s, 1s, [&] { ++ticks; }, boost::asio::bind_cancellation_slot(signal.slot(), on_end()));
    BOOST_TEST_REQUIRE(hooks.entered.wait_for_at_least(1));
    signal.emit(cancellation_type::partial);
    hooks.leave.open();
    BOOST_TEST_REQUIRE(hooks.after.wait_for_at_least(1));
    complete_one();
    BOOST_TEST(ticks.load() == 0);
    BOOST_TEST(ticks_at_end.value_or(99) == 0u);
    BOOST_TEST(code_in(why) == boost::asio::error::operation_aborted);
}

BOOST_FIXTURE_TEST_CASE(a_tick_bound_to_an_executor_runs_there, periodic_fixture)
{
    boost::asio::io_context ticks_io;
    auto strand = boost::asio::make_strand(ticks_io);
    boost::asio::cancellation_signal signal;
    std::atomic<int> ticks{0};
    std::atomic<bool> on_strand{true};
    scheduler.async_schedule_at_fixed_rate(
        0s, 1s,
        boost::asio::bind_executor(strand,
                                   [&] {
                                       on_strand = on_strand && strand.running_in_this_thread();
                                       ++ticks;
                                   }),
        boost::asio::bind_cancellation_slot(signal.slot(), on_end()));
    for (int k = 1; k <= 3; ++k)
    {
        // The worker posts the tick; it is not re-queued until the tick has run on the strand.
        ticks_io.restart();
        BOOST_TEST_REQUIRE(ticks_io.run_one_for(std::chrono::minutes(1)) == 1u);
        BOOST_TEST(ticks.load() == k);
        BOOST_TEST_REQUIRE(eventually([&] { return pool.queue().size() == 1u; }));
        if (k < 3)
            manual_clock::advance(1s);
    }
    signal.emit(cancellation_type::terminal); // the fourth tick is queued, not due: it goes
    complete_one();
    ticks_io.restart();
    BOOST_TEST(ticks_io.poll() == 1u); // the tick, sent home to be destroyed, not run
    BOOST_TEST(on_strand.load());
    BOOST_TEST(ticks.load() == 3);
    BOOST_TEST(ticks_at_end.value_or(0) == 3u);
    BOOST_TEST(code_in(why) == boost::asio::error::operation_aborted);
}

BOOST_FIXTURE_TEST_CASE(a_bound_tick_is_not_queued_again_before_it_has_run, periodic_fixture)
{
    boost::asio::io_context ticks_io;
    boost::asio::cancellation_signal signal;
    int ticks = 0;
    scheduler.async_schedule_at_fixed_rate(
        0s, 1s, boost::asio::bind_executor(ticks_io, [&] { ++ticks; }),
        {.missed = sched::missed_tick_policy::delay()}, // after the run, the next is at 6 s
        boost::asio::bind_cancellation_slot(signal.slot(), on_end()));
    // The first tick is posted to ticks_io, which does not run it yet.
    BOOST_TEST_REQUIRE(eventually([&] { return pool.queue().size() == 0u; }));
    // Five more ticks fall due meanwhile. Any of them queued again would be due, and would come
    // out (and be posted) before a task submitted now (settle).
    manual_clock::advance(5s);
    settle(pool);
    BOOST_TEST(pool.queue().size() == 0u);
    ticks_io.restart();
    BOOST_TEST(ticks_io.poll() == 1u); // one tick posted, not two
    BOOST_TEST(ticks == 1);
    // It has run: the operation is queued again, for the next point of its grid.
    BOOST_TEST_REQUIRE(eventually([&] { return pool.queue().size() == 1u; }));
    signal.emit(cancellation_type::terminal);
    complete_one();
    BOOST_TEST(code_in(why) == boost::asio::error::operation_aborted);
}

// Once its completion is posted to the handler's executor (another io_context here), the
// operation counts no work on its tick's executor (a strand of the scheduler's own io_context,
// a connection's): that io_context runs out of work, and may be destroyed, while the handler
// waits.
BOOST_FIXTURE_TEST_CASE(an_ended_operation_counts_no_work_on_its_ticks_executor, periodic_fixture)
{
    boost::asio::io_context app;
    boost::asio::cancellation_signal signal;
    scheduler.async_schedule_at_fixed_rate(
        1s, 1s, boost::asio::bind_executor(boost::asio::make_strand(io), [] {}),
        boost::asio::bind_cancellation_slot(signal.slot(),
                                            boost::asio::bind_executor(app, on_end())));
    signal.emit(cancellation_type::terminal); // queued, not due: it ends at once
    BOOST_TEST(run_ready() == 1u);            // its tick, sent home to be destroyed
    BOOST_TEST(io.stopped());                 // out of work
    BOOST_TEST(app.poll() == 1u);
    BOOST_TEST(ticks_at_end.value_or(99) == 0u);
    BOOST_TEST(code_in(why) == boost::asio::error::operation_aborted);
}

// The tick a strand holds, on its way to be destroyed: it says whether that strand ran it then.
class destroyed_where
{
public:
    using strand = boost::asio::strand<boost::asio::io_context::executor_type>;

    destroyed_where(strand s, std::optional<bool>& on_strand) : strand_(s), on_strand_(&on_strand)
    {}
    destroyed_where(destroyed_where&& other) noexcept
        : strand_(other.strand_), on_strand_(std::exchange(other.on_strand_, nullptr))
    {}
    destroyed_where& operator=(destroyed_where&&) = delete;
    ~destroyed_where()
    {
        if (on_strand_)
            *on_strand_ = strand_.running_in_this_thread();
    }

private:
    strand strand_;
    std::optional<bool>* on_strand_;
};

// An ended operation whose handler completes in another context (an application's io_context)
// sends its tick back to its own executor (a strand of the scheduler's io_context), where it is
// destroyed: the node, which waits for the handler, holds no strand of the scheduler's
// io_context, which may be destroyed first. (Kept with the node, the strand's last copy went
// after its service had.)
BOOST_FIXTURE_TEST_CASE(an_ended_operations_tick_is_destroyed_on_its_own_executor, periodic_fixture)
{
    std::optional<bool> on_strand;
    {
        boost::asio::io_context app;
        {
            boost::asio::io_context connection;
            manual_scheduler on_connection(connection, pool);
            const auto strand = boost::asio::make_strand(connection);
            boost::asio::cancellation_signal signal;
            on_connection.async_schedule_at_fixed_rate(
                1s, 1s,
                boost::asio::bind_executor(
                    strand, [tick = destroyed_where(strand, on_strand)] { (void)tick; }),
                boost::asio::bind_cancellation_slot(signal.slot(),
                                                    boost::asio::bind_executor(app, on_end())));
            signal.emit(cancellation_type::terminal); // queued, not due: it ends at once
            BOOST_TEST(!on_strand.has_value());       // posted, not destroyed in the emit
            BOOST_TEST(connection.poll() == 1u);
            BOOST_TEST(on_strand.value_or(false));
            BOOST_TEST(connection.stopped()); // out of work
        }                                     // destroyed while the handler waits on `app`
        BOOST_TEST(app.poll() == 1u);
    }
    BOOST_TEST(ticks_at_end.value_or(99) == 0u);
    BOOST_TEST(code_in(why) == boost::asio::error::operation_aborted);
}

// A tick that its context destroys unrun (the context is being destroyed) goes with the
// context's other handlers, on the thread that destroys them, not with the node, which completes
// in another context.
BOOST_FIXTURE_TEST_CASE(a_tick_its_context_destroys_unrun_goes_with_that_context, periodic_fixture)
{
    std::optional<bool> on_strand;
    boost::asio::io_context app;
    {
        boost::asio::io_context connection;
        const auto strand = boost::asio::make_strand(connection);
        scheduler.async_schedule_at_fixed_rate(
            0s, 1s,
            boost::asio::bind_executor(strand,
                                       [tick = destroyed_where(strand, on_strand)] { (void)tick; }),
            boost::asio::bind_executor(app, on_end()));
        // The first tick is posted to the strand, which is destroyed without running it.
        BOOST_TEST_REQUIRE(eventually([&] { return pool.queue().size() == 0u; }));
        settle(pool);
    }
    BOOST_TEST(on_strand.has_value()); // gone, unrun
    BOOST_TEST(!on_strand.value_or(true));
    BOOST_TEST(app.poll() == 1u);
    BOOST_TEST(ticks_at_end.value_or(1) == 0u);
    BOOST_TEST(code_in(why) == boost::asio::error::operation_aborted);
}

BOOST_FIXTURE_TEST_CASE(a_bound_tick_whose_context_dies_ends_the_operation, periodic_fixture)
{
    {
        boost::asio::io_context ticks_io;
        scheduler.async_schedule_at_fixed_rate(0s, 1s, boost::asio::bind_executor(ticks_io, [] {}),
                                               on_end());
        // The first tick is posted to ticks_io, which is destroyed without running it.
        BOOST_TEST_REQUIRE(eventually([&] { return pool.queue().size() == 0u; }));
        settle(pool);
    }
    complete_one();
    BOOST_TEST(ticks_at_end.value_or(1) == 0u);
    BOOST_TEST(code_in(why) == boost::asio::error::operation_aborted);
}

BOOST_FIXTURE_TEST_CASE(a_bound_tick_that_cannot_be_posted_ends_the_operation_with_bad_alloc,
                        periodic_fixture)
{
    boost::asio::io_context ticks_io;
    const std::atomic<bool> out_of_memory{true};
    counter ticks;
    scheduler.async_schedule_at_fixed_rate(
        0s, 1s,
        boost::asio::bind_executor(sched::test::failing_executor(ticks_io, out_of_memory),
                                   [&] { ticks.increment(); }),
        on_end());
    complete_one(); // the first tick's post throws: the operation ends, and is not queued again
    BOOST_TEST(ticks_at_end.value_or(1) == 0u);
    BOOST_TEST_REQUIRE(static_cast<bool>(why));
    BOOST_CHECK_THROW(std::rethrow_exception(why), std::bad_alloc);
    BOOST_TEST(pool.queue().size() == 0u);
    manual_clock::advance(5s);
    settle(pool);
    BOOST_TEST(ticks_io.poll() == 0u);
    BOOST_TEST(ticks.value() == 0);
}

// The first post to another context makes the scheduler's service there; when that fails for
// lack of memory, the tick was never handed over, and the operation ends.
BOOST_FIXTURE_TEST_CASE(a_bound_tick_with_no_memory_for_its_contexts_service_ends_the_operation,
                        periodic_fixture,
                        *boost::unit_test::timeout(60))
{
    boost::asio::io_context ticks_io; // no scheduler_service yet
    pool.submit([] {
            sched::test::fail_allocation_of_at_least(
                sizeof(sched::detail::scheduler_service<manual_clock>));
        })
        .get(); // armed on the worker, which takes the tick next
    counter ticks;
    scheduler.async_schedule_at_fixed_rate(
        0s, 1s, boost::asio::bind_executor(ticks_io, [&] { ticks.increment(); }), on_end());
    complete_one();
    BOOST_TEST(!pool.submit([] { return sched::test::large_allocation_failure_armed(); }).get());
    BOOST_TEST(ticks_at_end.value_or(1) == 0u);
    BOOST_TEST_REQUIRE(static_cast<bool>(why));
    BOOST_CHECK_THROW(std::rethrow_exception(why), std::bad_alloc);
    BOOST_TEST(pool.queue().size() == 0u);
    BOOST_TEST(ticks_io.poll() == 1u); // the tick, sent home to be destroyed, not run
    BOOST_TEST(ticks.value() == 0);
}

// An executor may destroy what it is given at once, without an error: a shut-down pool's does.
// The tick then never ran, and the operation ends, aborted.
BOOST_FIXTURE_TEST_CASE(a_bound_tick_its_executor_destroys_at_once_ends_the_operation,
                        periodic_fixture,
                        *boost::unit_test::timeout(60))
{
    manual_pool ticks_pool(single_worker());
    (void)ticks_pool.shutdown_now(); // its executor destroys functions unrun
    counter ticks;
    scheduler.async_schedule_at_fixed_rate(
        0s, 1s, boost::asio::bind_executor(ticks_pool.get_executor(), [&] { ticks.increment(); }),
        on_end());
    complete_one();
    BOOST_TEST(ticks_at_end.value_or(1) == 0u);
    BOOST_TEST(code_in(why) == boost::asio::error::operation_aborted);
    BOOST_TEST(pool.queue().size() == 0u);
    BOOST_TEST(ticks.value() == 0);
}

// A tick on its way to its executor when the pool's shutdown ends its periodic tasks does not
// start, as one that a worker took would not (Java's ScheduledFutureTask.run asks
// canRunInCurrentRunState): the operation ends with the shutdown error and no tick (a review's
// finding: one more tick ran after shutdown() returned, and after shutdown_now()).
BOOST_DATA_TEST_CASE_F(periodic_fixture,
                       a_bound_tick_on_its_way_when_the_pool_shuts_down_does_not_start,
                       boost::unit_test::data::make({false, true}),
                       now)
{
    boost::asio::io_context ticks_io;
    counter ticks;
    scheduler.async_schedule_at_fixed_rate(
        0s, 1s, boost::asio::bind_executor(ticks_io, [&] { ticks.increment(); }), on_end());
    settle(pool); // the one worker took the operation first, and posted its tick to ticks_io
    BOOST_TEST_REQUIRE(pool.queue().size() == 0u);
    if (now)
        (void)pool.shutdown_now();
    else
        pool.shutdown();
    BOOST_TEST(ticks_io.poll() == 2u); // the tick's turn, then the tick, sent home to go
    run_to_end();
    BOOST_TEST(ticks.value() == 0);
    ticks_io.restart();
    BOOST_TEST(ticks_io.poll() == 0u); // nothing more, and no work left there
    BOOST_TEST(ticks_io.stopped());
    BOOST_TEST(ticks_at_end.value_or(1) == 0u);
    BOOST_TEST(code_in(why) == make_error_code(sched::error::shutdown));
}

// A tick bound to the operation's own pool, queued there as an executor function when
// shutdown_now() destroys it unrun: the operation ends with the shutdown error, as every one that
// shutdown_now() ends does (docs/asio.md; a review's finding: it read operation_aborted).
BOOST_FIXTURE_TEST_CASE(a_tick_on_its_pool_that_shutdown_now_drops_ends_with_the_shutdown_error,
                        periodic_fixture,
                        *boost::unit_test::timeout(60))
{
    counter ticks;
    scheduler.async_schedule_at_fixed_rate(
        1s, 1s, boost::asio::bind_executor(pool.get_executor(), [&] { ticks.increment(); }),
        on_end());
    // Due with the operation, after it: the one worker takes the operation, posts its tick to the
    // pool (behind this task), then runs this task.
    counter blocking;
    sched::test::gate leave;
    auto blocker = pool.schedule(1s, [&] {
        blocking.increment();
        leave.wait();
    });
    manual_clock::advance(1s);
    BOOST_TEST_REQUIRE(blocking.wait_for_at_least(1));
    BOOST_TEST_REQUIRE(pool.queue().size() == 1u); // the tick
    (void)pool.shutdown_now();
    leave.open();
    BOOST_TEST_REQUIRE(pool.await_termination(60s));
    run_to_end();
    BOOST_TEST(ticks.value() == 0);
    BOOST_TEST(ticks_at_end.value_or(1) == 0u);
    BOOST_TEST(code_in(why) == make_error_code(sched::error::shutdown));
}

// Cancelled through its slot, an operation's completion is posted at once; when that post fails
// for lack of memory, the node is gone when the cancel returns, and nothing may touch it then
// (the sanitizer builds see a use after free).
BOOST_FIXTURE_TEST_CASE(a_terminal_cancel_whose_completion_cannot_be_posted_leaves_nothing_behind,
                        periodic_fixture)
{
    boost::asio::io_context other;
    const std::atomic<bool> out_of_memory{true};
    boost::asio::cancellation_signal signal;
    auto alive = std::make_shared<int>(0);
    const std::weak_ptr<int> watch = alive;
    bool invoked = false;
    scheduler.async_schedule_at_fixed_rate(
        1s, 1s, [](std::stop_token) {},
        boost::asio::bind_cancellation_slot(
            signal.slot(),
            boost::asio::bind_executor(
                sched::test::failing_executor(other, out_of_memory),
                [&invoked, alive](std::exception_ptr, std::size_t) { invoked = true; })));
    alive.reset();
    signal.emit(cancellation_type::terminal);
    BOOST_TEST(watch.expired()); // the handler went with the node, unrun
    BOOST_TEST(pool.queue().size() == 0u);
    run_to_end(); // nothing is left counted on the scheduler's io_context
    BOOST_TEST(other.run() == 0u);
    BOOST_TEST(!invoked);
}

// The io_context of a periodic operation is destroyed while a tick runs: the destruction waits
// for the tick, then the operation ends rather than tick again, and its handler goes unrun with
// the context, as Asio's pending handlers do.
BOOST_AUTO_TEST_CASE(destroying_the_io_context_during_a_tick_ends_the_operation,
                     *boost::unit_test::timeout(120))
{
    sched::test::manual_clock_fixture time;
    manual_pool pool(1);
    auto io = std::make_unique<boost::asio::io_context>();
    manual_scheduler scheduler(*io, pool);
    std::atomic<bool> ticking{false};
    std::atomic<bool> go_on{false};
    auto alive = std::make_shared<int>(0);
    const std::weak_ptr<int> watch = alive;
    bool invoked = false;
    scheduler.async_schedule_at_fixed_rate(
        0s, 1s,
        [&] {
            ticking = true;
            while (!go_on)
                std::this_thread::yield();
        },
        [&invoked, alive = std::move(alive)](std::exception_ptr, std::size_t) { invoked = true; });
    BOOST_TEST_REQUIRE(eventually([&] { return ticking.load(); }));
    // The destruction waits for the running tick.
    sched::test::blocking_call destroyer([&] { io.reset(); });
    BOOST_TEST(destroyer.wait_until_blocked());
    go_on = true;
    BOOST_TEST_REQUIRE((destroyer.result().wait_for(1min) == std::future_status::ready));
    BOOST_TEST(watch.expired());
    BOOST_TEST(!invoked);
    BOOST_TEST(pool.queue().empty());
    manual_clock::advance(1h); // nothing left to tick into the dead context
    sched::test::pool_fixture::settle(pool);
}

// The same while a tick is on its way to its own executor: the destruction waits for it to come
// back, and nothing touches the context afterwards.
BOOST_AUTO_TEST_CASE(destroying_the_io_context_while_a_bound_tick_is_away_waits_for_it,
                     *boost::unit_test::timeout(120))
{
    sched::test::manual_clock_fixture time;
    manual_pool pool(1);
    boost::asio::io_context ticks_io;
    auto io = std::make_unique<boost::asio::io_context>();
    manual_scheduler scheduler(*io, pool);
    counter ticks;
    auto alive = std::make_shared<int>(0);
    const std::weak_ptr<int> watch = alive;
    scheduler.async_schedule_at_fixed_rate(
        0s, 1s, boost::asio::bind_executor(ticks_io, [&] { ticks.increment(); }),
        [alive = std::move(alive)](std::exception_ptr, std::size_t) {});
    // The worker has posted the first tick to ticks_io, which has not run it.
    BOOST_TEST_REQUIRE(eventually([&] { return pool.queue().size() == 0u; }));
    sched::test::pool_fixture::settle(pool);
    // The destruction waits for the tick to come back.
    sched::test::blocking_call destroyer([&] { io.reset(); });
    BOOST_TEST(destroyer.wait_until_blocked());
    BOOST_TEST(ticks_io.run_one_for(std::chrono::minutes(1)) == 1u);
    BOOST_TEST_REQUIRE((destroyer.result().wait_for(1min) == std::future_status::ready));
    BOOST_TEST(ticks.value() == 1);
    BOOST_TEST(watch.expired());
    BOOST_TEST(pool.queue().empty());
    ticks_io.restart();
    BOOST_TEST(ticks_io.poll() == 1u); // no tick queued for later: the tick, sent home to go
}

// A tick posted to the io_context itself (or to a strand of it made before the scheduler, whose
// service shuts down after the scheduler's) comes back only through that context, which destroys
// it unrun as it goes: the destruction cannot wait for it, and the operation ends then.
BOOST_AUTO_TEST_CASE(destroying_the_io_context_with_ticks_posted_to_itself_destroys_them_unrun,
                     *boost::unit_test::timeout(120))
{
    sched::test::manual_clock_fixture time;
    manual_pool pool(1);
    auto io = std::make_unique<boost::asio::io_context>();
    std::optional strand(boost::asio::make_strand(*io));
    manual_scheduler scheduler(*io, pool);
    counter ticks;
    auto alive = std::make_shared<int>(0);
    const std::weak_ptr<int> watch = alive;
    scheduler.async_schedule_at_fixed_rate(
        0s, 1s, boost::asio::bind_executor(*io, [&] { ticks.increment(); }),
        [alive](std::exception_ptr, std::size_t) {});
    scheduler.async_schedule_at_fixed_rate(
        0s, 1s, boost::asio::bind_executor(*strand, [&] { ticks.increment(); }),
        [alive = std::move(alive)](std::exception_ptr, std::size_t) {});
    strand.reset(); // the ticks' copies keep it
    // The worker has posted both first ticks, which io has not run.
    BOOST_TEST_REQUIRE(eventually([&] { return pool.queue().size() == 0u; }));
    sched::test::pool_fixture::settle(pool);
    sched::test::blocking_call destroyer([&] { io.reset(); });
    BOOST_TEST_REQUIRE((destroyer.result().wait_for(1min) == std::future_status::ready));
    BOOST_TEST(ticks.value() == 0);
    BOOST_TEST(watch.expired()); // both handlers destroyed unrun, with io's others
    BOOST_TEST(pool.queue().empty());
}

// The same with a scheduler whose executor is a strand of that context: the operation's
// completion goes to the strand, whose service has shut down by then and destroys it at once.
// A handler that holds the pool's last reference destroys the pool then, outside the pool's
// bookkeeping of the tick's return.
BOOST_AUTO_TEST_CASE(a_handler_destroyed_by_a_strand_that_shut_down_may_free_the_pool,
                     *boost::unit_test::timeout(120))
{
    sched::test::manual_clock_fixture time;
    auto pool = std::make_shared<manual_pool>(1);
    const std::weak_ptr<manual_pool> watch = pool;
    auto io = std::make_unique<boost::asio::io_context>();
    std::optional<manual_scheduler> scheduler(std::in_place, boost::asio::make_strand(*io), *pool);
    bool invoked = false;
    scheduler->async_schedule_at_fixed_rate(
        0s, 1s, boost::asio::bind_executor(*io, [] {}),
        [&invoked, keep = pool](std::exception_ptr, std::size_t) { invoked = true; });
    scheduler.reset(); // its strand goes before its context
    // The worker has posted the first tick, which io has not run.
    BOOST_TEST_REQUIRE(eventually([&] { return pool->queue().size() == 0u; }));
    sched::test::pool_fixture::settle(*pool);
    pool.reset(); // the handler holds the pool's last reference
    sched::test::blocking_call destroyer([&] { io.reset(); });
    BOOST_TEST_REQUIRE((destroyer.result().wait_for(1min) == std::future_status::ready));
    BOOST_TEST(watch.expired());
    BOOST_TEST(!invoked);
}

BOOST_FIXTURE_TEST_CASE(a_bound_tick_cancelled_on_its_way_to_its_executor_does_not_run,
                        periodic_fixture)
{
    boost::asio::io_context ticks_io;
    boost::asio::cancellation_signal signal;
    counter ticks;
    scheduler.async_schedule_at_fixed_rate(
        0s, 1s, boost::asio::bind_executor(ticks_io, [&] { ticks.increment(); }),
        boost::asio::bind_cancellation_slot(signal.slot(), on_end()));
    // The worker has posted the first tick to ticks_io, which has not run it.
    BOOST_TEST_REQUIRE(eventually([&] { return pool.queue().size() == 0u; }));
    settle(pool);
    signal.emit(cancellation_type::total); // no tick has run: no effects yet, so it is accepted
    // The posted tick arrives, and does not tick.
    BOOST_TEST(ticks_io.run_one_for(std::chrono::minutes(1)) == 1u);
    complete_one();
    BOOST_TEST(ticks.value() == 0);
    BOOST_TEST(ticks_at_end.value_or(1) == 0u);
    BOOST_TEST(code_in(why) == boost::asio::error::operation_aborted);
}

BOOST_FIXTURE_TEST_CASE(terminal_cancellation_asks_a_running_tick_to_stop,
                        periodic_fixture,
                        *boost::unit_test::timeout(120))
{
    boost::asio::cancellation_signal signal;
    std::atomic<bool> ticking{false};
    std::atomic<bool> asked_to_stop{false};
    std::atomic<bool> give_up{false}; // lets the tick end if the test fails
    scheduler.async_schedule_at_fixed_rate(
        0s, 1s,
        [&](std::stop_token stop) {
            ticking = true;
            while (!stop.stop_requested() && !give_up)
                std::this_thread::yield();
            asked_to_stop = stop.stop_requested();
        },
        boost::asio::bind_cancellation_slot(signal.slot(), on_end()));
    BOOST_TEST_REQUIRE(eventually([&] { return ticking.load(); }));
    signal.emit(cancellation_type::terminal);
    const bool stopped = eventually([&] { return asked_to_stop.load(); });
    give_up = true;
    BOOST_TEST(stopped);
    complete_one();
    BOOST_TEST(ticks_at_end.value_or(0) == 1u);
    BOOST_TEST(code_in(why) == boost::asio::error::operation_aborted);
}

BOOST_FIXTURE_TEST_CASE(a_tick_is_told_its_schedule_and_skip_waits_for_the_grid, periodic_fixture)
{
    std::atomic<int> hooked_runs{0};
    sched::pool_options options = single_worker();
    options.before_execute = [&] {
        ++hooked_runs;
    };
    manual_pool hooked(options);
    manual_scheduler on_hooked(io, hooked);
    boost::asio::cancellation_signal signal;
    tick_log log;
    on_hooked.async_schedule_at_fixed_rate(
        0s, 10s,
        [&](const tick& t) {
            if (t.index == 0)
                manual_clock::advance(105s); // a slow first tick: 10..100 pass during it
            log.record(t);                   // after: once the test sees it, the clock is at 105
        },
        {.missed = sched::missed_tick_policy::skip()},
        boost::asio::bind_cancellation_slot(signal.slot(), on_end()));
    BOOST_TEST_REQUIRE(log.runs.wait_for_at_least(1));
    settle(hooked); // past 105: the tick due at 10 was skipped
    BOOST_TEST(log.runs.value() == 1);
    manual_clock::advance(5s);
    BOOST_TEST_REQUIRE(log.runs.wait_for_at_least(2));
    BOOST_TEST_REQUIRE(eventually([&] { return hooked.queue().size() == 1u; }));
    end_after_the_skip(signal, log);
    BOOST_TEST(hooked_runs.load() == 3); // two ticks and settle()'s task: the skip is no run
}

BOOST_FIXTURE_TEST_CASE(a_bound_tick_that_its_policy_skips_still_gets_both_hooks, periodic_fixture)
{
    std::atomic<int> before{0};
    std::atomic<int> after{0}; // with no exception
    sched::pool_options options = single_worker();
    options.before_execute = [&] {
        ++before;
    };
    options.after_execute = [&](std::exception_ptr e) {
        if (!e)
            ++after;
    };
    manual_pool hooked(options);
    manual_scheduler on_hooked(io, hooked);
    boost::asio::io_context ticks_io;
    boost::asio::cancellation_signal signal;
    tick_log log;
    on_hooked.async_schedule_at_fixed_rate(
        0s, 10s,
        boost::asio::bind_executor(ticks_io,
                                   [&](const tick& t) {
                                       if (t.index == 0)
                                           manual_clock::advance(105s); // 10..100 pass during it
                                       log.record(t);
                                   }),
        {.missed = sched::missed_tick_policy::skip()},
        boost::asio::bind_cancellation_slot(signal.slot(), on_end()));
    BOOST_TEST_REQUIRE(ticks_io.run_one_for(std::chrono::minutes(1)) == 1u); // the first tick
    BOOST_TEST(after.load() == 1); // (the worker may already be posting the next)
    // The point due at 10 is posted as well, and skipped where it was to run: the hooks
    // bracket its hand-off all the same.
    ticks_io.restart();
    BOOST_TEST_REQUIRE(ticks_io.run_one_for(std::chrono::minutes(1)) == 1u);
    BOOST_TEST(log.runs.value() == 1);
    BOOST_TEST(before.load() == 2);
    BOOST_TEST(after.load() == 2);
    BOOST_TEST_REQUIRE(eventually([&] { return hooked.queue().size() == 1u; }));
    manual_clock::advance(5s);
    ticks_io.restart();
    BOOST_TEST_REQUIRE(ticks_io.run_one_for(std::chrono::minutes(1)) == 1u); // due at 110
    BOOST_TEST(before.load() == 3);
    BOOST_TEST(after.load() == 3);
    BOOST_TEST_REQUIRE(eventually([&] { return hooked.queue().size() == 1u; }));
    end_after_the_skip(signal, log);
}

BOOST_FIXTURE_TEST_CASE(a_bound_tick_that_keeps_running_reports_its_failures_to_the_sink,
                        periodic_fixture)
{
    error_log errors;
    sched::pool_options options = single_worker();
    options.error_sink = errors.sink();
    manual_pool sinking(options);
    manual_scheduler on_sinking(io, sinking);
    boost::asio::io_context ticks_io;
    auto strand = boost::asio::make_strand(ticks_io);
    boost::asio::cancellation_signal signal;
    on_sinking.async_schedule_at_fixed_rate(
        0s, 1s,
        boost::asio::bind_executor(
            strand,
            [](const tick& t) { throw std::runtime_error("tick " + std::to_string(t.index)); }),
        {.on_failure = sched::failure_policy::keep_running()},
        boost::asio::bind_cancellation_slot(signal.slot(), on_end()));
    for (int k = 1; k <= 3; ++k)
    {
        ticks_io.restart();
        // The tick runs, and throws.
        BOOST_TEST_REQUIRE(ticks_io.run_one_for(std::chrono::minutes(1)) == 1u);
        BOOST_TEST_REQUIRE(eventually([&] { return sinking.queue().size() == 1u; }));
        if (k < 3)
            manual_clock::advance(1s);
    }
    signal.emit(cancellation_type::terminal);
    complete_one();
    BOOST_TEST(ticks_at_end.value_or(0) == 3u);
    BOOST_TEST(code_in(why) == boost::asio::error::operation_aborted); // not ended by a failure
    const std::vector<std::string> expected{"tick 0", "tick 1", "tick 2"};
    BOOST_TEST(errors.snapshot() == expected, boost::test_tools::per_element());
}

BOOST_FIXTURE_TEST_CASE(invalid_periods_complete_with_invalid_argument_and_schedule_nothing,
                        periodic_fixture)
{
    scheduler.async_schedule_at_fixed_rate(
        0s, 0s, [] {}, on_end());
    BOOST_TEST(pool.queue().size() == 0u);
    complete_one();
    BOOST_CHECK_THROW(std::rethrow_exception(why), std::invalid_argument);
    BOOST_TEST(ticks_at_end.value_or(1) == 0u);

    why = nullptr;
    scheduler.async_schedule_with_fixed_delay(
        0s, -1s, [] {}, on_end());
    complete_one();
    BOOST_CHECK_THROW(std::rethrow_exception(why), std::invalid_argument);

    // Options that do not fit the period or the kind.
    why = nullptr;
    scheduler.async_schedule_at_fixed_rate(
        0s, 1s, [] {}, {.spread = sched::jitter::uniform(2s)}, on_end());
    complete_one();
    BOOST_CHECK_THROW(std::rethrow_exception(why), std::invalid_argument);
    why = nullptr;
    scheduler.async_schedule_with_fixed_delay(
        0s, 1s, [] {}, {.missed = sched::missed_tick_policy::skip()}, on_end());
    complete_one();
    BOOST_CHECK_THROW(std::rethrow_exception(why), std::invalid_argument);
    BOOST_TEST(pool.queue().size() == 0u);
}

BOOST_FIXTURE_TEST_CASE(shutdown_ends_a_periodic_operation_with_the_shutdown_error,
                        periodic_fixture)
{
    counter ticks;
    scheduler.async_schedule_at_fixed_rate(
        0s, 1s, [&] { ticks.increment(); }, on_end());
    BOOST_TEST_REQUIRE(ticks.wait_for_at_least(1));
    BOOST_TEST_REQUIRE(eventually([&] { return pool.queue().size() == 1u; }));
    pool.shutdown(); // periodic tasks stop by default
    complete_one();
    BOOST_TEST(code_in(why) == make_error_code(sched::error::shutdown));
    BOOST_TEST(ticks_at_end.value_or(0) == 1u);
}

BOOST_AUTO_TEST_SUITE_END()
