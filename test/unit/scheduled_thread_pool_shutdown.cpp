// scheduled_thread_pool: shutdown, its policies, rejection and termination.

#include <sched/error.hpp>
#include <sched/scheduled_thread_pool.hpp>

#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "support/blocking_call.hpp"
#include "support/counter.hpp"
#include "support/error_log.hpp"
#include "support/failing_allocation.hpp"
#include "support/gate.hpp"
#include "support/hook_clock.hpp"
#include "support/occupied_worker.hpp"
#include "support/pool_fixture.hpp"
#include "support/wait.hpp"

using namespace std::chrono_literals;
using sched::future_state;
using sched::manual_clock;
using sched::test::counter;
using sched::test::error_log;
using sched::test::eventually;
using sched::test::gate;
using sched::test::manual_future;
using sched::test::manual_pool;

namespace {

// Blocks until stop is requested on its token.
int wait_for_stop(std::stop_token stop, counter& started)
{
    std::mutex mutex;
    std::condition_variable_any never;
    started.increment();
    std::unique_lock lock(mutex);
    never.wait(lock, stop, [] { return false; });
    return stop.stop_requested() ? 1 : 0;
}

// With a call on the shut-down pool held up until `go_on` opens, lets the busy worker's last task
// end: the pool must not terminate until the call is let go, and may be destroyed as soon as it
// has, before the call's thread is joined.
void expect_termination_after_the_call(std::unique_ptr<manual_pool>& pool,
                                       sched::test::occupied_worker<manual_pool>& running,
                                       gate& go_on,
                                       std::future<void>& caller)
{
    running.release();
    running.task().get(); // the worker's last task: it may go, the pool not terminate
    BOOST_TEST(!pool->await_termination(200ms));
    go_on.open();
    BOOST_TEST_REQUIRE(pool->await_termination(60s));
    pool.reset();
    caller.get();
}

// A callable that, as the one owner left is destroyed, counts itself going and blocks until
// `go_on` opens.
struct blocks_as_it_goes
{
    counter* going;
    const gate* go_on;
    bool owner = true;

    blocks_as_it_goes(counter* c, const gate* g) : going(c), go_on(g) {}
    blocks_as_it_goes(blocks_as_it_goes&& other) noexcept : going(other.going), go_on(other.go_on)
    {
        other.owner = false;
    }
    ~blocks_as_it_goes()
    {
        if (owner)
        {
            going->increment();
            go_on->wait();
        }
    }
    void operator()() const {}
};

// One worker, and two tasks that shutdown() drops (delayed ones do not run after it), each of
// which blocks as it is destroyed until go_on opens.
struct two_blocking_drops : sched::test::pool_fixture
{
    static sched::pool_options no_delayed_after_shutdown()
    {
        sched::pool_options options = single_worker();
        options.execute_existing_delayed_tasks_after_shutdown = false;
        return options;
    }

    gate go_on; // first: it outlives the pool, whose destruction would drop the tasks
    counter going;
    manual_pool pool{no_delayed_after_shutdown()};
    manual_future<void> first = pool.schedule(1h, blocks_as_it_goes(&going, &go_on));
    manual_future<void> second = pool.schedule(2h, blocks_as_it_goes(&going, &go_on));
};

} // namespace

BOOST_TEST_DONT_PRINT_LOG_VALUE(sched::rejection_policy)

BOOST_FIXTURE_TEST_SUITE(test_scheduled_thread_pool, sched::test::pool_fixture)

// The policy matrix: {continue periodic} x {execute delayed}.
BOOST_DATA_TEST_CASE_F(sched::test::pool_fixture,
                       shutdown_applies_the_policies_to_queued_tasks,
                       boost::unit_test::data::make({false, true}) *
                           boost::unit_test::data::make({false, true}),
                       continue_periodic,
                       execute_delayed)
{
    sched::pool_options options = single_worker();
    options.continue_existing_periodic_tasks_after_shutdown = continue_periodic;
    options.execute_existing_delayed_tasks_after_shutdown = execute_delayed;
    manual_pool pool(options);
    counter periodic_runs;
    auto delayed = pool.schedule(10s, [] { return 1; });
    auto periodic = pool.schedule_at_fixed_rate(5s, 5s, [&] { periodic_runs.increment(); });
    manual_clock::advance(5s);
    BOOST_TEST_REQUIRE(periodic_runs.wait_for_at_least(1));
    BOOST_TEST_REQUIRE(eventually([&] { return pool.queue().size() == 2u; }));

    pool.shutdown();
    BOOST_TEST(pool.is_shutdown());
    // What the policies forbid is cancelled by shutdown() itself, and leaves the queue.
    BOOST_TEST(delayed.is_cancelled() == !execute_delayed);
    BOOST_TEST(periodic.is_cancelled() == !continue_periodic);
    BOOST_TEST(pool.queue().size() ==
               std::size_t(execute_delayed) + std::size_t(continue_periodic));

    manual_clock::advance(5s); // 10 s: the delayed task and the periodic's second run are due
    if (execute_delayed)
        BOOST_TEST(delayed.get() == 1);
    else
        BOOST_CHECK_THROW(delayed.get(), sched::cancelled_error);
    if (continue_periodic)
    {
        BOOST_TEST_REQUIRE(periodic_runs.wait_for_at_least(2));
        BOOST_TEST(!pool.is_terminated()); // a live periodic task keeps the pool alive
        BOOST_TEST(periodic.cancel());
    }
    BOOST_TEST_REQUIRE(pool.await_termination(60s));
    BOOST_TEST(pool.is_terminated());
    BOOST_TEST(periodic_runs.value() == (continue_periodic ? 2 : 1));
    BOOST_TEST(pool.queue().empty());
}

BOOST_AUTO_TEST_CASE(shutdown_waits_for_nothing_and_termination_follows_the_last_task)
{
    manual_pool pool(2);
    auto f = pool.schedule(10s, [] { return 1; });
    pool.shutdown();
    BOOST_TEST(!pool.is_terminated()); // a delayed task still runs (Java's default)
    BOOST_TEST(!pool.await_termination(1ms));
    manual_clock::advance(10s);
    BOOST_TEST(f.get() == 1);
    BOOST_TEST(pool.await_termination(60s));
    BOOST_TEST(pool.is_terminated());
}

BOOST_AUTO_TEST_CASE(shutdown_of_an_idle_pool_terminates_it)
{
    manual_pool pool(3);
    pool.shutdown();
    pool.shutdown(); // again: no effect
    BOOST_TEST(pool.await_termination(60s));
}

BOOST_AUTO_TEST_CASE(shutdown_drops_tasks_cancelled_but_still_queued)
{
    sched::pool_options options = single_worker();
    options.remove_on_cancel = false;
    manual_pool pool(options);
    auto f = pool.schedule(1h, [] {});
    BOOST_TEST(f.cancel());
    BOOST_TEST(pool.queue().size() == 1u);
    pool.shutdown();
    BOOST_TEST(pool.queue().empty());
    BOOST_TEST(pool.await_termination(60s)); // not an hour
}

BOOST_AUTO_TEST_CASE(shutdown_now_returns_exactly_the_tasks_that_never_ran_in_due_order,
                     *boost::unit_test::timeout(60))
{
    manual_pool pool(single_worker());
    auto ran = pool.schedule(1s, [] { return 0; });
    auto a = pool.schedule(30s, [] { return 1; });
    auto b = pool.schedule(10s, [] { return 2; });
    auto cancelled = pool.schedule(15s, [] { return 3; });
    auto periodic = pool.schedule_at_fixed_rate(20s, 1s, [] {});
    BOOST_TEST(cancelled.cancel());
    manual_clock::advance(1s);
    BOOST_TEST(ran.get() == 0);

    auto never_ran = pool.shutdown_now();
    BOOST_TEST(pool.is_shutdown());
    BOOST_TEST(pool.queue().empty());
    BOOST_TEST_REQUIRE(never_ran.size() == 3u);
    BOOST_TEST((never_ran[0].due_time() == at(10s)));
    BOOST_TEST((never_ran[1].due_time() == at(20s)));
    BOOST_TEST((never_ran[2].due_time() == at(30s)));
    BOOST_TEST(!never_ran[0].is_periodic());
    BOOST_TEST(never_ran[1].is_periodic());
    // Handed back, not cancelled: the handles decide.
    BOOST_TEST((a.state() == future_state::pending));
    BOOST_TEST((b.state() == future_state::pending));
    BOOST_TEST((periodic.state() == future_state::pending));

    never_ran[0].run(); // b runs on this thread
    BOOST_TEST(b.get() == 2);
    BOOST_TEST(never_ran[1].cancel());
    BOOST_CHECK_THROW(periodic.get(), sched::cancelled_error);
    never_ran.clear(); // dropping a's handle tells a's future
    BOOST_CHECK_THROW(a.get(), sched::cancelled_error);
    BOOST_TEST(ran.get() == 0);
    pool.await_termination(); // the overload with no time limit
    BOOST_TEST(pool.is_terminated());
}

// Which reservation fails: the list to hand back (0) or the room for the tasks taken out (1).
BOOST_DATA_TEST_CASE(shutdown_now_out_of_memory_loses_no_task_and_the_next_call_hands_all_back,
                     boost::unit_test::data::make({0, 1}),
                     which)
{
    constexpr std::size_t count = 1'000;
    manual_pool pool(single_worker());
    std::vector<manual_future<void>> futures;
    futures.reserve(count);
    for (std::size_t i = 0; i < count; ++i)
        futures.push_back(pool.schedule(1h + i * 1s, [] {}));
    sched::test::fail_allocation_of_at_least(count * sizeof(void*), which);
    BOOST_CHECK_THROW(pool.shutdown_now(), std::bad_alloc);
    sched::test::fail_allocation_of_at_least(0);
    BOOST_TEST(pool.queue().size() == count); // none left the queue unaccounted for
    auto never_ran = pool.shutdown_now();
    BOOST_TEST(never_ran.size() == count);
    BOOST_TEST((futures.back().state() == future_state::pending)); // its handle decides
    never_ran.clear();
    BOOST_TEST_REQUIRE(futures.back().is_done()); // a task lost would leave it pending forever
    BOOST_CHECK_THROW(futures.back().get(), sched::cancelled_error);
    BOOST_TEST(pool.await_termination(60s));
}

// Out of memory, shutdown() is done all the same, but the tasks its policies drop stay queued (a
// periodic one would keep the pool from terminating): called again, it drops them.
BOOST_AUTO_TEST_CASE(a_shutdown_out_of_memory_drops_its_tasks_when_called_again,
                     *boost::unit_test::timeout(60))
{
    constexpr std::size_t count = 100;
    manual_pool pool(single_worker());
    std::vector<manual_future<void>> futures;
    futures.reserve(count);
    for (std::size_t i = 0; i < count; ++i)
        futures.push_back(pool.schedule_at_fixed_rate(1h + i * 1s, 1h, [] {}));
    sched::test::fail_allocation_of_at_least(count * sizeof(void*)); // the room to take them
    BOOST_CHECK_THROW(pool.shutdown(), std::bad_alloc);
    sched::test::fail_allocation_of_at_least(0);
    BOOST_TEST(pool.is_shutdown());
    BOOST_TEST(pool.queue().size() == count); // nothing dropped, nothing lost
    BOOST_TEST((futures.back().state() == future_state::pending));
    pool.shutdown();
    BOOST_TEST(pool.queue().size() == 0u);
    BOOST_TEST(futures.back().is_cancelled());
    BOOST_TEST(pool.await_termination(60s));
    pool.shutdown(); // nothing owed: no effect
    BOOST_TEST(pool.is_terminated());
}

BOOST_AUTO_TEST_CASE(shutdown_now_lets_a_running_task_finish_and_requests_its_stop,
                     *boost::unit_test::timeout(60))
{
    manual_pool pool(2);
    counter started;
    auto running = pool.submit([&](std::stop_token stop) { return wait_for_stop(stop, started); });
    BOOST_TEST_REQUIRE(started.wait_for_at_least(1));
    auto never_ran = pool.shutdown_now();
    BOOST_TEST(never_ran.empty());
    BOOST_TEST(running.get() == 1); // it saw stop requested and completed normally
    BOOST_TEST_REQUIRE(pool.await_termination(60s));
}

BOOST_AUTO_TEST_CASE(a_running_periodic_task_does_not_run_again_after_shutdown_now,
                     *boost::unit_test::timeout(60))
{
    manual_pool pool(2);
    counter runs;
    std::promise<void> release;
    auto released = release.get_future().share();
    auto periodic = pool.schedule_at_fixed_rate(0s, 1s, [&] {
        runs.increment();
        released.wait();
    });
    BOOST_TEST_REQUIRE(runs.wait_for_at_least(1));
    BOOST_TEST(pool.shutdown_now().empty()); // it is out of the queue while it runs
    release.set_value();
    BOOST_TEST_REQUIRE((periodic.wait_for(60s) == std::future_status::ready));
    BOOST_CHECK_THROW(periodic.get(), sched::cancelled_error);
    manual_clock::advance(5s); // periods in which a run queued again would fall due
    BOOST_TEST_REQUIRE(pool.await_termination(60s));
    BOOST_TEST(runs.value() == 1);
    BOOST_TEST(pool.queue().empty());
}

BOOST_AUTO_TEST_CASE(shutdown_now_hands_back_equal_due_times_in_scheduling_order)
{
    manual_pool pool(1);
    std::vector<int> ran; // the handles run on this thread, in the order handed back
    std::vector<manual_future<void>> futures;
    for (int i = 0; i < 6; ++i)
        futures.push_back(pool.schedule(1h, [&ran, i] { ran.push_back(i); }));
    futures[0].cancel();
    auto never_ran = pool.shutdown_now();
    BOOST_TEST_REQUIRE(never_ran.size() == 5u);
    for (auto& handle : never_ran)
        handle.run();
    BOOST_TEST(ran == (std::vector<int>{1, 2, 3, 4, 5}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(shutdown_cancels_tasks_due_never_instead_of_waiting_forever)
{
    manual_pool pool(1);
    auto never = pool.schedule(std::chrono::hours::max(), [] { return 1; });
    auto soon = pool.schedule(1s, [] { return 2; });
    pool.shutdown();
    BOOST_TEST(never.is_cancelled()); // it could only have held the pool open
    BOOST_TEST(!soon.is_done());      // a delayed task still runs (Java's default)
    manual_clock::advance(1s);
    BOOST_TEST(soon.get() == 2);
    BOOST_TEST(pool.await_termination(60s));
}

BOOST_AUTO_TEST_CASE(without_remove_on_cancel_a_task_cancelled_after_shutdown_leaves_at_once)
{
    sched::pool_options options = single_worker();
    options.remove_on_cancel = false;
    manual_pool pool(options);
    auto f = pool.schedule(1h, [] {});
    pool.shutdown();
    BOOST_TEST(pool.queue().size() == 1u);
    BOOST_TEST(f.cancel());
    BOOST_TEST(pool.queue().empty()); // it would only delay termination by an hour
    BOOST_TEST(pool.await_termination(60s));
}

BOOST_AUTO_TEST_CASE(a_shutdown_between_a_periodic_run_and_its_requeue_still_stops_it)
{
    using pool_type = sched::basic_scheduled_thread_pool<sched::test::hook_clock>;
    pool_type pool(1);
    sched::basic_scheduled_future<void, sched::test::hook_clock> periodic;
    counter runs;
    periodic = pool.schedule_at_fixed_rate(1s, 1h, [&] {
        // The worker's next now() call comes after this run and before the task is queued again.
        sched::test::hook_clock::on_next_now([&] { pool.shutdown(); });
        runs.increment();
    });
    manual_clock::advance(1s);
    BOOST_TEST_REQUIRE(runs.wait_for_at_least(1));
    BOOST_TEST(pool.await_termination(60s)); // not an hour later
    BOOST_TEST(periodic.is_cancelled());
    BOOST_TEST(pool.queue().empty());
}

BOOST_AUTO_TEST_CASE(a_cancel_and_shutdown_between_a_run_and_its_requeue_leave_nothing_queued)
{
    // With remove_on_cancel off, the re-queue must still drop a task a shutdown did not see.
    using pool_type = sched::basic_scheduled_thread_pool<sched::test::hook_clock>;
    sched::pool_options options = single_worker();
    options.remove_on_cancel = false;
    pool_type pool(options);
    sched::basic_scheduled_future<void, sched::test::hook_clock> periodic;
    counter runs;
    periodic = pool.schedule_with_fixed_delay(1s, 1h, [&] {
        sched::test::hook_clock::on_next_now([&] {
            periodic.cancel();
            pool.shutdown();
        });
        runs.increment();
    });
    manual_clock::advance(1s);
    BOOST_TEST_REQUIRE(runs.wait_for_at_least(1));
    BOOST_TEST(pool.await_termination(60s));
    BOOST_TEST(periodic.is_cancelled());
    BOOST_TEST(pool.queue().empty());
}

BOOST_AUTO_TEST_CASE(the_abort_policy_throws_rejected_execution_after_shutdown)
{
    manual_pool pool(1);
    pool.shutdown();
    const auto shut_down = [](const sched::rejected_execution& e) {
        return e.code() == sched::error::shutdown;
    };
    BOOST_CHECK_EXCEPTION(pool.schedule(1s, [] {}), sched::rejected_execution, shut_down);
    BOOST_CHECK_EXCEPTION(pool.submit([] {}), sched::rejected_execution, shut_down);
    BOOST_CHECK_EXCEPTION(pool.execute([] {}), sched::rejected_execution, shut_down);
    BOOST_CHECK_EXCEPTION(pool.schedule_at_fixed_rate(1s, 1s, [] {}), sched::rejected_execution,
                          shut_down);
    BOOST_CHECK_EXCEPTION(pool.schedule_with_fixed_delay(1s, 1s, [] {}), sched::rejected_execution,
                          shut_down);
    BOOST_TEST(pool.queue().empty());
}

BOOST_AUTO_TEST_CASE(the_caller_runs_policy_runs_the_task_on_the_calling_thread)
{
    sched::pool_options options = single_worker();
    options.rejection = sched::rejection_policy::caller_runs;
    manual_pool pool(options);
    pool.shutdown();
    const auto caller = std::this_thread::get_id();
    auto f = pool.schedule(1h, [] { return std::this_thread::get_id(); });
    BOOST_TEST(f.is_done());       // ran before schedule() returned, its delay ignored
    BOOST_TEST((f.delay() == 1h)); // but kept, as in Java
    BOOST_TEST((f.get() == caller));
    counter periodic_runs;
    auto periodic = pool.schedule_at_fixed_rate(1s, 1s, [&] { periodic_runs.increment(); });
    BOOST_TEST(periodic_runs.value() == 1); // once, then it cannot run again
    BOOST_CHECK_THROW(periodic.get(), sched::cancelled_error);
}

// A task that schedules itself again, run by the caller_runs policy, ends: the task it schedules
// from that run is discarded, not run inside it (which would recurse until the stack ran out, a
// review's finding; this one stops at three).
BOOST_AUTO_TEST_CASE(a_task_that_schedules_itself_from_a_caller_run_is_discarded)
{
    sched::pool_options options = single_worker();
    options.rejection = sched::rejection_policy::caller_runs;
    manual_pool pool(options);
    pool.shutdown();
    int runs = 0;
    std::vector<sched::basic_scheduled_future<void, manual_clock>> from_runs;
    std::function<void()> again = [&] {
        if (++runs < 3)
            from_runs.push_back(pool.schedule(1s, again));
    };
    auto first = pool.schedule(1s, again);
    BOOST_TEST(runs == 1);
    BOOST_TEST((first.state() == sched::future_state::normal));
    BOOST_TEST_REQUIRE(from_runs.size() == 1u);
    BOOST_CHECK_THROW(from_runs[0].get(), sched::cancelled_error);
}

// Only the pool whose task this thread runs discards: a task that it hands to another shut-down
// caller_runs pool runs there (it was discarded too, and without a word for execute()).
BOOST_AUTO_TEST_CASE(a_caller_run_task_may_hand_a_task_to_another_caller_runs_pool)
{
    sched::pool_options options = single_worker();
    options.rejection = sched::rejection_policy::caller_runs;
    manual_pool first(options);
    manual_pool second(options);
    first.shutdown();
    second.shutdown();
    int handed_over_runs = 0;
    std::optional<sched::basic_scheduled_future<void, manual_clock>> handed_over;
    std::optional<sched::basic_scheduled_future<void, manual_clock>> handed_back;
    auto outer = first.schedule(1s, [&] {
        handed_over = second.schedule(1s, [&] {
            ++handed_over_runs;
            handed_back = first.schedule(1s, [] {}); // back to the first: discarded
        });
    });
    BOOST_TEST((outer.state() == sched::future_state::normal));
    BOOST_TEST(handed_over_runs == 1);
    BOOST_TEST_REQUIRE(handed_over.has_value());
    BOOST_TEST((handed_over->state() == sched::future_state::normal));
    BOOST_TEST_REQUIRE(handed_back.has_value());
    BOOST_CHECK_THROW(handed_back->get(), sched::cancelled_error);
}

BOOST_AUTO_TEST_CASE(what_a_caller_run_task_throws_reaches_the_error_sink)
{
    error_log errors;
    sched::pool_options options = single_worker();
    options.rejection = sched::rejection_policy::caller_runs;
    options.error_sink = errors.sink();
    manual_pool pool(options);
    pool.shutdown();
    pool.execute([] { throw std::runtime_error("no future"); });
    auto f = pool.submit([]() -> int { throw std::logic_error("with a future"); });
    BOOST_CHECK_THROW(f.get(), std::logic_error); // the future still carries it
    auto periodic = pool.schedule_at_fixed_rate(
        1s, 1s, [] { throw std::runtime_error("periodic, kept running"); },
        {.on_failure = sched::failure_policy::keep_running()});
    BOOST_CHECK_THROW(periodic.get(), sched::cancelled_error); // ran once, then ended
    const std::vector<std::string> expected{"no future", "with a future", "periodic, kept running"};
    BOOST_TEST(errors.snapshot() == expected, boost::test_tools::per_element());
}

// A task run on its caller holds termination off as a worker's run does, until the call is done
// with the pool (here, reporting what the task threw): a waiter may then destroy the pool.
// Before, the pool terminated as its worker left, and the caller's run went on to read the
// destroyed pool (a review's finding; ASan saw it). The next test holds the call up before the
// run.
BOOST_AUTO_TEST_CASE(the_pool_terminates_only_once_a_caller_run_has_ended,
                     *boost::unit_test::timeout(60))
{
    error_log errors;
    sched::pool_options options = single_worker();
    options.rejection = sched::rejection_policy::caller_runs;
    options.error_sink = errors.sink();
    auto pool = std::make_unique<manual_pool>(options);
    sched::test::occupied_worker running(*pool);
    pool->shutdown();
    gate go_on;
    counter started;
    auto caller = std::async(std::launch::async, [&] {
        pool->execute([&] {
            started.increment();
            go_on.wait();
            throw std::runtime_error("reported after the run");
        });
    });
    BOOST_TEST_REQUIRE(started.wait_for_at_least(1));
    expect_termination_after_the_call(pool, running, go_on, caller);
    const std::vector<std::string> expected{"reported after the run"};
    BOOST_TEST(errors.snapshot() == expected, boost::test_tools::per_element());
}

// A scheduling call made after shutdown holds termination off from its start, whatever the policy:
// here it is held up in its decorate_task hook, before the pool has even made its task. Before,
// only a caller's run held it off, and a waiter could destroy the pool under such a call (a
// review's finding; ASan saw the call read the freed queue).
BOOST_DATA_TEST_CASE_F(sched::test::pool_fixture,
                       a_call_made_after_shutdown_holds_termination_off_until_it_returns,
                       boost::unit_test::data::make({sched::rejection_policy::caller_runs,
                                                     sched::rejection_policy::discard}),
                       policy)
{
    gate go_on;
    counter inside;
    std::atomic<bool> hold_calls{false};
    sched::pool_options options = single_worker();
    options.rejection = policy;
    options.decorate_task = [&]() -> sched::task_wrapper {
        if (hold_calls.load())
        {
            inside.increment();
            go_on.wait();
        }
        return nullptr;
    };
    auto pool = std::make_unique<manual_pool>(options);
    sched::test::occupied_worker running(*pool);
    pool->shutdown();
    hold_calls.store(true);
    counter ran;
    auto caller = std::async(std::launch::async, [&] { pool->execute([&] { ran.increment(); }); });
    BOOST_TEST_REQUIRE(inside.wait_for_at_least(1));
    expect_termination_after_the_call(pool, running, go_on, caller);
    BOOST_TEST(ran.value() == (policy == sched::rejection_policy::caller_runs ? 1 : 0));
}

BOOST_DATA_TEST_CASE_F(sched::test::pool_fixture,
                       the_discard_policies_return_a_cancelled_future_after_shutdown,
                       boost::unit_test::data::make({sched::rejection_policy::discard,
                                                     sched::rejection_policy::discard_oldest}),
                       policy)
{
    sched::pool_options options = single_worker();
    options.rejection = policy;
    manual_pool pool(options);
    auto queued = pool.schedule(10s, [] { return 1; }); // runs: delayed tasks survive shutdown
    pool.shutdown();
    counter ran;
    auto rejected = pool.schedule(1s, [&] {
        ran.increment();
        return 2;
    });
    BOOST_TEST(rejected.is_cancelled());  // the owner learns it will not run
    BOOST_TEST((rejected.delay() == 1s)); // when it would have been due, as in Java
    BOOST_CHECK_THROW(rejected.get(), sched::cancelled_error);
    manual_clock::advance(10s);
    BOOST_TEST(queued.get() == 1);
    BOOST_TEST_REQUIRE(pool.await_termination(60s));
    BOOST_TEST(ran.value() == 0);
}

BOOST_AUTO_TEST_CASE(destroying_the_pool_cancels_what_had_not_started)
{
    manual_future<int> pending;
    manual_future<void> periodic;
    {
        manual_pool pool(2);
        pending = pool.schedule(1h, [] { return 1; });
        periodic = pool.schedule_at_fixed_rate(1h, 1s, [] {});
    }
    BOOST_CHECK_THROW(pending.get(), sched::cancelled_error);
    BOOST_CHECK_THROW(periodic.get(), sched::cancelled_error);
    BOOST_TEST(!pending.cancel()); // the pool is gone; the future still answers
}

BOOST_AUTO_TEST_CASE(destroying_the_pool_waits_for_a_running_task, *boost::unit_test::timeout(60))
{
    counter started;
    manual_future<int> running;
    {
        manual_pool pool(1);
        running = pool.submit([&](std::stop_token stop) { return wait_for_stop(stop, started); });
        BOOST_TEST_REQUIRE(started.wait_for_at_least(1));
    }
    BOOST_TEST(running.is_done());
    BOOST_TEST(running.get() == 1);
}

// Stop callbacks run once the cancel is over: one may shut the pool down and destroy it, which
// wait for cancels still under way, without waiting for the call it runs in.
BOOST_AUTO_TEST_CASE(a_stop_callback_may_shut_the_pool_down_and_destroy_it_inside_cancel,
                     *boost::unit_test::timeout(60))
{
    std::stop_token task_token;
    counter ran;
    auto pool = std::make_unique<manual_pool>(1);
    manual_future<void> periodic =
        pool->schedule_with_fixed_delay(0s, 1h, [&](std::stop_token stop) {
            task_token = stop;
            ran.increment();
        });
    BOOST_TEST_REQUIRE(ran.wait_for_at_least(1));
    BOOST_TEST_REQUIRE(eventually([&] { return pool->queue().size() == 1; })); // queued again
    bool stopped_pool = false;
    const std::stop_callback on_stop(task_token, [&] {
        pool->shutdown();
        pool.reset();
        stopped_pool = true;
    });
    BOOST_TEST(periodic.cancel(true));
    BOOST_TEST(stopped_pool);
    BOOST_TEST((periodic.state() == future_state::interrupted));
    BOOST_TEST(ran.value() == 1);
}

// A shutdown runs no user code under its lock: the callable of a task it drops may shut the pool
// down again from its destructor, and so may a running task's stop callback (both deadlocked
// before: a review's probe).
BOOST_AUTO_TEST_CASE(a_callable_dropped_by_shutdown_may_shut_the_pool_down_again,
                     *boost::unit_test::timeout(60))
{
    struct shuts_down_as_it_goes
    {
        manual_pool* pool;
        bool* shut_down_again;
        bool owner = true;

        shuts_down_as_it_goes(manual_pool* p, bool* flag) : pool(p), shut_down_again(flag) {}
        shuts_down_as_it_goes(shuts_down_as_it_goes&& other) noexcept
            : pool(other.pool), shut_down_again(other.shut_down_again)
        {
            other.owner = false;
        }
        ~shuts_down_as_it_goes()
        {
            if (owner)
            {
                (void)pool->shutdown_now();
                *shut_down_again = true;
            }
        }
        void operator()() const {}
    };
    sched::pool_options options = single_worker();
    options.execute_existing_delayed_tasks_after_shutdown = false;
    manual_pool pool(options);
    bool shut_down_again = false;
    auto f = pool.schedule(1h, shuts_down_as_it_goes(&pool, &shut_down_again));
    pool.shutdown(); // drops the task
    BOOST_TEST(shut_down_again);
    BOOST_TEST(f.is_cancelled());
    BOOST_TEST(pool.await_termination(60s));
}

BOOST_AUTO_TEST_CASE(a_stop_callback_may_shut_the_pool_down_again_inside_shutdown_now,
                     *boost::unit_test::timeout(60))
{
    manual_pool pool(1);
    counter started;
    bool shut_down_again = false; // written by the stop callback, on this thread
    auto running = pool.submit([&](std::stop_token stop) {
        const std::stop_callback on_stop(stop, [&] {
            pool.shutdown();
            shut_down_again = true;
        });
        return wait_for_stop(stop, started);
    });
    BOOST_TEST_REQUIRE(started.wait_for_at_least(1));
    (void)pool.shutdown_now(); // requests the stop, which runs the callback here
    BOOST_TEST(shut_down_again);
    BOOST_TEST(running.get() == 1);
    BOOST_TEST(pool.await_termination(60s));
}

// Java's shutdown cancels what it drops before the pool may terminate. Here a callable dropped by
// shutdown() on another thread blocks as it is destroyed, with the other dropped task not yet
// cancelled; the worker's last task ends meanwhile, then shutdown_now(), on a third thread, stops
// the workers (and waits for the drop). The pool does not terminate until shutdown() has
// returned (once it has, a waiter may destroy the pool at once).
BOOST_FIXTURE_TEST_CASE(the_pool_terminates_only_once_shutdown_has_cancelled_what_it_dropped,
                        two_blocking_drops,
                        *boost::unit_test::timeout(60))
{
    sched::test::occupied_worker running(pool);
    auto shutting_down = std::async(std::launch::async, [&] { pool.shutdown(); });
    BOOST_TEST_REQUIRE(going.wait_for_at_least(1)); // inside shutdown(), one drop left to do
    BOOST_TEST(first.is_done() != second.is_done());
    running.release();
    running.task().get(); // the pool's last task: its worker may go, the pool not terminate
    BOOST_TEST(!pool.await_termination(200ms));
    sched::test::blocking_call stopping([&] { return pool.shutdown_now().size(); });
    BOOST_TEST(stopping.wait_until_blocked()); // the workers stop: still not terminated
    BOOST_TEST(!pool.await_termination(200ms));
    go_on.open();
    shutting_down.get();
    BOOST_TEST(stopping.get() == 0u);
    BOOST_TEST(pool.await_termination(60s));
    BOOST_TEST(first.is_cancelled());
    BOOST_TEST(second.is_cancelled());
}

// Java's shutdown() and shutdownNow() wait on the lock the first call holds while it cancels what
// it drops: here a call made on another thread while the first is still dropping returns only
// once both dropped tasks are cancelled (it returned at once before, with one still pending).
BOOST_DATA_TEST_CASE_F(two_blocking_drops,
                       a_shutdown_call_returns_once_another_calls_drop_has_ended,
                       boost::unit_test::data::make({false, true}),
                       now)
{
    auto shutting_down = std::async(std::launch::async, [&] { pool.shutdown(); });
    BOOST_TEST_REQUIRE(going.wait_for_at_least(1)); // inside shutdown(), one drop left to do
    sched::test::blocking_call again([&] {
        const std::size_t handed_back = now ? pool.shutdown_now().size() : 0; // the first took both
        if (!now)
            pool.shutdown();
        return std::pair(handed_back, first.is_cancelled() && second.is_cancelled());
    });
    BOOST_TEST(again.wait_until_blocked()); // waits for the first call's drop
    BOOST_TEST(!(first.is_cancelled() && second.is_cancelled()));
    go_on.open();
    const auto [handed_back, both_cancelled] = again.get();
    BOOST_TEST(handed_back == 0u);
    BOOST_TEST(both_cancelled); // as it returned
    shutting_down.get();
    BOOST_TEST(pool.await_termination(60s));
}

BOOST_AUTO_TEST_CASE(await_termination_with_a_timeout_reports_a_live_pool)
{
    sched::pool_options options = single_worker();
    options.continue_existing_periodic_tasks_after_shutdown = true;
    manual_pool pool(options);
    auto periodic = pool.schedule_at_fixed_rate(1h, 1h, [] {});
    pool.shutdown();
    BOOST_TEST(!pool.await_termination(10ms));
    BOOST_TEST(!pool.is_terminated());
    BOOST_TEST(periodic.cancel());
    BOOST_TEST(pool.await_termination(60s));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(test_task_handle, sched::test::pool_fixture)

BOOST_AUTO_TEST_CASE(an_empty_handle_throws_no_state_and_cancels_nothing)
{
    sched::basic_task_handle<manual_clock> empty;
    BOOST_TEST(!empty.valid());
    BOOST_TEST(!empty.cancel());
    BOOST_CHECK_THROW(empty.run(), std::future_error);
    BOOST_CHECK_THROW(empty.is_periodic(), std::future_error);
}

BOOST_AUTO_TEST_CASE(run_empties_the_handle_and_a_second_run_throws)
{
    manual_pool pool(1);
    auto f = pool.schedule(1h, [] { return 5; });
    auto handles = pool.shutdown_now();
    BOOST_TEST_REQUIRE(handles.size() == 1u);
    handles[0].run();
    BOOST_TEST(!handles[0].valid());
    BOOST_CHECK_THROW(handles[0].run(), std::future_error);
    BOOST_TEST(f.get() == 5);
}

BOOST_AUTO_TEST_CASE(run_of_a_task_cancelled_through_its_future_does_nothing)
{
    manual_pool pool(1);
    counter ran;
    auto f = pool.schedule(1h, [&] { ran.increment(); });
    auto handles = pool.shutdown_now();
    BOOST_TEST_REQUIRE(handles.size() == 1u);
    BOOST_TEST(f.cancel());
    handles[0].run();
    BOOST_TEST(ran.value() == 0);
}

BOOST_AUTO_TEST_CASE(a_task_that_throws_in_run_reports_through_its_future)
{
    manual_pool pool(1);
    auto f = pool.schedule(1h, []() -> int { throw std::runtime_error("late"); });
    auto handles = pool.shutdown_now();
    BOOST_TEST_REQUIRE(handles.size() == 1u);
    const std::exception_ptr thrown = handles[0].run(); // does not throw: it returns it
    BOOST_CHECK_THROW(std::rethrow_exception(thrown), std::runtime_error);
    BOOST_CHECK_THROW(f.get(), std::runtime_error); // and the future carries it
}

BOOST_AUTO_TEST_CASE(run_returns_what_a_task_with_no_future_threw)
{
    manual_pool pool(1);
    counter started;
    std::promise<void> release;
    auto busy = pool.submit([&, released = release.get_future().share()] {
        started.increment();
        released.wait();
    });
    BOOST_TEST_REQUIRE(started.wait_for_at_least(1)); // the one worker is busy
    pool.execute([] { throw std::runtime_error("no future"); });
    auto handles = pool.shutdown_now();
    release.set_value();
    BOOST_TEST_REQUIRE(handles.size() == 1u);
    const std::exception_ptr thrown = handles[0].run();
    BOOST_TEST_REQUIRE(static_cast<bool>(thrown));
    BOOST_CHECK_EXCEPTION(
        std::rethrow_exception(thrown), std::runtime_error,
        [](const std::runtime_error& e) { return std::string(e.what()) == "no future"; });
}

BOOST_AUTO_TEST_CASE(run_returns_null_when_the_task_did_not_throw)
{
    manual_pool pool(1);
    auto f = pool.schedule(1h, [] { return 5; });
    auto handles = pool.shutdown_now();
    BOOST_TEST_REQUIRE(handles.size() == 1u);
    BOOST_TEST(!handles[0].run());
    BOOST_TEST(f.get() == 5);
}

BOOST_AUTO_TEST_CASE(move_assignment_cancels_the_task_it_replaces)
{
    manual_pool pool(1);
    auto first = pool.schedule(1h, [] { return 1; });
    auto second = pool.schedule(2h, [] { return 2; });
    auto handles = pool.shutdown_now();
    BOOST_TEST_REQUIRE(handles.size() == 2u);
    handles[0] = std::move(handles[1]);
    BOOST_TEST(first.is_cancelled());
    BOOST_TEST(!second.is_done());
    handles[0].run();
    BOOST_TEST(second.get() == 2);
}

BOOST_AUTO_TEST_SUITE_END()
