#include <sched/scheduled_thread_pool.hpp>

#include <sched/detail/recycler.hpp>

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <functional>
#include <future>
#include <limits>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#include <sys/prctl.h>
#endif

#include "support/counter.hpp"
#include "support/full_owner_registry.hpp"
#include "support/pool_fixture.hpp"
#include "support/resident_memory.hpp"
#include "support/wait.hpp"

using namespace std::chrono_literals;
using sched::future_state;
using sched::manual_clock;
using sched::test::counter;
using sched::test::eventually;
using sched::test::manual_future;
using sched::test::manual_pool;

namespace {

using time_point = manual_clock::time_point;

// Records, from inside each run of a periodic task, when that run was due: the future's delay()
// is measured from the due time of the run in progress.
struct run_log
{
    std::mutex mutex;
    std::vector<time_point> due;
    counter runs;

    void record(const manual_future<void>& f)
    {
        {
            std::lock_guard lock(mutex);
            due.push_back(manual_clock::now() + f.delay());
        }
        runs.increment();
    }

    std::vector<time_point> snapshot()
    {
        std::lock_guard lock(mutex);
        return due;
    }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(test_scheduled_thread_pool, sched::test::pool_fixture)

BOOST_AUTO_TEST_CASE(a_one_shot_task_runs_when_due_and_not_before)
{
    manual_pool pool(single_worker());
    auto f = pool.schedule(10s, [] { return 5; });
    manual_clock::advance(9s);
    settle(pool);             // the worker has taken whatever was due
    BOOST_TEST(!f.is_done()); // it was not: the clock is short of its due time
    manual_clock::advance(1s);
    BOOST_TEST(f.get() == 5);
}

BOOST_AUTO_TEST_CASE(tasks_run_in_due_order_and_equal_due_times_in_scheduling_order)
{
    manual_pool pool(single_worker());
    std::mutex mutex;
    std::vector<int> order;
    std::vector<manual_future<void>> futures;
    const std::vector<std::pair<int, std::chrono::seconds>> plan = {{1, 30s}, {2, 10s}, {3, 20s},
                                                                    {4, 10s}, {5, 0s},  {6, 20s}};
    for (const auto& [id, delay] : plan)
    {
        futures.push_back(pool.schedule(delay, [&, id = id] {
            std::lock_guard lock(mutex);
            order.push_back(id);
        }));
    }
    manual_clock::advance(30s);
    for (auto& f : futures)
        f.get();
    BOOST_TEST(order == (std::vector<int>{5, 2, 4, 3, 6, 1}), boost::test_tools::per_element());
}

// Java's periodic task keeps the sequence number it was created with: its next run comes before
// a task scheduled after it for the same time, even one queued before that run was (with one
// heap: no far tier).
BOOST_AUTO_TEST_CASE(a_periodic_tasks_later_runs_keep_its_place_among_equal_due_times)
{
    sched::pool_options options = single_worker();
    options.far_tier_horizon = 0ns;
    manual_pool pool(options);
    std::mutex mutex;
    std::vector<std::string> order;
    auto record = [&](std::string what) {
        std::lock_guard lock(mutex);
        order.push_back(std::move(what));
    };
    auto periodic = pool.schedule_at_fixed_rate(10s, 10s, [&] { record("periodic"); });
    auto one_shot = pool.schedule(20s, [&] { record("one-shot"); }); // queued before run 2 is
    manual_clock::advance(10s);
    settle(pool); // the first run is over, and the second queued
    manual_clock::advance(10s);
    one_shot.get();
    settle(pool);
    periodic.cancel();
    const std::vector<std::string> expected{"periodic", "periodic", "one-shot"};
    BOOST_TEST(order == expected, boost::test_tools::per_element());
}

// With the far tier (the default), tasks moved out of it take new places in the queue: a periodic
// task's next run takes a new one too, or it would pass a task scheduled before it for the same
// time that went through the far tier.
BOOST_AUTO_TEST_CASE(with_the_far_tier_a_periodic_tasks_later_runs_come_after_earlier_tasks)
{
    manual_pool pool(single_worker());
    std::mutex mutex;
    std::vector<std::string> order;
    auto record = [&](std::string what) {
        std::lock_guard lock(mutex);
        order.push_back(std::move(what));
    };
    auto far = pool.schedule(100ms, [&] { record("far"); }); // beyond the horizon: far tier
    auto periodic = pool.schedule_at_fixed_rate(10ms, 10ms, [&] { record("periodic"); });
    for (int step = 0; step < 10; ++step)
    {
        manual_clock::advance(10ms);
        settle(pool);
    }
    far.get();
    periodic.cancel();
    BOOST_TEST_REQUIRE(order.size() == 11u);
    BOOST_TEST(order[9] == "far"); // at 100 ms, the far task before the periodic's tenth run
    BOOST_TEST(order[10] == "periodic");
}

BOOST_AUTO_TEST_CASE(schedule_at_runs_at_the_time_point)
{
    manual_pool pool(1);
    auto f = pool.schedule_at(at(7s), [] { return 1; });
    manual_clock::advance(6s);
    settle(pool);
    BOOST_TEST(!f.is_done());
    manual_clock::advance(1s);
    BOOST_TEST(f.get() == 1);
}

BOOST_AUTO_TEST_CASE(submit_and_execute_run_now)
{
    manual_pool pool(2);
    BOOST_TEST(pool.submit([] { return 9; }).get() == 9);
    counter ran;
    pool.execute([&] { ran.increment(); });
    BOOST_TEST(ran.wait_for_at_least(1));
}

BOOST_AUTO_TEST_CASE(a_negative_delay_runs_now)
{
    manual_pool pool(1);
    manual_clock::advance(100s);
    auto f = pool.schedule(-5s, [] { return 3; });
    BOOST_TEST(f.get() == 3); // no advance needed
}

BOOST_AUTO_TEST_CASE(huge_delays_saturate_and_never_run)
{
    manual_pool pool(single_worker());
    manual_clock::advance(1000s);
    auto never = pool.schedule(std::chrono::hours::max(), [] { return 1; });
    auto also_never = pool.schedule(std::chrono::duration<double>(1e300), [] { return 2; });
    BOOST_TEST((never.delay() == manual_clock::time_point::max() - manual_clock::now()));
    manual_clock::advance(std::chrono::hours(24 * 365 * 200));
    settle(pool);
    BOOST_TEST(!never.is_done());
    BOOST_TEST(!also_never.is_done());
    BOOST_TEST(pool.queue().size() == 2u);
    BOOST_TEST(never.cancel());
    BOOST_TEST(also_never.cancel());
    BOOST_TEST(pool.queue().empty());
}

// A manual clock stops one tick short of time_point::max(), which is never: work submitted there
// runs (it was due at max(), and never ran; a review's probe).
BOOST_AUTO_TEST_CASE(work_submitted_at_the_end_of_time_runs, *boost::unit_test::timeout(60))
{
    manual_pool pool(single_worker());
    manual_clock::advance(manual_clock::duration::max());
    BOOST_TEST(pool.submit([] { return 7; }).get() == 7);
    BOOST_TEST(pool.schedule(0s, [] { return 8; }).get() == 8);
    auto never = pool.schedule(1ns, [] { return 9; });
    settle(pool);
    BOOST_TEST(!never.is_done());
    BOOST_TEST(never.cancel());
}

BOOST_AUTO_TEST_CASE(bad_periods_throw_invalid_argument_and_schedule_nothing)
{
    manual_pool pool(1);
    const auto noop = [] {
    };
    BOOST_CHECK_THROW(pool.schedule_at_fixed_rate(1s, 0s, noop), std::invalid_argument);
    BOOST_CHECK_THROW(pool.schedule_at_fixed_rate(1s, -1s, noop), std::invalid_argument);
    BOOST_CHECK_THROW(pool.schedule_with_fixed_delay(1s, 0ms, noop), std::invalid_argument);
    BOOST_CHECK_THROW(pool.schedule_with_fixed_delay(1s, -1ns, noop), std::invalid_argument);
    BOOST_CHECK_THROW(pool.schedule_at_fixed_rate(1s, std::chrono::duration<double>(-0.5), noop),
                      std::invalid_argument);
    BOOST_TEST(pool.queue().empty());
}

BOOST_AUTO_TEST_CASE(empty_callables_throw_invalid_argument_and_schedule_nothing)
{
    manual_pool pool(1);
    std::function<int()> empty;
    std::function<void()> empty_void;
    void (*null_function)() = nullptr;
    BOOST_CHECK_THROW(pool.schedule(1s, empty), std::invalid_argument);
    BOOST_CHECK_THROW(pool.submit(empty), std::invalid_argument);
    BOOST_CHECK_THROW(pool.execute(empty_void), std::invalid_argument);
    BOOST_CHECK_THROW(pool.schedule(1s, null_function), std::invalid_argument);
    BOOST_CHECK_THROW(pool.schedule_at_fixed_rate(1s, 1s, empty_void), std::invalid_argument);
    BOOST_CHECK_THROW(pool.schedule_with_fixed_delay(1s, 1s, null_function), std::invalid_argument);
    BOOST_TEST(pool.queue().empty());
}

int forty_two()
{
    return 42;
}

BOOST_AUTO_TEST_CASE(functions_by_name_and_reference_wrappers_are_accepted)
{
    manual_pool pool(1);
    BOOST_TEST(pool.submit(forty_two).get() == 42); // a function reference: never empty
    std::function<int()> empty;
    BOOST_CHECK_THROW(pool.submit(std::ref(empty)), std::invalid_argument);
    std::function<int()> full = forty_two;
    BOOST_TEST(pool.submit(std::ref(full)).get() == 42);
}

BOOST_AUTO_TEST_CASE(a_nan_delay_throws_invalid_argument_and_schedules_nothing)
{
    manual_pool pool(1);
    const std::chrono::duration<double> nan(std::numeric_limits<double>::quiet_NaN());
    BOOST_CHECK_THROW(pool.schedule(nan, [] {}), std::invalid_argument);
    BOOST_CHECK_THROW(pool.schedule_at_fixed_rate(nan, 1s, [] {}), std::invalid_argument);
    BOOST_CHECK_THROW(pool.schedule_at_fixed_rate(1s, nan, [] {}), std::invalid_argument);
    BOOST_TEST(pool.queue().empty());
}

BOOST_AUTO_TEST_CASE(zero_threads_throw_invalid_argument)
{
    BOOST_CHECK_THROW(manual_pool(0), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(a_pool_beyond_the_8191_alive_throws_length_error)
{
    auto first = std::make_unique<manual_pool>(1);
    sched::test::full_owner_registry full; // with `first`, 8,191 pools alive
    BOOST_CHECK_THROW(manual_pool(1), std::length_error);
    first.reset(); // a pool that goes frees its number
    manual_pool second(1);
    (void)full.free_one();
    BOOST_CHECK_THROW(manual_pool(0), std::invalid_argument); // and so does one that failed
    manual_pool third(1);
    BOOST_TEST(third.submit([] { return 7; }).get() == 7);
    BOOST_TEST(second.submit([] { return 8; }).get() == 8); // each task finds its own pool
}

BOOST_AUTO_TEST_CASE(fixed_rate_runs_the_kth_time_at_initial_plus_k_periods)
{
    manual_pool pool(2);
    run_log log;
    manual_future<void> f;
    f = pool.schedule_at_fixed_rate(10s, 5s, [&] { log.record(f); });
    manual_clock::advance(10s);
    BOOST_TEST_REQUIRE(log.runs.wait_for_at_least(1));
    manual_clock::advance(5s);
    BOOST_TEST_REQUIRE(log.runs.wait_for_at_least(2));
    // A stall: ten periods pass at once, and the missed runs follow one another, each still due
    // on the original grid.
    manual_clock::advance(50s);
    BOOST_TEST_REQUIRE(log.runs.wait_for_at_least(12));
    BOOST_TEST(f.cancel());
    const auto due = log.snapshot();
    BOOST_TEST_REQUIRE(due.size() == 12u);
    for (std::size_t k = 0; k < due.size(); ++k)
    {
        BOOST_TEST_CONTEXT("run " << k)
        BOOST_TEST((due[k] == at(10s + k * 5s)));
    }
}

BOOST_AUTO_TEST_CASE(fixed_rate_does_not_drift_over_thousands_of_runs)
{
    manual_pool pool(single_worker());
    run_log log;
    manual_future<void> f;
    const auto period = 1ms + 1ns; // not a round number of anything
    // The first run is due a period on, so that f is set before any run reads it.
    f = pool.schedule_at_fixed_rate(period, period, [&] { log.record(f); });
    constexpr int runs = 3000;
    // Advance in uneven steps (0.7 to 1.9 periods), lagging behind the grid on purpose.
    for (int step = 0; log.runs.value() < runs; ++step)
    {
        manual_clock::advance(period * (7 + step % 13) / 10);
        const auto elapsed = manual_clock::now().time_since_epoch();
        const int due_runs = static_cast<int>(elapsed / period);
        BOOST_TEST_REQUIRE(log.runs.wait_for_at_least(std::min(due_runs, runs)));
    }
    BOOST_TEST(f.cancel());
    const auto due = log.snapshot();
    for (std::size_t k = 0; k < static_cast<std::size_t>(runs); ++k)
        BOOST_TEST_REQUIRE((due[k] == at((k + 1) * period)));
}

BOOST_AUTO_TEST_CASE(fixed_delay_measures_from_the_end_of_the_previous_run)
{
    manual_pool pool(1);
    run_log log;
    manual_future<void> f;
    f = pool.schedule_with_fixed_delay(10s, 5s, [&] {
        log.record(f);
        manual_clock::advance(3s); // the run takes three seconds
    });
    for (int k = 1; k <= 4; ++k)
    {
        manual_clock::advance(k == 1 ? 10s : 5s);
        BOOST_TEST_REQUIRE(log.runs.wait_for_at_least(k));
        // Wait until the worker put it back: only then is the next due time fixed.
        BOOST_TEST_REQUIRE(eventually([&] { return pool.queue().size() == 1u; }));
    }
    BOOST_TEST(f.cancel());
    const auto due = log.snapshot();
    // Each run is due 5 s after the previous one ended, which is 3 s after it was due.
    BOOST_TEST((due == std::vector<time_point>{at(10s), at(18s), at(26s), at(34s)}),
               boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(fixed_rate_after_a_slow_run_stays_on_its_grid)
{
    manual_pool pool(1);
    run_log log;
    manual_future<void> f;
    f = pool.schedule_at_fixed_rate(10s, 5s, [&] {
        log.record(f);
        manual_clock::advance(3s);
    });
    manual_clock::advance(10s); // runs at 10 and ends at 13
    BOOST_TEST_REQUIRE(log.runs.wait_for_at_least(1));
    manual_clock::advance(2s); // 15: the next point of the grid
    BOOST_TEST_REQUIRE(log.runs.wait_for_at_least(2));
    BOOST_TEST(f.cancel());
    BOOST_TEST((log.snapshot() == std::vector<time_point>{at(10s), at(15s)}),
               boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_periodic_exception_stops_later_runs_and_get_rethrows_it)
{
    manual_pool pool(single_worker());
    counter runs;
    auto f = pool.schedule_at_fixed_rate(1s, 1s, [&] {
        runs.increment();
        if (runs.value() == 3)
            throw std::runtime_error("third run failed");
    });
    manual_clock::advance(10s);
    BOOST_CHECK_EXCEPTION(f.get(), std::runtime_error, [](const std::runtime_error& e) {
        return std::string(e.what()) == "third run failed";
    });
    BOOST_TEST((f.state() == future_state::exceptional));
    manual_clock::advance(10s);
    settle(pool);
    BOOST_TEST(runs.value() == 3);
    BOOST_TEST(pool.queue().empty());
}

BOOST_AUTO_TEST_CASE(a_periodic_task_cancelled_inside_its_run_is_not_rearmed)
{
    manual_pool pool(single_worker());
    counter runs;
    std::atomic<bool> cancelled_itself{false};
    manual_future<void> f;
    f = pool.schedule_with_fixed_delay(1s, 1s, [&] {
        if (runs.value() == 2)
            cancelled_itself = f.cancel();
        runs.increment();
    });
    for (int k = 1; k <= 3; ++k)
    {
        manual_clock::advance(1s);
        BOOST_TEST_REQUIRE(runs.wait_for_at_least(k));
        BOOST_TEST_REQUIRE(eventually([&] { return pool.queue().size() == (k < 3 ? 1u : 0u); }));
    }
    BOOST_TEST(cancelled_itself.load());
    BOOST_CHECK_THROW(f.get(), sched::cancelled_error);
    manual_clock::advance(10s);
    settle(pool);
    BOOST_TEST(runs.value() == 3);
    BOOST_TEST(pool.queue().empty());
}

BOOST_AUTO_TEST_CASE(a_periodic_task_never_runs_concurrently_with_itself)
{
    manual_pool pool(4);
    std::atomic<int> active{0};
    std::atomic<int> most_active{0};
    counter runs;
    auto f = pool.schedule_at_fixed_rate(1ms, 1ms, [&] {
        const int now_active = active.fetch_add(1) + 1;
        int seen = most_active.load();
        while (now_active > seen && !most_active.compare_exchange_weak(seen, now_active))
        {}
        for (int i = 0; i < 50; ++i) // widen the window for an overlapping run
            std::this_thread::yield();
        active.fetch_sub(1);
        runs.increment();
    });
    manual_clock::advance(500ms); // 500 runs due at once: free workers would love to help
    BOOST_TEST_REQUIRE(runs.wait_for_at_least(500));
    f.cancel();
    BOOST_TEST(most_active.load() == 1);
}

BOOST_AUTO_TEST_CASE(a_huge_period_saturates_so_the_task_runs_once)
{
    manual_pool pool(single_worker());
    counter runs;
    auto f = pool.schedule_at_fixed_rate(0s, std::chrono::hours::max(), [&] { runs.increment(); });
    BOOST_TEST_REQUIRE(runs.wait_for_at_least(1));
    BOOST_TEST_REQUIRE(eventually([&] { return pool.queue().size() == 1u; }));
    BOOST_TEST((f.delay() > std::chrono::hours(24 * 365 * 100)));
    manual_clock::advance(std::chrono::hours(24 * 365 * 100));
    settle(pool);
    BOOST_TEST(runs.value() == 1);
    BOOST_TEST(f.cancel());
}

BOOST_AUTO_TEST_CASE(a_throwing_task_does_not_kill_its_worker)
{
    manual_pool pool(single_worker());
    for (int i = 0; i < 5; ++i)
        BOOST_CHECK_THROW(pool.submit([]() -> int { throw std::logic_error("no"); }).get(),
                          std::logic_error);
    BOOST_TEST(pool.submit([] { return 1; }).get() == 1); // the only worker is alive
}

BOOST_AUTO_TEST_CASE(cancel_removes_the_task_at_once_and_frees_what_it_captured)
{
    manual_pool pool(1);
    auto captured = std::make_shared<int>(0);
    auto f = pool.schedule(1h, [captured] { return *captured; });
    BOOST_TEST(captured.use_count() == 2);
    BOOST_TEST(pool.queue().size() == 1u);
    BOOST_TEST(f.cancel());
    BOOST_TEST(pool.queue().empty());
    BOOST_TEST(captured.use_count() == 1); // the future still exists; the callable does not
}

BOOST_AUTO_TEST_CASE(without_remove_on_cancel_a_cancelled_task_stays_queued_until_due)
{
    sched::pool_options options = single_worker();
    options.remove_on_cancel = false;
    manual_pool pool(options);
    auto captured = std::make_shared<int>(0);
    counter ran;
    auto f = pool.schedule(10s, [captured, &ran] {
        ran.increment();
        return *captured;
    });
    BOOST_TEST(f.cancel());
    BOOST_TEST(pool.queue().size() == 1u); // Java's default: retained until due
    BOOST_TEST(captured.use_count() == 2);
    manual_clock::advance(10s);
    settle(pool);
    BOOST_TEST(ran.value() == 0); // it came due, and was dropped unrun
    BOOST_TEST(pool.queue().empty());
    BOOST_TEST(captured.use_count() == 1);
    BOOST_CHECK_THROW(f.get(), sched::cancelled_error);
}

BOOST_AUTO_TEST_CASE(a_finished_task_frees_what_it_captured_while_its_future_lives)
{
    manual_pool pool(1);
    auto captured = std::make_shared<int>(4);
    auto f = pool.submit([captured] { return *captured; });
    BOOST_TEST(f.get() == 4);
    BOOST_TEST(eventually([&] { return captured.use_count() == 1; }));
}

BOOST_AUTO_TEST_CASE(a_million_schedule_and_cancel_cycles_keep_memory_bounded,
                     *boost::unit_test::timeout(600))
{
    manual_pool pool(1);
    auto captured = std::make_shared<int>(0);
    std::int64_t warmed_up = -1; // resident bytes once the allocators have what they keep
    for (int i = 0; i < 1'000'000; ++i)
    {
        if (i == 10'000)
            warmed_up = sched::test::resident_bytes();
        auto f = pool.schedule(std::chrono::seconds(1 + i % 10), [captured] { return *captured; });
        if (!f.cancel())
            BOOST_FAIL("cancel failed at cycle " << i);
        // Nothing accumulates: the queue is empty and the callable is gone after each cancel.
        if (captured.use_count() != 1 || !pool.queue().empty())
            BOOST_FAIL("cycle " << i << " left a task behind");
    }
    BOOST_TEST(pool.queue().empty());
    // Nor do the tasks themselves: a million leaked would be over 50 MB. (Under AddressSanitizer
    // freed memory is held in quarantine instead, and LeakSanitizer reports a leak at exit.)
    if (warmed_up >= 0 && sched::detail::recycles_blocks)
        BOOST_TEST(sched::test::resident_bytes() - warmed_up < 16 * 1024 * 1024);
}

BOOST_AUTO_TEST_CASE(a_negative_timer_slack_throws_invalid_argument)
{
    sched::pool_options options;
    options.timer_slack = -1ns;
    BOOST_CHECK_THROW(manual_pool pool(options), std::invalid_argument);
}

// Real clock, relations only. One worker, which sleeps until the head is due plus the slack if
// another task is due within the slack after it, else until it is due. Each round schedules two
// tasks `apart`, the later first (so that the earlier, a new head, wakes the worker, which then
// sees both), and reports when the first ran; neither may run early. A spurious or late wake-up may
// end a slack early or late (a slack is an allowance, not a promise), so a round may miss; three
// rounds may not.
namespace {

using steady = std::chrono::steady_clock;

struct two_tasks_outcome
{
    bool on_time;   // neither ran before its due time
    bool coalesced; // the first ran only once the second was due
    steady::duration first_late;
};

// Runs two tasks, due 20 ms and 20 ms + `apart` from now, on a one-worker pool with `slack`.
two_tasks_outcome run_two_tasks(std::chrono::nanoseconds slack, std::chrono::milliseconds apart)
{
    sched::pool_options options;
    options.threads = 1;
    options.timer_slack = slack;
    options.far_tier_horizon = 0ns; // both in the queue the worker waits on, whatever `apart`
    sched::scheduled_thread_pool pool(options);
    const steady::time_point first_due = steady::now() + 20ms;
    const steady::time_point second_due = first_due + apart;
    auto second = pool.schedule_at(second_due, [] { return steady::now(); });
    auto first = pool.schedule_at(first_due, [] { return steady::now(); });
    const steady::time_point first_ran = first.get();
    const bool on_time = first_ran >= first_due && second.get() >= second_due;
    return {on_time, first_ran >= second_due, first_ran - first_due};
}

} // namespace

BOOST_AUTO_TEST_CASE(a_timer_slack_lets_one_wake_up_take_tasks_due_close_together,
                     *boost::unit_test::timeout(60))
{
    bool coalesced = false;
    for (int round = 0; round < 3 && !coalesced; ++round)
    {
        const two_tasks_outcome outcome = run_two_tasks(400ms, 130ms);
        BOOST_TEST(outcome.on_time);
        coalesced = outcome.coalesced;
    }
    BOOST_TEST(coalesced);
}

BOOST_AUTO_TEST_CASE(a_task_with_none_due_within_the_slack_after_it_wakes_on_time,
                     *boost::unit_test::timeout(60))
{
    bool woke_in_time = false; // before the slack ends: a loaded machine may miss a round
    for (int round = 0; round < 3 && !woke_in_time; ++round)
    {
        const two_tasks_outcome outcome = run_two_tasks(200ms, 300ms);
        BOOST_TEST(outcome.on_time);
        woke_in_time = outcome.first_late < 200ms;
    }
    BOOST_TEST(woke_in_time);
}

BOOST_AUTO_TEST_CASE(a_zero_timer_slack_wakes_on_time, *boost::unit_test::timeout(60))
{
    bool woke_in_time = false; // a loaded machine may delay a round's wake-up by 300 ms; not three
    for (int round = 0; round < 3 && !woke_in_time; ++round)
    {
        const two_tasks_outcome outcome = run_two_tasks(0ns, 300ms);
        BOOST_TEST(outcome.on_time);
        woke_in_time = !outcome.coalesced;
    }
    BOOST_TEST(woke_in_time);
}

BOOST_AUTO_TEST_CASE(a_negative_spin_before_due_throws_invalid_argument)
{
    sched::pool_options options;
    options.spin_before_due = -1ns;
    BOOST_CHECK_THROW(manual_pool pool(options), std::invalid_argument);
}

// Real clock. Workers that poll the clock for their heads (the queue's tests show that they
// poll) run every task once, and none before it is due: tasks 10 µs apart, so that a worker
// polls from one to the next, several sharing a due time.
BOOST_AUTO_TEST_CASE(with_a_spin_every_task_runs_once_and_none_before_it_is_due,
                     *boost::unit_test::timeout(60))
{
    sched::pool_options options;
    options.threads = 2;
    options.spin_before_due = 2ms;
    sched::scheduled_thread_pool pool(options);
    constexpr std::size_t count = 400;
    std::vector<std::atomic<int>> runs(count);
    std::vector<sched::scheduled_future<bool>> on_time;
    const steady::time_point start = steady::now() + 20ms;
    for (std::size_t i = 0; i < count; ++i)
    {
        const steady::time_point due = start + (i / 4) * 10us;
        on_time.push_back(pool.schedule_at(due, [due, run = &runs[i]] {
            ++*run;
            return steady::now() >= due;
        }));
    }
    for (auto& f : on_time)
    {
        BOOST_TEST_REQUIRE((f.wait_for(1min) == std::future_status::ready));
        BOOST_TEST(f.get());
    }
    pool.shutdown();
    BOOST_TEST_REQUIRE(pool.await_termination(1min));
    for (const auto& r : runs)
        BOOST_TEST(r.load() == 1);
}

BOOST_AUTO_TEST_CASE(workers_carry_the_configured_names, *boost::unit_test::timeout(60))
{
    sched::pool_options options;
    options.threads = 2;
    options.thread_name = "ticker";
    manual_pool pool(options);
    auto name = pool.submit([] {
        char buffer[16] = {};
#if defined(__linux__)
        pthread_getname_np(pthread_self(), buffer, sizeof buffer);
#endif
        return std::string(buffer);
    });
#if defined(__linux__)
    BOOST_TEST((name.get() == "ticker-0" || name.get() == "ticker-1"));
#else
    name.get();
#endif
}

#if defined(__linux__)
BOOST_AUTO_TEST_CASE(workers_wake_from_timed_waits_without_slack, *boost::unit_test::timeout(60))
{
    const int caller_slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
    manual_pool pool(1);
    auto slack = pool.submit([] { return prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0); });
    BOOST_TEST(slack.get() == 1); // ns
    // Only the workers: the thread that made the pool keeps its own.
    BOOST_TEST(prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0) == caller_slack);
}

BOOST_AUTO_TEST_CASE(on_thread_start_can_pin_workers_to_a_cpu, *boost::unit_test::timeout(60))
{
    cpu_set_t allowed;
    BOOST_TEST_REQUIRE(sched_getaffinity(0, sizeof allowed, &allowed) == 0);
    int cpu = 0;
    while (!CPU_ISSET(cpu, &allowed)) // the first CPU this process may use
        ++cpu;
    sched::pool_options options;
    options.threads = 2;
    options.on_thread_start = [cpu](std::size_t) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        pthread_setaffinity_np(pthread_self(), sizeof one, &one);
    };
    manual_pool pool(options);
    auto pinned = pool.submit([cpu] {
        cpu_set_t mine;
        CPU_ZERO(&mine);
        pthread_getaffinity_np(pthread_self(), sizeof mine, &mine);
        return CPU_COUNT(&mine) == 1 && CPU_ISSET(cpu, &mine);
    });
    BOOST_TEST(pinned.get());
}
#endif

BOOST_AUTO_TEST_CASE(thread_hooks_run_once_per_worker, *boost::unit_test::timeout(60))
{
    std::mutex mutex;
    std::multiset<std::size_t> started, stopped;
    sched::pool_options options;
    options.threads = 3;
    options.on_thread_start = [&](std::size_t i) {
        std::lock_guard lock(mutex);
        started.insert(i);
    };
    options.on_thread_stop = [&](std::size_t i) {
        std::lock_guard lock(mutex);
        stopped.insert(i);
    };
    {
        manual_pool pool(options);
        pool.shutdown();
        BOOST_TEST_REQUIRE(pool.await_termination(60s));
    }
    BOOST_TEST((started == std::multiset<std::size_t>{0, 1, 2}));
    BOOST_TEST((stopped == std::multiset<std::size_t>{0, 1, 2}));
}

BOOST_AUTO_TEST_CASE(execute_hooks_surround_every_run_and_see_its_exception)
{
    std::mutex mutex;
    std::vector<std::string> events;
    const auto log = [&](std::string e) {
        std::lock_guard lock(mutex);
        events.push_back(std::move(e));
    };
    sched::pool_options options = single_worker();
    options.before_execute = [&] {
        log("before");
    };
    options.after_execute = [&](std::exception_ptr e) {
        std::string what = "after:ok";
        if (e)
        {
            try
            {
                std::rethrow_exception(e);
            }
            catch (const std::exception& ex)
            {
                what = std::string("after:") + ex.what();
            }
        }
        log(what);
    };
    manual_pool pool(options);
    pool.submit([&] { log("body"); }).get();
    // Kept until the pool has terminated: after_execute runs after the task completed, so it may
    // still be reading the exception when get() returns.
    auto failing = pool.submit([]() -> int { throw std::runtime_error("bad"); });
    BOOST_CHECK_THROW(failing.get(), std::runtime_error);
    pool.shutdown();
    BOOST_TEST_REQUIRE(pool.await_termination(60s));
    BOOST_TEST(
        (events == std::vector<std::string>{"before", "body", "after:ok", "before", "after:bad"}),
        boost::test_tools::per_element());
}

namespace {
thread_local std::string request_id; // a context that lives on the scheduling thread
} // namespace

BOOST_AUTO_TEST_CASE(decorate_task_carries_context_from_scheduling_to_every_run)
{
    sched::pool_options options = single_worker();
    options.decorate_task = [] {
        return sched::task_wrapper([id = request_id](const std::function<void()>& run) {
            request_id = id; // restore the scheduler's context around the run
            run();
            request_id.clear();
        });
    };
    manual_pool pool(options);
    request_id = "req-42";
    auto one_shot = pool.schedule(1s, [] { return request_id; });
    request_id = "req-43";
    std::mutex mutex;
    std::vector<std::string> seen;
    counter runs;
    auto periodic = pool.schedule_at_fixed_rate(1s, 1s, [&] {
        {
            std::lock_guard lock(mutex);
            seen.push_back(request_id);
        }
        runs.increment();
    });
    request_id.clear();
    manual_clock::advance(3s);
    BOOST_TEST(one_shot.get() == "req-42");
    BOOST_TEST_REQUIRE(runs.wait_for_at_least(3));
    periodic.cancel();
    std::lock_guard lock(mutex);
    BOOST_TEST((seen == std::vector<std::string>{"req-43", "req-43", "req-43"}),
               boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_wrapper_that_swallows_the_exception_still_fails_the_task)
{
    sched::pool_options options = single_worker();
    options.decorate_task = [] {
        return sched::task_wrapper([](const std::function<void()>& run) {
            try
            {
                run();
            }
            catch (...)
            {}
        });
    };
    manual_pool pool(options);
    BOOST_CHECK_THROW(pool.submit([]() -> int { throw std::out_of_range("lost?"); }).get(),
                      std::out_of_range);
}

BOOST_AUTO_TEST_CASE(after_execute_runs_after_a_periodic_task_is_queued_again)
{
    // A slow after_execute hook must not push a fixed-delay task's next run back.
    sched::pool_options options = single_worker();
    options.after_execute = [](std::exception_ptr) {
        manual_clock::advance(2s);
    };
    manual_pool pool(options);
    run_log log;
    manual_future<void> f;
    f = pool.schedule_with_fixed_delay(10s, 5s, [&] { log.record(f); });
    manual_clock::advance(10s);
    BOOST_TEST_REQUIRE(log.runs.wait_for_at_least(1));
    BOOST_TEST_REQUIRE(eventually([&] { return manual_clock::now() == at(12s); }));
    manual_clock::advance_to(at(20s));
    BOOST_TEST_REQUIRE(log.runs.wait_for_at_least(2));
    BOOST_TEST(f.cancel());
    const auto due = log.snapshot();
    BOOST_TEST((due[1] == at(15s))); // 5 s after the run ended at 10 s, not after the hook
}

BOOST_AUTO_TEST_CASE(a_wrapper_that_skips_the_run_fails_the_task)
{
    sched::pool_options options = single_worker();
    options.decorate_task = [] {
        return sched::task_wrapper([](const std::function<void()>&) {});
    };
    manual_pool pool(options);
    BOOST_CHECK_THROW(pool.submit([] { return 1; }).get(), std::logic_error);
}

BOOST_AUTO_TEST_CASE(a_wrapper_that_runs_its_task_twice_runs_it_once_and_fails_the_task)
{
    sched::pool_options options = single_worker();
    std::atomic<int> refused{0};
    options.decorate_task = [&refused] {
        return sched::task_wrapper([&refused](const std::function<void()>& run) {
            run();
            try
            {
                run(); // a retry, say
            }
            catch (const std::logic_error&)
            {
                ++refused;
            }
        });
    };
    manual_pool pool(options);
    std::atomic<int> runs{0};
    BOOST_CHECK_THROW(pool.submit([&runs] { return ++runs; }).get(), std::logic_error);
    BOOST_TEST(runs.load() == 1);
    BOOST_TEST(refused.load() == 1);
}

BOOST_AUTO_TEST_CASE(stop_token_tasks_run_with_a_token_that_is_not_stopped)
{
    manual_pool pool(1);
    auto f = pool.submit(
        [](std::stop_token stop) { return stop.stop_possible() && !stop.stop_requested(); });
    BOOST_TEST(f.get());
}

BOOST_AUTO_TEST_SUITE_END()
