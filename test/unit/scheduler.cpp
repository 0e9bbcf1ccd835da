#include <sched/error.hpp>
#include <sched/scheduler.hpp>

#include <sched/detail/completion_queue.hpp>
#include <sched/detail/scheduler_service.hpp>

#include <boost/asio/bind_allocator.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/execution/any_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/io_context_strand.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <functional>
#include <latch>
#include <memory>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "support/blocking_call.hpp"
#include "support/counting_allocator.hpp"
#include "support/failing_allocation.hpp"
#include "support/failing_executor.hpp"
#include "support/io_fixture.hpp"
#include "support/stderr_capture.hpp"
#include "support/wait.hpp"

using namespace std::chrono_literals;
using boost::asio::cancellation_type;
using sched::manual_clock;
using sched::test::code_in;
using sched::test::custom_error;
using sched::test::eventually;
using sched::test::manual_pool;
using sched::test::manual_scheduler;

namespace {

using error_code = boost::system::error_code;

using sched::test::scheduler_fixture;

// The service that the schedulers on `io` with the steady clock share.
const sched::detail::scheduler_service<std::chrono::steady_clock>&
steady_service(boost::asio::io_context& io)
{
    return boost::asio::use_service<sched::detail::scheduler_service<std::chrono::steady_clock>>(
        io);
}

} // namespace

BOOST_TEST_DONT_PRINT_LOG_VALUE(boost::asio::cancellation_type)

BOOST_AUTO_TEST_SUITE(test_scheduler)

BOOST_FIXTURE_TEST_CASE(async_wait_completes_on_the_io_context_when_due, scheduler_fixture)
{
    std::optional<error_code> result;
    std::thread::id ran_on;
    scheduler.async_wait(10s, [&](error_code ec) {
        result = ec;
        ran_on = std::this_thread::get_id();
    });
    manual_clock::advance(9s);
    settle(pool); // a wait due by now would have completed
    BOOST_TEST(io.poll() == 0u);
    BOOST_TEST(!io.stopped()); // the pending wait counts as outstanding work
    manual_clock::advance(1s);
    complete_one();
    BOOST_REQUIRE(result);
    BOOST_TEST(!*result);
    BOOST_TEST((ran_on == std::this_thread::get_id()));
}

// A delay in a finer unit than the clock's is rounded up, never down: 1.5 ns on a clock of
// nanoseconds waits 2 ns (a review's finding; before, 1 ns).
BOOST_FIXTURE_TEST_CASE(a_delay_finer_than_the_clock_is_not_cut_short, scheduler_fixture)
{
    std::optional<error_code> result;
    scheduler.async_wait(std::chrono::duration<double, std::nano>(1.5),
                         [&](error_code ec) { result = ec; });
    manual_clock::advance(1ns);
    settle(pool);
    BOOST_TEST(io.poll() == 0u);
    manual_clock::advance(1ns);
    complete_one();
    BOOST_TEST((result == error_code()));
}

// At the time point, not that long from now (the clock is past the epoch) nor at once.
BOOST_FIXTURE_TEST_CASE(async_wait_at_a_time_point, scheduler_fixture)
{
    manual_clock::advance(1s);
    std::optional<error_code> result;
    scheduler.async_wait(at(3s), [&](error_code ec) { result = ec; });
    manual_clock::advance_to(at(3s) - 1ms);
    settle(pool);
    BOOST_TEST(run_ready() == 0u);
    BOOST_TEST(!result);
    manual_clock::advance(1ms);
    complete_one();
    BOOST_TEST((result && !*result));
}

BOOST_FIXTURE_TEST_CASE(io_context_run_returns_only_after_the_pending_operation, scheduler_fixture)
{
    std::atomic<bool> completed{false};
    scheduler.async_wait(1s, [&](error_code) { completed = true; });
    std::thread runner([&] { io.run_for(std::chrono::minutes(1)); });
    manual_clock::advance(1s);
    runner.join(); // run() returned: only after the handler ran
    BOOST_TEST(completed.load());
}

BOOST_FIXTURE_TEST_CASE(io_context_runs_while_any_operation_is_pending_and_again_for_later_ones,
                        scheduler_fixture)
{
    std::atomic<int> completed{0};
    auto count = [&](error_code) {
        ++completed;
    };
    scheduler.async_wait(1s, count);
    scheduler.async_wait(2s, count);
    std::thread runner([&] { io.run_for(std::chrono::minutes(1)); });
    manual_clock::advance(1s);
    BOOST_TEST_REQUIRE(sched::test::eventually([&] { return completed == 1; }));
    BOOST_TEST(!io.stopped()); // the second keeps it running
    manual_clock::advance(1s);
    runner.join(); // returns once the second has run: nothing is pending
    BOOST_TEST(completed == 2);

    // From nothing pending, the next operation counts as outstanding work again.
    io.restart();
    scheduler.async_wait(1s, count);
    std::thread second_runner([&] { io.run_for(std::chrono::minutes(1)); });
    manual_clock::advance(1s);
    second_runner.join();
    BOOST_TEST(completed == 3);
}

BOOST_FIXTURE_TEST_CASE(async_schedule_runs_work_on_the_pool_and_completes_with_its_value,
                        scheduler_fixture)
{
    std::optional<int> value;
    std::exception_ptr error;
    std::thread::id work_thread;
    scheduler.async_schedule(
        5s,
        [&] {
            work_thread = std::this_thread::get_id();
            return 42;
        },
        [&](std::exception_ptr e, int v) {
            error = e;
            value = v;
        });
    manual_clock::advance(5s);
    complete_one();
    BOOST_TEST(!error);
    BOOST_TEST(value.value_or(0) == 42);
    BOOST_TEST((work_thread != std::thread::id() && work_thread != std::this_thread::get_id()));
}

// Void work at a time point: it runs at that time (not that long from now, nor at once).
BOOST_FIXTURE_TEST_CASE(async_schedule_of_void_work, scheduler_fixture)
{
    manual_clock::advance(1s);
    std::atomic<bool> ran{false};
    std::optional<std::exception_ptr> error;
    scheduler.async_schedule(
        at(2s), [&] { ran = true; }, [&](std::exception_ptr e) { error = e; });
    manual_clock::advance_to(at(2s) - 1ms);
    settle(pool);
    BOOST_TEST(!ran);
    BOOST_TEST(run_ready() == 0u);
    manual_clock::advance(1ms);
    complete_one();
    BOOST_TEST(ran);
    BOOST_TEST((error && !*error));
}

namespace {
thread_local std::string trace_id; // a context that lives on the thread that starts operations
} // namespace

// pool_options.hpp: decorate_task runs "on the scheduling thread for every new task", and its
// wrapper "wraps every run of that task". async_schedule's work and every tick of a periodic
// operation (on a worker, or through the executor it is bound to) are such tasks; a wait runs no
// work, and an operation whose input is rejected schedules nothing.
BOOST_AUTO_TEST_CASE(the_pools_decorate_task_wraps_the_work_and_ticks_of_operations)
{
    using tick = sched::basic_tick<manual_clock>;
    int decorations = 0; // the hook runs on this thread
    sched::pool_options options = sched::test::pool_fixture::single_worker();
    options.decorate_task = [&] {
        ++decorations;
        return sched::task_wrapper([id = trace_id](const std::function<void()>& run) {
            trace_id = id; // the context of the thread that started the operation
            const std::unique_ptr<std::string, void (*)(std::string*)> restore(
                &trace_id, [](std::string* id) { id->clear(); }); // if the run throws too
            run();
        });
    };
    boost::asio::io_context io;
    boost::asio::io_context ticks_io;
    manual_pool pool(options);
    manual_scheduler scheduler(io, pool);
    const auto strand = boost::asio::make_strand(ticks_io);

    std::optional<std::string> work_saw;
    trace_id = "work";
    scheduler.async_schedule(
        1s, [] { return trace_id; },
        [&](std::exception_ptr e, std::string id) {
            BOOST_TEST(!e, "the work failed");
            work_saw = id;
        });
    std::vector<std::string> ticks_saw;
    std::optional<std::size_t> ticks;
    trace_id = "tick";
    scheduler.async_schedule_at_fixed_rate(
        1s, 1s,
        [&](const tick& t) {
            ticks_saw.push_back(trace_id);
            if (t.index == 1)
                throw custom_error(); // ends the operation
        },
        [&](std::exception_ptr, std::size_t n) { ticks = n; });
    std::vector<std::string> bound_saw;
    std::optional<std::size_t> bound_ticks;
    trace_id = "bound";
    scheduler.async_schedule_at_fixed_rate(
        1s, 1s,
        boost::asio::bind_executor(strand,
                                   [&](const tick& t) {
                                       BOOST_TEST(strand.running_in_this_thread());
                                       bound_saw.push_back(trace_id);
                                       if (t.index == 1)
                                           throw custom_error();
                                   }),
        [&](std::exception_ptr, std::size_t n) { bound_ticks = n; });
    std::optional<error_code> waited;
    trace_id = "wait";
    scheduler.async_wait(1s, [&](error_code ec) { waited = ec; });
    std::exception_ptr rejected;
    scheduler.async_schedule(
        std::chrono::duration<double>(std::nan("")), [] {},
        [&](std::exception_ptr e) { rejected = e; });
    trace_id.clear();
    BOOST_TEST(decorations == 3); // the work and the two periodic operations

    for (int k = 0; k < 2; ++k)
    {
        manual_clock::advance(1s);
        ticks_io.restart();
        BOOST_TEST_REQUIRE(ticks_io.run_one_for(std::chrono::minutes(1)) == 1u); // a bound tick
    }
    io.run_for(std::chrono::minutes(1));
    BOOST_TEST_REQUIRE(io.stopped()); // every operation has completed

    BOOST_TEST(work_saw.value_or("none") == "work");
    BOOST_TEST((ticks_saw == std::vector<std::string>{"tick", "tick"}),
               boost::test_tools::per_element());
    BOOST_TEST(ticks.value_or(0) == 2u);
    BOOST_TEST((bound_saw == std::vector<std::string>{"bound", "bound"}),
               boost::test_tools::per_element());
    BOOST_TEST(bound_ticks.value_or(0) == 2u);
    BOOST_TEST((waited && !*waited));
    BOOST_TEST_REQUIRE(bool(rejected));
    BOOST_CHECK_THROW(std::rethrow_exception(rejected), std::invalid_argument);
    BOOST_TEST(decorations == 3);
    BOOST_TEST(trace_id.empty()); // the bound ticks' wrapper ran on this thread, and restored it
}

// pool_options.hpp: what decorate_task throws leaves the initiating function, which starts
// nothing; the handler goes unrun.
BOOST_AUTO_TEST_CASE(a_throwing_decorate_task_fails_the_initiation_which_starts_nothing)
{
    sched::pool_options options = sched::test::pool_fixture::single_worker();
    options.decorate_task = []() -> sched::task_wrapper {
        throw custom_error();
    };
    boost::asio::io_context io;
    manual_pool pool(options);
    manual_scheduler scheduler(io, pool);
    bool invoked = false;
    BOOST_CHECK_THROW(scheduler.async_schedule(
                          1s, [] {}, [&](std::exception_ptr) { invoked = true; }),
                      custom_error);
    BOOST_CHECK_THROW(scheduler.async_schedule_at_fixed_rate(
                          1s, 1s, [] {}, [&](std::exception_ptr, std::size_t) { invoked = true; }),
                      custom_error);
    BOOST_TEST(pool.queue().empty());
    manual_clock::advance(1s);
    io.run_for(std::chrono::minutes(1));
    BOOST_TEST(io.stopped()); // nothing pending: no work counted
    BOOST_TEST(!invoked);
}

BOOST_FIXTURE_TEST_CASE(the_works_exception_arrives_unchanged, scheduler_fixture)
{
    std::exception_ptr error;
    int value = -1;
    scheduler.async_schedule(
        0s, []() -> int { throw custom_error(); },
        [&](std::exception_ptr e, int v) {
            error = e;
            value = v;
        });
    complete_one();
    BOOST_CHECK_THROW(std::rethrow_exception(error), custom_error);
    BOOST_TEST(value == 0);
}

BOOST_FIXTURE_TEST_CASE(a_due_operation_still_completes_outside_the_initiating_function,
                        scheduler_fixture)
{
    bool invoked = false;
    scheduler.async_wait(-1s, [&](error_code) { invoked = true; });
    BOOST_TEST(!invoked);
    complete_one();
    BOOST_TEST(invoked);
}

// On a thread running the io_context, where completions join a batch run there rather than a
// post: an operation that ends at once (rejected by a shut-down pool) still does not complete
// inside its initiating function, nor one cancelled inside the emit.
BOOST_FIXTURE_TEST_CASE(on_the_io_contexts_thread_nothing_completes_inside_initiation_or_emit,
                        scheduler_fixture)
{
    boost::asio::cancellation_signal signal;
    std::optional<error_code> cancelled;
    std::optional<error_code> rejected;
    bool cancelled_inside_emit = true;
    bool rejected_inside_initiation = true;
    boost::asio::post(io, [&] {
        scheduler.async_wait(10s, boost::asio::bind_cancellation_slot(
                                      signal.slot(), [&](error_code ec) { cancelled = ec; }));
        signal.emit(cancellation_type::terminal);
        cancelled_inside_emit = cancelled.has_value();
        pool.shutdown();
        scheduler.async_wait(1s, [&](error_code ec) { rejected = ec; });
        rejected_inside_initiation = rejected.has_value();
    });
    run_to_end();
    BOOST_TEST(!cancelled_inside_emit);
    BOOST_TEST(!rejected_inside_initiation);
    BOOST_TEST((cancelled == boost::asio::error::operation_aborted));
    BOOST_TEST((rejected == sched::error::shutdown));
}

BOOST_FIXTURE_TEST_CASE(handlers_may_be_move_only, scheduler_fixture)
{
    auto owned = std::make_unique<int>(7);
    int seen = 0;
    scheduler.async_schedule(
        0s, [p = std::make_unique<int>(5)] { return *p; },
        [&seen, owned = std::move(owned)](std::exception_ptr, int v) { seen = v + *owned; });
    complete_one();
    BOOST_TEST(seen == 12);
}

BOOST_FIXTURE_TEST_CASE(the_handler_runs_through_its_associated_executor, scheduler_fixture)
{
    boost::asio::io_context other;
    std::thread::id ran_on;
    scheduler.async_wait(1s, boost::asio::bind_executor(
                                 other, [&](error_code) { ran_on = std::this_thread::get_id(); }));
    BOOST_TEST(io.poll() == 0u);
    BOOST_TEST(!io.stopped()); // while it is pending, work is counted on the scheduler's executor
    manual_clock::advance(1s);
    settle(pool); // the completion has gone to `other`: the scheduler's executor is done with it
    BOOST_TEST(io.poll() == 0u);
    BOOST_TEST(io.stopped());
    // Returns once the handler has run.
    std::thread runner([&] { other.run_for(std::chrono::minutes(1)); });
    const std::thread::id runner_id = runner.get_id();
    runner.join();
    BOOST_TEST((ran_on == runner_id));
}

// As with Asio's own operations, a completion that has left for the handler's executor no longer
// needs the scheduler's io_context, which may go before the handler runs.
BOOST_AUTO_TEST_CASE(a_handler_waiting_on_its_own_executor_outlives_the_schedulers_io_context)
{
    sched::test::manual_clock_fixture time;
    manual_pool pool(1);
    boost::asio::io_context handlers_io;
    std::optional<error_code> result;
    {
        boost::asio::io_context io;
        manual_scheduler scheduler(io, pool);
        scheduler.async_wait(
            0s, boost::asio::bind_executor(handlers_io, [&](error_code ec) { result = ec; }));
        sched::test::pool_fixture::settle(pool); // fired: the completion waits in handlers_io
    }
    BOOST_TEST(handlers_io.run() == 1u);
    BOOST_TEST((result == error_code()));
}

// Asio allocates each function posted: when that fails, the handler goes unrun, as with a
// shut-down context, and nothing is left counted on the scheduler's io_context.
BOOST_FIXTURE_TEST_CASE(a_completion_that_cannot_be_posted_destroys_its_handler_unrun,
                        scheduler_fixture)
{
    boost::asio::io_context other;
    const std::atomic<bool> out_of_memory{true};
    auto alive = std::make_shared<int>(0);
    const std::weak_ptr<int> watch = alive;
    bool invoked = false;
    scheduler.async_wait(1s,
                         boost::asio::bind_executor(
                             sched::test::failing_executor(other, out_of_memory),
                             [&invoked, alive = std::move(alive)](error_code) { invoked = true; }));
    manual_clock::advance(1s);
    settle(pool); // the wait fired, and its completion could not be posted
    BOOST_TEST(watch.expired());
    run_to_end(); // returns: nothing keeps the scheduler's io_context running
    BOOST_TEST(other.run() == 0u);
    BOOST_TEST(!invoked);
}

// A post that comes once the scheduler's service has shut down (a timeout falling due as its
// io_context is destroyed) is not made: the context is destroying its handlers unrun, which Asio
// does without its lock, so a post then would race that (a review's finding).
BOOST_AUTO_TEST_CASE(a_service_that_has_shut_down_posts_nothing_to_its_context)
{
    using service_type = sched::detail::scheduler_service<manual_clock>;
    // Posts through the service as the context destroys it unrun, after the service shut down.
    class late_poster
    {
    public:
        late_poster(service_type& service, bool& posted, bool& tried) noexcept
            : service_(&service), posted_(&posted), tried_(&tried)
        {}
        late_poster(late_poster&& other) noexcept
            : service_(std::exchange(other.service_, nullptr)), posted_(other.posted_),
              tried_(other.tried_)
        {}
        late_poster& operator=(late_poster&&) = delete;
        ~late_poster()
        {
            if (!service_)
                return;
            service_->post_here([this] { *posted_ = true; });
            *tried_ = true;
        }

        void operator()() const {}

    private:
        service_type* service_;
        bool* posted_;
        bool* tried_;
    };
    bool posted = false;
    bool tried = false;
    {
        boost::asio::io_context io;
        service_type& service = service_type::of(io, &io); // shuts down before Asio's scheduler
        boost::asio::post(io, late_poster(service, posted, tried));
    }
    BOOST_TEST(tried);
    BOOST_TEST(!posted);
}

// An executor that refuses the completion with another exception (an empty any_io_executor's
// bad_executor, say): the handler goes unrun as above, and the exception is written on
// std::cerr rather than lost.
BOOST_FIXTURE_TEST_CASE(a_completion_its_executor_refuses_is_reported, scheduler_fixture)
{
    boost::asio::io_context other;
    const std::atomic<bool> refuse{true};
    bool invoked = false;
    sched::test::stderr_capture captured;
    scheduler.async_wait(
        1s, boost::asio::bind_executor(
                sched::test::failing_executor(
                    other, refuse, std::make_exception_ptr(std::runtime_error("closed for now"))),
                [&invoked](error_code) { invoked = true; }));
    manual_clock::advance(1s);
    settle(pool); // the wait fired, and its executor refused the completion
    BOOST_TEST(
        captured.text().find("refused it; its handler was destroyed unrun: closed for now") !=
        std::string::npos);
    run_to_end(); // returns: nothing keeps the scheduler's io_context running
    BOOST_TEST(other.run() == 0u);
    BOOST_TEST(!invoked);
}

// A handler whose move throws as its operation completes goes unrun: it is destroyed, its
// executor's work is released, and the exception leaves run() (as with Asio's own operations).
// Before, it leaked, and a run() of the io_context bound to it never returned: a review's probe.
BOOST_FIXTURE_TEST_CASE(a_handler_whose_move_throws_at_completion_is_destroyed_and_lets_go,
                        scheduler_fixture)
{
    struct refuses_to_move_later
    {
        std::shared_ptr<int> alive;
        const bool* refuse;
        bool* invoked;

        refuses_to_move_later(std::shared_ptr<int> a, const bool* r, bool* i)
            : alive(std::move(a)), refuse(r), invoked(i)
        {}
        refuses_to_move_later(refuses_to_move_later&& other)
            : alive(other.alive), refuse(other.refuse), invoked(other.invoked)
        {
            if (*refuse)
                throw std::runtime_error("the handler refuses to move");
        }
        void operator()(error_code) { *invoked = true; }
    };
    auto strand = boost::asio::make_strand(io);
    auto alive = std::make_shared<int>(0);
    const std::weak_ptr<int> watch = alive;
    bool refuse = false;
    bool invoked = false;
    scheduler.async_wait(
        1s, boost::asio::bind_executor(strand, refuses_to_move_later(alive, &refuse, &invoked)));
    alive.reset();
    refuse = true;
    manual_clock::advance(1s);
    io.restart();
    BOOST_CHECK_THROW(io.run_for(std::chrono::minutes(1)), std::runtime_error);
    BOOST_TEST(!invoked);
    BOOST_TEST(watch.expired());
    run_to_end(); // returns: no work is left on the strand or the io_context
}

BOOST_FIXTURE_TEST_CASE(memory_comes_from_the_handlers_allocator_and_is_freed_before_it_runs,
                        scheduler_fixture)
{
    sched::test::allocation_log log;
    long live_in_handler = -1;
    scheduler.async_schedule(
        1s, [] { return std::string(100, 'x'); },
        boost::asio::bind_allocator(
            sched::test::counting_allocator<void>(log),
            [&](std::exception_ptr, std::string) { live_in_handler = log.live(); }));
    BOOST_TEST(log.allocations() >= 1);
    manual_clock::advance(1s);
    complete_one();
    BOOST_TEST(live_in_handler == 0);
    BOOST_TEST(log.live() == 0);
}

// The same for a handler that goes unrun, as with Asio's own operations (which move the handler
// out, free the memory, then let the handler go): a handler may own the arena its allocator
// serves (Asio's allocation example: a session holds the arena, its handlers the session).
BOOST_AUTO_TEST_CASE(an_unrun_handler_has_its_allocators_memory_back_before_it_goes)
{
    // Records how much of the log's memory was still out as the last handler copy went.
    class owner
    {
    public:
        owner(const sched::test::allocation_log& log, long& live_at_end) noexcept
            : log_(log), live_at_end_(live_at_end)
        {}
        owner(const owner&) = delete;
        owner& operator=(const owner&) = delete;
        ~owner() { live_at_end_ = log_.live(); }

    private:
        const sched::test::allocation_log& log_;
        long& live_at_end_;
    };
    sched::test::manual_clock_fixture time;
    manual_pool pool(1);
    sched::test::allocation_log log;
    long live_at_end = -1;
    bool invoked = false;
    {
        boost::asio::io_context io;
        manual_scheduler scheduler(io, pool);
        scheduler.async_wait(1h, boost::asio::bind_allocator(
                                     sched::test::counting_allocator<void>(log),
                                     [&invoked, o = std::make_shared<owner>(log, live_at_end)](
                                         error_code) { invoked = true; }));
        BOOST_TEST(log.live() > 0);
    } // the io_context goes first, and takes the waiting handler with it
    BOOST_TEST(!invoked);
    BOOST_TEST(live_at_end == 0);
    BOOST_TEST(log.live() == 0);
}

// The same for a handler bound to the pool's executor: the completion that hops there takes its
// memory from the recycler, so the handler's allocator has one block out at most (the node), as
// with Asio's own operations: an arena of one slot serves it.
BOOST_FIXTURE_TEST_CASE(a_handler_bound_to_the_pool_has_its_allocators_memory_back_as_it_runs,
                        scheduler_fixture)
{
    sched::test::allocation_log log;
    std::atomic<long> live_in_handler{-1};
    scheduler.async_wait(
        1s, boost::asio::bind_executor(
                pool.get_executor(),
                boost::asio::bind_allocator(sched::test::counting_allocator<void>(log),
                                            [&](error_code) { live_in_handler = log.live(); })));
    manual_clock::advance(1s);
    BOOST_TEST_REQUIRE(eventually([&] {
        io.poll();
        return live_in_handler.load() != -1;
    }));
    BOOST_TEST(live_in_handler.load() == 0);
    BOOST_TEST(log.allocations() == 1); // the operation's node
    BOOST_TEST(log.most_blocks_out() == 1);
}

// The same through a strand of the io_context, for every kind of operation.
BOOST_FIXTURE_TEST_CASE(a_handler_bound_to_a_strand_asks_its_allocator_for_one_block_at_a_time,
                        scheduler_fixture)
{
    sched::test::allocation_log log;
    const auto strand = boost::asio::make_strand(io);
    const auto counted = [&](auto handler) {
        return boost::asio::bind_executor(
            strand, boost::asio::bind_allocator(sched::test::counting_allocator<void>(log),
                                                std::move(handler)));
    };
    int invoked = 0;
    scheduler.async_wait(1s, counted([&](error_code) { ++invoked; }));
    manual_clock::advance(1s);
    complete_one();
    scheduler.async_schedule(
        1s, [] { return 1; }, counted([&](std::exception_ptr, int) { ++invoked; }));
    manual_clock::advance(1s);
    complete_one();
    BOOST_TEST(invoked == 2);
    BOOST_TEST(log.allocations() == 2); // each operation's node
    BOOST_TEST(log.most_blocks_out() == 1);
    BOOST_TEST(log.live() == 0);
}

BOOST_DATA_TEST_CASE_F(
    scheduler_fixture,
    every_cancellation_type_removes_a_pending_operation,
    boost::unit_test::data::make({cancellation_type::terminal, cancellation_type::partial,
                                  cancellation_type::total, cancellation_type::all}),
    type)
{
    boost::asio::cancellation_signal signal;
    std::optional<error_code> result;
    scheduler.async_wait(10s, boost::asio::bind_cancellation_slot(
                                  signal.slot(), [&](error_code ec) { result = ec; }));
    BOOST_TEST(pool.queue().size() == 1u);
    signal.emit(type);
    BOOST_TEST(pool.queue().size() == 0u); // out through its heap index, not left to expire
    BOOST_TEST(!result);                   // never inside the emit
    complete_one();
    BOOST_TEST((result && *result == boost::asio::error::operation_aborted));
}

BOOST_FIXTURE_TEST_CASE(a_signal_reused_before_the_cancelled_completion_ran_still_cancels,
                        scheduler_fixture)
{
    boost::asio::cancellation_signal signal;
    std::optional<error_code> first;
    std::optional<error_code> second;
    scheduler.async_wait(30s, boost::asio::bind_cancellation_slot(
                                  signal.slot(), [&](error_code ec) { first = ec; }));
    signal.emit(cancellation_type::terminal);
    // Cancel and re-arm: the new wait takes the signal before the first completion has run.
    scheduler.async_wait(100ms, boost::asio::bind_cancellation_slot(
                                    signal.slot(), [&](error_code ec) { second = ec; }));
    complete_one(); // the first completion must leave the second wait's slot handler alone
    BOOST_TEST((first && *first == boost::asio::error::operation_aborted));
    signal.emit(cancellation_type::terminal);
    complete_one();
    BOOST_TEST((second && *second == boost::asio::error::operation_aborted));
}

BOOST_FIXTURE_TEST_CASE(an_emission_of_no_cancellation_type_changes_nothing, scheduler_fixture)
{
    boost::asio::cancellation_signal signal;
    std::optional<error_code> result;
    scheduler.async_wait(1s, boost::asio::bind_cancellation_slot(
                                 signal.slot(), [&](error_code ec) { result = ec; }));
    signal.emit(cancellation_type::none);
    BOOST_TEST(pool.queue().size() == 1u);
    manual_clock::advance(1s);
    complete_one();
    BOOST_TEST((result && !*result));
}

BOOST_FIXTURE_TEST_CASE(cancelling_after_the_run_began_changes_nothing_one_winner,
                        scheduler_fixture)
{
    boost::asio::cancellation_signal signal;
    std::latch started(1);
    std::latch release(1);
    std::optional<int> value;
    std::exception_ptr error;
    scheduler.async_schedule(
        0s,
        [&] {
            started.count_down();
            release.wait();
            return 3;
        },
        boost::asio::bind_cancellation_slot(signal.slot(), [&](std::exception_ptr e, int v) {
            error = e;
            value = v;
        }));
    started.wait();
    signal.emit(cancellation_type::terminal); // too late: the work is running
    release.count_down();
    complete_one();
    BOOST_TEST(!error);
    BOOST_TEST(value.value_or(0) == 3);
}

BOOST_FIXTURE_TEST_CASE(terminal_cancellation_asks_running_stop_token_work_to_stop,
                        scheduler_fixture)
{
    boost::asio::cancellation_signal signal;
    std::latch started(1);
    std::latch partial_emitted(1);
    std::latch checked(1);
    std::optional<bool> stopped;
    bool stop_after_partial = true;
    scheduler.async_schedule(
        0s,
        [&](std::stop_token stop) {
            started.count_down();
            partial_emitted.wait();
            stop_after_partial = stop.stop_requested();
            checked.count_down();
            return eventually([&] { return stop.stop_requested(); });
        },
        boost::asio::bind_cancellation_slot(signal.slot(), [&](std::exception_ptr e, bool v) {
            if (!e)
                stopped = v;
        }));
    started.wait();
    signal.emit(cancellation_type::partial); // not enough to interrupt
    partial_emitted.count_down();
    checked.wait();
    BOOST_TEST(!stop_after_partial);
    signal.emit(cancellation_type::terminal);
    complete_one();
    BOOST_TEST(stopped.value_or(false)); // it ran to its end, which the stop request hastened
}

// Work that has not started has had no effect: every cancellation type takes it out.
BOOST_DATA_TEST_CASE_F(scheduler_fixture,
                       a_cancelled_async_schedule_reports_operation_aborted,
                       boost::unit_test::data::make({cancellation_type::terminal,
                                                     cancellation_type::partial,
                                                     cancellation_type::total}),
                       type)
{
    boost::asio::cancellation_signal signal;
    bool ran = false;
    std::exception_ptr error;
    scheduler.async_schedule(
        1s, [&] { ran = true; },
        boost::asio::bind_cancellation_slot(signal.slot(),
                                            [&](std::exception_ptr e) { error = e; }));
    BOOST_TEST(pool.queue().size() == 1u);
    signal.emit(type);
    BOOST_TEST(pool.queue().size() == 0u); // out through its heap index
    complete_one();
    manual_clock::advance(1s);
    settle(pool);
    BOOST_TEST(!ran);
    BOOST_TEST(code_in(error) == boost::asio::error::operation_aborted);
}

BOOST_FIXTURE_TEST_CASE(empty_work_or_nan_delay_completes_with_invalid_argument, scheduler_fixture)
{
    std::function<int()> empty;
    std::exception_ptr error;
    scheduler.async_schedule(1s, empty, [&](std::exception_ptr e, int) { error = e; });
    BOOST_TEST(pool.queue().size() == 0u);
    complete_one();
    BOOST_CHECK_THROW(std::rethrow_exception(error), std::invalid_argument);

    error = nullptr; // the same through a std::reference_wrapper, and for a periodic tick
    scheduler.async_schedule(1s, std::ref(empty), [&](std::exception_ptr e, int) { error = e; });
    BOOST_TEST(pool.queue().size() == 0u);
    complete_one();
    BOOST_CHECK_THROW(std::rethrow_exception(error), std::invalid_argument);
    std::function<void()> empty_tick;
    error = nullptr;
    scheduler.async_schedule_at_fixed_rate(1s, 1s, std::ref(empty_tick),
                                           [&](std::exception_ptr e, std::size_t) { error = e; });
    BOOST_TEST(pool.queue().size() == 0u);
    complete_one();
    BOOST_CHECK_THROW(std::rethrow_exception(error), std::invalid_argument);

    // And bound to an executor (a review's finding: scheduled, it failed with bad_function_call).
    error = nullptr;
    scheduler.async_schedule_at_fixed_rate(
        1s, 1s, boost::asio::bind_executor(io.get_executor(), empty_tick),
        [&](std::exception_ptr e, std::size_t) { error = e; });
    BOOST_TEST(pool.queue().size() == 0u);
    complete_one();
    BOOST_CHECK_THROW(std::rethrow_exception(error), std::invalid_argument);
    error = nullptr;
    scheduler.async_schedule(1s, boost::asio::bind_executor(io.get_executor(), empty),
                             [&](std::exception_ptr e, int) { error = e; });
    BOOST_TEST(pool.queue().size() == 0u);
    complete_one();
    BOOST_CHECK_THROW(std::rethrow_exception(error), std::invalid_argument);

    std::optional<error_code> result;
    scheduler.async_wait(std::chrono::duration<double>(std::nan("")),
                         [&](error_code ec) { result = ec; });
    BOOST_TEST(pool.queue().size() == 0u);
    complete_one();
    BOOST_TEST((result && *result == boost::asio::error::invalid_argument));
}

BOOST_FIXTURE_TEST_CASE(operations_on_a_shut_down_pool_complete_with_the_shutdown_error,
                        scheduler_fixture)
{
    pool.shutdown();
    std::optional<error_code> result;
    std::exception_ptr error;
    scheduler.async_wait(1s, [&](error_code ec) { result = ec; });
    scheduler.async_schedule(
        1s, [] { return 1; }, [&](std::exception_ptr e, int) { error = e; });
    BOOST_TEST(!result); // through the handler's executor, not inline
    BOOST_TEST(!error);
    run_to_end();
    BOOST_TEST((result && *result == make_error_code(sched::error::shutdown)));
    BOOST_TEST(code_in(error) == make_error_code(sched::error::shutdown));
}

BOOST_FIXTURE_TEST_CASE(shutdown_now_completes_pending_operations_with_the_shutdown_error,
                        scheduler_fixture)
{
    std::optional<error_code> result;
    scheduler.async_wait(1h, [&](error_code ec) { result = ec; });
    BOOST_TEST(pool.shutdown_now().empty()); // nothing handed back: the handler is told instead
    complete_one();
    BOOST_TEST((result && *result == make_error_code(sched::error::shutdown)));
}

BOOST_FIXTURE_TEST_CASE(pending_operations_run_after_shutdown_as_the_policy_says, scheduler_fixture)
{
    std::optional<error_code> result;
    scheduler.async_wait(1s, [&](error_code ec) { result = ec; });
    pool.shutdown(); // execute_existing_delayed_tasks_after_shutdown is true by default
    manual_clock::advance(1s);
    complete_one();
    BOOST_TEST((result && !*result));
}

BOOST_AUTO_TEST_CASE(destroying_the_pool_completes_pending_operations)
{
    sched::test::manual_clock_fixture time;
    boost::asio::io_context io;
    std::optional<error_code> result;
    std::exception_ptr error;
    {
        manual_pool pool(1);
        manual_scheduler scheduler(io, pool);
        scheduler.async_wait(1h, [&](error_code ec) { result = ec; });
        scheduler.async_schedule(
            1h, [] { return 1; }, [&](std::exception_ptr e, int) { error = e; });
    }
    io.run_for(std::chrono::minutes(1));
    BOOST_TEST((result && *result == make_error_code(sched::error::shutdown)));
    BOOST_TEST(code_in(error) == make_error_code(sched::error::shutdown));
}

// Unless the handler would run on the pool itself: then it is destroyed unrun, as a stopped Asio
// execution context destroys what was submitted to it.
BOOST_AUTO_TEST_CASE(destroying_the_pool_destroys_unrun_a_handler_bound_to_it)
{
    sched::test::manual_clock_fixture time;
    boost::asio::io_context io;
    bool called = false;
    auto alive = std::make_shared<int>(0);
    const std::weak_ptr<int> handler_state = alive;
    {
        manual_pool pool(1);
        manual_scheduler scheduler(io, pool);
        scheduler.async_wait(1h, boost::asio::bind_executor(pool.get_executor(),
                                                            [&called, alive = std::move(alive)](
                                                                error_code) { called = true; }));
    }
    io.run_for(std::chrono::minutes(1));
    BOOST_TEST(io.stopped()); // no work left behind
    BOOST_TEST(!called);
    BOOST_TEST(handler_state.expired());
}

// Work bound to the pool (its executor, or a strand of it), a periodic operation's tick or a
// one-shot operation's work, goes as the operation ends, on the pool's side: the node that the
// io_context frees later holds nothing of the pool's. Before, the node kept the work (with its
// strand) and the tick's outstanding work on the pool until the completion freed it on the
// io_context, after the pool was gone (ASan saw both freed memory used), and a graceful shutdown
// waited for that io_context to run before the pool could terminate.
BOOST_AUTO_TEST_CASE(work_bound_to_the_pool_goes_before_the_pool_does)
{
    sched::test::manual_clock_fixture time;
    boost::asio::io_context io;
    int told = 0;
    auto alive = std::make_shared<int>(0);
    const std::weak_ptr<int> work_state = alive;
    sched::pool_options options;
    options.execute_existing_delayed_tasks_after_shutdown = false; // shutdown() ends them all
    {
        manual_pool pool(std::move(options));
        manual_scheduler scheduler(io, pool);
        const auto shut_down = [&told](std::exception_ptr e, auto&&...) {
            told += code_in(e) == make_error_code(sched::error::shutdown);
        };
        scheduler.async_schedule_at_fixed_rate(
            1h, 1h, boost::asio::bind_executor(boost::asio::make_strand(pool), [alive] {}),
            shut_down);
        scheduler.async_schedule_at_fixed_rate(
            1h, 1h, boost::asio::bind_executor(pool.get_executor(), [alive] {}), shut_down);
        scheduler.async_schedule(
            1h, boost::asio::bind_executor(boost::asio::make_strand(pool), [alive] {}), shut_down);
        boost::asio::cancellation_signal signal;
        scheduler.async_schedule_at_fixed_rate(
            1h, 1h, boost::asio::bind_executor(boost::asio::make_strand(pool), [alive] {}),
            boost::asio::bind_cancellation_slot(
                signal.slot(), [&told](std::exception_ptr e, std::size_t) {
                    told += code_in(e) == boost::asio::error::operation_aborted;
                }));
        signal.emit(cancellation_type::terminal);
        alive.reset();
        pool.shutdown();
        BOOST_TEST(pool.await_termination(60s)); // the io_context has not run
    }
    BOOST_TEST(work_state.expired()); // every work went with its operation
    io.run_for(std::chrono::minutes(1));
    BOOST_TEST(told == 4);
}

// Any other work goes with its operation's memory, as the handler's completion frees it on the
// io_context: a work (or a tick bound to the io_context) may hold the last reference to its pool.
// (Destroyed as the operation ended, such a work destroyed the pool from its own worker, or
// inside the pool's hold on a tick coming back: a deadlock.)
BOOST_AUTO_TEST_CASE(a_work_may_hold_the_last_reference_to_its_pool,
                     *boost::unit_test::timeout(120))
{
    for (const bool tick : {false, true})
    {
        BOOST_TEST_CONTEXT("a periodic operation's tick bound to the io_context: " << tick)
        {
            const sched::test::stderr_capture captured; // the pool reports the tick's throw
            boost::asio::io_context io;
            auto pool = std::make_shared<sched::scheduled_thread_pool>(1);
            const std::weak_ptr<sched::scheduled_thread_pool> pool_state = pool;
            bool told = false;
            {
                sched::scheduler scheduler(io, *pool);
                if (tick)
                {
                    scheduler.async_schedule_at_fixed_rate(
                        0ms, 1h,
                        boost::asio::bind_executor(io.get_executor(),
                                                   [pool] { throw custom_error(); }),
                        [&told](std::exception_ptr e, std::size_t ticks) {
                            told = e && ticks == 1u;
                        });
                }
                else
                {
                    scheduler.async_schedule(
                        0ms, [pool] {}, [&told](std::exception_ptr e) { told = !e; });
                }
            }
            pool.reset();
            io.run_for(std::chrono::minutes(1));
            BOOST_TEST(told);
            BOOST_TEST(pool_state.expired());
        }
    }
}

// A one-shot work runs on a worker whatever executor it is bound to, and any kind of executor
// will do: only one that can name its context is asked whether it is the pool's. (Asking every
// one broke the build for a legacy io_context::strand, and for an executor without the context
// property.)
BOOST_AUTO_TEST_CASE(a_one_shot_work_may_be_bound_to_any_kind_of_executor)
{
    boost::asio::io_context io;
    sched::scheduled_thread_pool pool(1);
    sched::scheduler scheduler(io, pool);
    int results = 0;
    const auto add = [&results](std::exception_ptr e, int value) {
        BOOST_TEST(!e);
        results += value;
    };
    scheduler.async_schedule(
        0ms, boost::asio::bind_executor(boost::asio::io_context::strand(io), [] { return 1; }),
        add);
    scheduler.async_schedule(
        0ms,
        boost::asio::bind_executor(boost::asio::execution::any_executor<>(io.get_executor()),
                                   [] { return 2; }),
        add);
    io.run_for(std::chrono::minutes(1));
    BOOST_TEST(results == 3);
}

// A long-lived io_context on which pools come and go keeps nothing of those gone: its service
// drops their entries, and their alarms' timers once no handler of theirs is queued there.
BOOST_AUTO_TEST_CASE(an_io_context_keeps_no_entry_for_the_pools_it_outlives,
                     *boost::unit_test::timeout(120))
{
    boost::asio::io_context io;
    const auto& service = steady_service(io);
    for (int i = 0; i < 200; ++i)
    {
        BOOST_TEST_CONTEXT("pool " << i)
        {
            std::optional<error_code> result;
            {
                sched::scheduled_thread_pool pool(1);
                sched::scheduler scheduler(io, pool); // its alarm's timer waits for the wait
                boost::asio::cancellation_signal signal;
                scheduler.async_wait(1h, boost::asio::bind_cancellation_slot(
                                             signal.slot(), [&](error_code ec) { result = ec; }));
                signal.emit(cancellation_type::terminal);
                io.restart();
                io.run_for(std::chrono::minutes(1)); // the handler, then the alarm's own
                BOOST_TEST_REQUIRE(io.stopped());
            }
            BOOST_TEST_REQUIRE((result && *result == boost::asio::error::operation_aborted));
            // The list is looked through each time it has doubled, from 8.
            BOOST_TEST_REQUIRE(service.attached_pools() <= 16u);
        }
    }
}

// A pool destroyed while its alarm has handlers queued on an io_context that is not running (a
// timer's wake, ended by a wait that moved the timer; another timer's wait; the check that stops
// them): they run safely once the io_context runs, however many pools come and go meanwhile.
BOOST_AUTO_TEST_CASE(an_alarms_handlers_queued_when_its_pool_goes_run_safely_after,
                     *boost::unit_test::timeout(120))
{
    boost::asio::io_context io;
    const auto& service = steady_service(io);
    int ended = 0;
    const auto record = [&](error_code ec) {
        ended += ec == sched::error::shutdown;
    };
    {
        sched::scheduled_thread_pool pool(1);
        sched::scheduler scheduler(io, pool);
        // The alarm's timers wait for the first two; the third moves the one that waits for 3 h,
        // whose wait ends: its wake is queued.
        scheduler.async_wait(3h, record);
        scheduler.async_wait(1h, record);
        scheduler.async_wait(30min, record);
    } // the waits end (their completions queued) and the alarm steps down (its check queued)
    const auto come_and_go = [&] {
        for (int i = 0; i < 40; ++i) // past the list's doubling: it is looked through
        {
            sched::scheduled_thread_pool pool(1);
            sched::scheduler scheduler(io, pool);
        }
    };
    come_and_go();
    io.run_for(std::chrono::minutes(1));
    BOOST_TEST_REQUIRE(io.stopped());
    BOOST_TEST(ended == 3);
    come_and_go(); // the alarm, whose handlers have all run, goes now
    BOOST_TEST(service.attached_pools() <= 16u);
}

BOOST_AUTO_TEST_CASE(destroying_the_io_context_first_destroys_its_pending_handlers_unrun)
{
    sched::test::manual_clock_fixture time;
    manual_pool pool(1);
    auto alive = std::make_shared<int>(0);
    std::weak_ptr<int> watch = alive;
    bool invoked = false;
    {
        boost::asio::io_context io;
        manual_scheduler scheduler(io, pool);
        scheduler.async_wait(1h,
                             [&invoked, alive = std::move(alive)](error_code) { invoked = true; });
        scheduler.async_schedule(
            0s, [] { return 1; }, [&](std::exception_ptr, int) { invoked = true; });
        BOOST_TEST(pool.queue().size() >= 1u);
    }                            // the io_context goes first, with operations pending
    BOOST_TEST(watch.expired()); // the handler was destroyed with its context
    BOOST_TEST(!invoked);
    BOOST_TEST(pool.queue().size() == 0u);
    manual_clock::advance(2h); // nothing left to fire into the dead context
    sched::test::pool_fixture::settle(pool);
}

// The same for handlers bound to another context (a strand of it, the pool's executor): they
// belong to the operation's own I/O context, which destroys them unrun, as Asio's timers do,
// rather than hand them to the other context with the shutdown error. The other context's run()
// then returns, its work released.
BOOST_AUTO_TEST_CASE(destroying_the_io_context_first_destroys_handlers_bound_elsewhere_unrun)
{
    sched::test::manual_clock_fixture time;
    manual_pool pool(1);
    boost::asio::io_context other;
    auto alive = std::make_shared<int>(0);
    const std::weak_ptr<int> watch = alive;
    std::atomic<int> invoked{0};
    {
        boost::asio::io_context io;
        manual_scheduler scheduler(io, pool);
        const auto on_other = boost::asio::make_strand(other);
        scheduler.async_wait(
            1h, boost::asio::bind_executor(on_other, [&, alive](error_code) { ++invoked; }));
        scheduler.async_schedule(
            1h, [] { return 1; },
            boost::asio::bind_executor(on_other,
                                       [&, alive](std::exception_ptr, int) { ++invoked; }));
        scheduler.async_wait(1h, boost::asio::bind_executor(pool.get_executor(),
                                                            [&, alive](error_code) { ++invoked; }));
        alive.reset();
        BOOST_TEST(pool.queue().size() == 3u);
    } // the io_context goes first, with the operations pending
    BOOST_TEST(pool.queue().size() == 0u);
    BOOST_TEST(other.run_for(std::chrono::minutes(1)) == 0u);
    BOOST_TEST(other.stopped()); // no work left behind on it
    sched::test::pool_fixture::settle(pool);
    BOOST_TEST(watch.expired());
    BOOST_TEST(invoked.load() == 0);
}

// ... and such a handler is destroyed where the context's own are, as the context goes, not
// inside the pool's bookkeeping: one that holds the pool's last reference destroys the pool then.
BOOST_AUTO_TEST_CASE(a_handler_holding_the_pool_goes_with_the_io_context_destroyed_first,
                     *boost::unit_test::timeout(60))
{
    sched::test::manual_clock_fixture time;
    auto pool = std::make_shared<manual_pool>(1);
    const std::weak_ptr<manual_pool> watch = pool;
    boost::asio::io_context other;
    bool invoked = false;
    {
        boost::asio::io_context io;
        manual_scheduler scheduler(io, *pool);
        scheduler.async_wait(1h, boost::asio::bind_executor(
                                     boost::asio::make_strand(other),
                                     [&invoked, keep = pool](error_code) { invoked = true; }));
        pool.reset(); // the handler holds the pool's last reference
        BOOST_TEST(!watch.expired());
    } // the io_context goes first, and the handler with it, and the pool with the handler
    BOOST_TEST(watch.expired());
    BOOST_TEST(other.run_for(std::chrono::minutes(1)) == 0u);
    BOOST_TEST(!invoked);
}

// The same with a scheduler on a pool's executor (an execution context that is not an
// io_context), which refuses the completions as it shuts down: the handler goes once the
// scheduler's service has let go of the pool whose operations it ended.
BOOST_AUTO_TEST_CASE(a_handler_holding_the_pool_goes_with_the_pool_context_destroyed_first,
                     *boost::unit_test::timeout(120))
{
    sched::test::manual_clock_fixture time;
    auto pool = std::make_shared<manual_pool>(1);
    const std::weak_ptr<manual_pool> watch = pool;
    auto context = std::make_unique<manual_pool>(1);
    bool invoked = false;
    manual_scheduler(context->get_executor(), *pool)
        .async_wait(1h, [&invoked, keep = pool](error_code) { invoked = true; });
    pool.reset(); // the handler holds the pool's last reference
    sched::test::blocking_call destroyer([&] { context.reset(); });
    BOOST_TEST_REQUIRE((destroyer.result().wait_for(1min) == std::future_status::ready));
    BOOST_TEST(watch.expired());
    BOOST_TEST(!invoked);
}

// Out of memory, the io_context's shutdown cannot take its operations out of the queue at once
// (it makes room for every queued task first): it tries again, rather than wait for them to fall
// due.
BOOST_AUTO_TEST_CASE(destroying_the_io_context_out_of_memory_still_takes_its_operations_out,
                     *boost::unit_test::timeout(60))
{
    sched::test::manual_clock_fixture time;
    manual_pool pool(1);
    constexpr std::size_t count = 10'000;
    auto alive = std::make_shared<int>(0);
    const std::weak_ptr<int> watch = alive;
    bool invoked = false;
    {
        boost::asio::io_context io;
        manual_scheduler scheduler(io, pool);
        for (std::size_t i = 0; i < count; ++i)
            scheduler.async_wait(1h, [&invoked, alive](error_code) { invoked = true; });
        alive.reset();
        sched::test::fail_allocation_of_at_least(count * sizeof(void*));
    } // the io_context goes first; its first try to take the waits out fails
    sched::test::fail_allocation_of_at_least(0);
    BOOST_TEST(watch.expired());
    BOOST_TEST(!invoked);
    BOOST_TEST(pool.queue().size() == 0u);
}

BOOST_FIXTURE_TEST_CASE(completions_ready_together_run_in_the_order_their_operations_ended,
                        scheduler_fixture,
                        *boost::unit_test::timeout(60)) // a count left held: run() hangs
{
    constexpr int count = 5;
    boost::asio::cancellation_signal signals[count];
    std::vector<int> order;
    for (int i = 0; i < count; ++i)
    {
        scheduler.async_wait(
            1s, boost::asio::bind_cancellation_slot(signals[i].slot(), [&order, i](error_code ec) {
                BOOST_TEST(ec == boost::asio::error::operation_aborted);
                order.push_back(i);
            }));
    }
    // Cancelled on the io_context's thread: their completions join one batch there.
    boost::asio::post(io, [&] {
        for (int i : {3, 1, 4, 0, 2})
            signals[i].emit(cancellation_type::terminal);
        BOOST_TEST(order.empty()); // never inside the emits
    });
    run_to_end();
    BOOST_TEST(order == (std::vector<int>{3, 1, 4, 0, 2}), boost::test_tools::per_element());
}

BOOST_FIXTURE_TEST_CASE(a_handler_that_throws_leaves_the_rest_of_its_batch_to_run_after_in_order,
                        scheduler_fixture,
                        *boost::unit_test::timeout(60)) // a count left held: run() hangs
{
    // Waits 0, 1 and 2 end in one batch; 0 cancels 3 (queued behind the batch) and 1 throws.
    constexpr int count = 4;
    boost::asio::cancellation_signal signals[count];
    std::vector<int> order;
    for (int i = 0; i < count; ++i)
    {
        scheduler.async_wait(
            1s, boost::asio::bind_cancellation_slot(signals[i].slot(), [&, i](error_code) {
                order.push_back(i);
                if (i == 0)
                    signals[3].emit(cancellation_type::terminal);
                if (i == 1)
                    throw custom_error();
            }));
    }
    boost::asio::post(io, [&] { // on the io_context's thread: one batch
        for (int i = 0; i < 3; ++i)
            signals[i].emit(cancellation_type::terminal);
    });
    io.restart();
    BOOST_CHECK_THROW(io.run(), custom_error); // out of run(), as from any handler
    BOOST_TEST(order == (std::vector<int>{0, 1}), boost::test_tools::per_element());
    run_to_end(); // the rest of the batch first, then what was queued behind it
    BOOST_TEST(order == (std::vector<int>{0, 1, 2, 3}), boost::test_tools::per_element());
}

BOOST_FIXTURE_TEST_CASE(a_handler_that_stops_the_io_context_loses_no_other_handler,
                        scheduler_fixture,
                        *boost::unit_test::timeout(60))
{
    constexpr int count = 3;
    boost::asio::cancellation_signal signals[count];
    int runs[count] = {};
    for (int i = 0; i < count; ++i)
    {
        scheduler.async_wait(
            1s, boost::asio::bind_cancellation_slot(signals[i].slot(), [&, i](error_code) {
                ++runs[i];
                io.stop();
            }));
    }
    boost::asio::post(io, [&] { // on the io_context's thread: one batch
        for (auto& signal : signals)
            signal.emit(cancellation_type::terminal);
    });
    // As with a strand, the batch runs to its end: stop() ends run() after it, not inside it.
    io.restart();
    io.run_for(std::chrono::minutes(1));
    for (int i = 0; i < count; ++i)
        BOOST_TEST(runs[i] == 1);
    run_to_end(); // and nothing is left over, nothing runs twice
    for (int i = 0; i < count; ++i)
        BOOST_TEST(runs[i] == 1);
}

BOOST_FIXTURE_TEST_CASE(a_long_batch_lets_other_handlers_run_before_its_end,
                        scheduler_fixture,
                        *boost::unit_test::timeout(60))
{
    constexpr std::size_t share =
        sched::detail::completion_queue<sched::detail::scheduler_service<manual_clock>>::share;
    constexpr std::size_t count = share + share / 2;
    std::vector<boost::asio::cancellation_signal> signals(count);
    std::vector<std::size_t> order; // the waits' indices, and count for the other handler
    for (std::size_t i = 0; i < count; ++i)
    {
        scheduler.async_wait(
            1s, boost::asio::bind_cancellation_slot(signals[i].slot(),
                                                    [&, i](error_code) { order.push_back(i); }));
    }
    boost::asio::post(io, [&] {
        for (auto& signal : signals)
            signal.emit(cancellation_type::terminal);
        boost::asio::post(io, [&] { order.push_back(count); }); // after the batch's runner
    });
    run_to_end();
    std::vector<std::size_t> expected;
    for (std::size_t i = 0; i < share; ++i)
        expected.push_back(i);
    expected.push_back(count); // its turn comes after one runner's share
    for (std::size_t i = share; i < count; ++i)
        expected.push_back(i);
    BOOST_TEST(order == expected, boost::test_tools::per_element());
}

BOOST_FIXTURE_TEST_CASE(a_batch_of_several_shares_runs_in_order_before_what_was_queued_behind_it,
                        scheduler_fixture,
                        *boost::unit_test::timeout(60))
{
    // Carried over from runner to runner three times; each runner joins what is left of the
    // batch and what was queued since (a wait the first handler cancels), in that order.
    constexpr std::size_t share =
        sched::detail::completion_queue<sched::detail::scheduler_service<manual_clock>>::share;
    constexpr std::size_t count = 3 * share + share / 2;
    std::vector<boost::asio::cancellation_signal> signals(count + 1);
    std::vector<std::size_t> order; // the waits' indices, count for the one queued behind
    for (std::size_t i = 0; i <= count; ++i)
    {
        scheduler.async_wait(
            1s, boost::asio::bind_cancellation_slot(signals[i].slot(), [&, i](error_code) {
                order.push_back(i);
                if (i == 0)
                    signals[count].emit(cancellation_type::terminal);
            }));
    }
    boost::asio::post(io, [&] {
        for (std::size_t i = 0; i < count; ++i)
            signals[i].emit(cancellation_type::terminal);
    });
    run_to_end();
    std::vector<std::size_t> expected(count + 1);
    std::iota(expected.begin(), expected.end(), std::size_t{0});
    BOOST_TEST(order == expected, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(destroying_the_io_context_destroys_completions_it_has_not_run,
                     *boost::unit_test::timeout(60)) // a count left held: shutdown hangs
{
    sched::test::manual_clock_fixture time;
    manual_pool pool(1);
    auto alive = std::make_shared<int>(0);
    std::weak_ptr<int> watch = alive;
    int invoked = 0;
    {
        boost::asio::io_context io;
        manual_scheduler scheduler(io, pool);
        boost::asio::cancellation_signal signals[2];
        for (auto& signal : signals)
        {
            scheduler.async_wait(1h,
                                 boost::asio::bind_cancellation_slot(
                                     signal.slot(), [&invoked, alive](error_code) { ++invoked; }));
        }
        alive.reset();
        boost::asio::post(io, [&] { // on the io_context's thread: one batch, queued
            for (auto& signal : signals)
                signal.emit(cancellation_type::terminal);
        });
        BOOST_TEST(io.run_one_for(std::chrono::minutes(1)) == 1u); // the cancels only
        BOOST_TEST(pool.queue().size() == 0u);
    }                            // the io_context goes without running the batch
    BOOST_TEST(watch.expired()); // their handlers went with it
    BOOST_TEST(invoked == 0);
    sched::test::pool_fixture::settle(pool);
}

BOOST_AUTO_TEST_CASE(a_shut_down_pool_terminates_once_the_io_context_takes_its_last_operations)
{
    sched::test::manual_clock_fixture time;
    manual_pool pool(1);
    {
        boost::asio::io_context io;
        manual_scheduler scheduler(io, pool);
        scheduler.async_wait(1h, [](error_code) {});
        pool.shutdown(); // the wait stays queued: delayed tasks run after shutdown by default
        BOOST_TEST(!pool.is_terminated());
    } // the io_context goes, and its operation with it: nothing is left for the pool
    BOOST_TEST(pool.await_termination(60s));
}

BOOST_AUTO_TEST_SUITE_END()
