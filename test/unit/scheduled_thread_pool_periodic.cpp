// A pool's periodic tasks beyond Java's: the tick each run is told, the missed-tick policies
// after a deliberately slow run, the failure policies and the error sink, and jitter. All on the
// manual clock with one worker: a run that advances the clock itself is the slow run.

#include <sched/scheduled_thread_pool.hpp>

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <new>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <utility>
#include <vector>

#include "support/counter.hpp"
#include "support/error_log.hpp"
#include "support/failing_allocation.hpp"
#include "support/pool_fixture.hpp"
#include "support/stderr_capture.hpp"
#include "support/tick_log.hpp"
#include "support/wait.hpp"

using namespace std::chrono_literals;
using sched::failure_policy;
using sched::jitter;
using sched::manual_clock;
using sched::missed_tick_policy;
using sched::periodic_options;
using sched::test::error_log;
using sched::test::manual_future;
using sched::test::manual_pool;
using sched::test::tick_log;
using seen = sched::test::seen_tick;

namespace {

using time_point = manual_clock::time_point;
using tick = sched::basic_tick<manual_clock>;

struct periodic_fixture : sched::test::pool_fixture
{
    std::atomic<int> hooked_runs{0}; // before_execute calls
    manual_pool pool{[this] {
        sched::pool_options options = single_worker();
        options.before_execute = [this] {
            ++hooked_runs;
        };
        return options;
    }()};
    tick_log log;

    // A fixed-rate task with a 10 s period from 0 whose first run takes 105 s (ten and a half
    // periods); returns once the worker is done with everything due at 105.
    manual_future<void> slow_first_run(const periodic_options& options)
    {
        manual_future<void> f = pool.schedule_at_fixed_rate(
            0s, 10s,
            [this](const tick& t) {
                if (t.index == 0)
                    manual_clock::advance(105s);
                log.record(t); // after: once the test sees it, the clock is at 105
            },
            options);
        BOOST_TEST_REQUIRE(log.runs.wait_for_at_least(1));
        settle(pool);
        return f;
    }

    static seen on_time(time_point t, std::uint64_t index) { return seen::on_time(t, index); }

    // One worker, its error sink into `errors`.
    static sched::pool_options sinking_to(error_log& errors)
    {
        sched::pool_options options = single_worker();
        options.error_sink = errors.sink();
        return options;
    }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(test_periodic_tasks, periodic_fixture)

BOOST_AUTO_TEST_CASE(each_run_is_told_when_it_was_due_when_it_started_and_its_index)
{
    auto f = pool.schedule_at_fixed_rate(10s, 10s, [&](const tick& t) { log.record(t); });
    manual_clock::advance(10s);
    BOOST_TEST_REQUIRE(log.runs.wait_for_at_least(1));
    manual_clock::advance(10s);
    BOOST_TEST_REQUIRE(log.runs.wait_for_at_least(2));
    manual_clock::advance(15s); // 35: the run due at 30 starts 5 s late
    BOOST_TEST_REQUIRE(log.runs.wait_for_at_least(3));
    BOOST_TEST(f.cancel());
    const std::vector<seen> expected{
        on_time(at(10s), 0), on_time(at(20s), 1), {at(30s), at(35s), 2, 0}};
    BOOST_TEST(log.snapshot() == expected, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_tick_and_a_stop_token_come_together)
{
    std::stop_token seen_token;
    auto f = pool.schedule_with_fixed_delay(1s, 1s, [&](const tick& t, std::stop_token stop) {
        seen_token = stop;
        log.record(t);
    });
    manual_clock::advance(1s);
    BOOST_TEST_REQUIRE(log.runs.wait_for_at_least(1));
    settle(pool);
    BOOST_TEST(seen_token.stop_possible());
    BOOST_TEST(f.cancel(true));
    BOOST_TEST(seen_token.stop_requested()); // interruption reaches the token the run was given
}

BOOST_AUTO_TEST_CASE(burst_runs_every_missed_point_after_a_slow_run)
{
    auto f = slow_first_run({});
    std::vector<seen> expected{on_time(at(0s), 0)};
    for (std::uint64_t k = 1; k <= 10; ++k)
        expected.push_back({at(k * 10s), at(105s), k, 0});
    BOOST_TEST(log.snapshot() == expected, boost::test_tools::per_element());
    manual_clock::advance(5s);
    BOOST_TEST_REQUIRE(log.runs.wait_for_at_least(12));
    BOOST_TEST(f.cancel());
    BOOST_TEST((log.snapshot().back() == on_time(at(110s), 11)));
}

BOOST_AUTO_TEST_CASE(a_capped_burst_runs_the_latest_points_and_counts_the_rest_missed)
{
    auto f = slow_first_run({.missed = missed_tick_policy::burst(3)});
    manual_clock::advance(5s);
    BOOST_TEST_REQUIRE(log.runs.wait_for_at_least(5));
    BOOST_TEST(f.cancel());
    const std::vector<seen> expected{on_time(at(0s), 0),
                                     {at(80s), at(105s), 1, 7}, // 10..70 dropped
                                     {at(90s), at(105s), 2, 0},
                                     {at(100s), at(105s), 3, 0},
                                     on_time(at(110s), 4)};
    BOOST_TEST(log.snapshot() == expected, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(skip_waits_for_the_next_grid_point_and_reports_the_skipped_ones)
{
    auto f = slow_first_run({.missed = missed_tick_policy::skip()});
    BOOST_TEST(log.runs.value() == 1); // nothing ran at 105
    manual_clock::advance(5s);
    BOOST_TEST_REQUIRE(log.runs.wait_for_at_least(2));
    BOOST_TEST(f.cancel());
    BOOST_TEST(hooked_runs.load() == 3); // two runs and settle()'s task: the skip is no run
    const std::vector<seen> expected{on_time(at(0s), 0), {at(110s), at(110s), 1, 10}};
    BOOST_TEST(log.snapshot() == expected, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(delay_moves_the_grid_to_the_late_run)
{
    auto f = slow_first_run({.missed = missed_tick_policy::delay()});
    manual_clock::advance(10s); // 115: a period after the late run started
    BOOST_TEST_REQUIRE(log.runs.wait_for_at_least(3));
    BOOST_TEST(f.cancel());
    const std::vector<seen> expected{
        on_time(at(0s), 0), {at(10s), at(105s), 1, 9}, on_time(at(115s), 2)};
    BOOST_TEST(log.snapshot() == expected, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_caller_run_periodic_task_is_told_the_due_time_it_was_scheduled_for)
{
    sched::pool_options options = single_worker();
    options.rejection = sched::rejection_policy::caller_runs;
    manual_pool caller_runs(options);
    caller_runs.shutdown();
    manual_clock::advance(1h);
    auto f = caller_runs.schedule_at_fixed_rate(10s, 10s, [&](const tick& t) { log.record(t); },
                                                {.missed = missed_tick_policy::delay()});
    BOOST_CHECK_THROW(f.get(), sched::cancelled_error); // ran once, on this thread, and ended
    // Due 10 s after it was scheduled; run at once, so not late, and nothing missed.
    const std::vector<seen> expected{{at(1h + 10s), at(1h), 0, 0}};
    BOOST_TEST(log.snapshot() == expected, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(the_first_failure_ends_a_task_by_default_and_the_sink_sees_it)
{
    error_log errors;
    manual_pool sinking(sinking_to(errors));
    auto f = sinking.schedule_at_fixed_rate(1s, 1s, [] { throw std::runtime_error("boom"); });
    manual_clock::advance(5s);
    BOOST_CHECK_THROW(f.get(), std::runtime_error);
    settle(sinking); // the sink is called after the future completes
    BOOST_TEST(errors.snapshot() == std::vector<std::string>{"boom"},
               boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(keep_running_reports_every_failure_to_the_sink_and_runs_on)
{
    error_log errors;
    manual_pool sinking(sinking_to(errors));
    auto f = sinking.schedule_at_fixed_rate(1s, 1s,
                                            [&](const tick& t) {
                                                log.record(t);
                                                throw std::runtime_error("run " +
                                                                         std::to_string(t.index));
                                            },
                                            {.on_failure = failure_policy::keep_running()});
    manual_clock::advance(4s);
    BOOST_TEST_REQUIRE(log.runs.wait_for_at_least(4));
    settle(sinking);
    BOOST_TEST(!f.is_done());
    BOOST_TEST(f.cancel());
    BOOST_CHECK_THROW(f.get(), sched::cancelled_error);
    const std::vector<std::string> expected{"run 0", "run 1", "run 2", "run 3"};
    BOOST_TEST(errors.snapshot() == expected, boost::test_tools::per_element());
}

// A fixed delay counts from the end of the run, not from the end of the error sink's report of
// its failure (it counted from the sink's end: a review's probe).
BOOST_AUTO_TEST_CASE(a_fixed_delay_after_a_failed_run_counts_from_the_runs_end)
{
    sched::pool_options options = single_worker();
    options.error_sink = [](std::exception_ptr) {
        manual_clock::advance(5s); // a slow sink
    };
    manual_pool sinking(options);
    auto f = sinking.schedule_with_fixed_delay(0s, 10s,
                                               [&](const tick& t) {
                                                   log.record(t);
                                                   if (t.index == 0)
                                                       throw std::runtime_error("first run");
                                               },
                                               {.on_failure = failure_policy::keep_running()});
    BOOST_TEST_REQUIRE(log.runs.wait_for_at_least(1));
    settle(sinking);
    BOOST_TEST((manual_clock::now() == at(5s))); // the sink has run
    BOOST_TEST((f.delay() == 5s));               // due at 10 s: the run ended at 0
    manual_clock::advance(5s);
    BOOST_TEST_REQUIRE(log.runs.wait_for_at_least(2));
    BOOST_TEST(f.cancel());
}

// Real clock. Two tasks due together, so that the worker wakes for them the slack after they are
// due, which is longer than their period: under skip() they run all the same (they never ran:
// each run was late by the slack, more than a period; a review's probe).
BOOST_AUTO_TEST_CASE(skip_runs_tasks_whose_period_is_shorter_than_the_pools_slack,
                     *boost::unit_test::timeout(120))
{
    sched::pool_options options;
    options.threads = 1;
    options.timer_slack = 25ms;
    sched::scheduled_thread_pool steady_pool(options);
    sched::test::counter a;
    sched::test::counter b;
    const periodic_options skip{.missed = missed_tick_policy::skip()};
    auto fa = steady_pool.schedule_at_fixed_rate(
        10ms, 10ms, [&] { a.increment(); }, skip);
    auto fb = steady_pool.schedule_at_fixed_rate(
        10ms, 10ms, [&] { b.increment(); }, skip);
    BOOST_TEST(a.wait_for_at_least(3));
    BOOST_TEST(b.wait_for_at_least(3));
    BOOST_TEST(fa.cancel());
    BOOST_TEST(fb.cancel());
}

BOOST_AUTO_TEST_CASE(stop_after_k_ends_at_k_failures_in_a_row_and_a_success_resets_the_count)
{
    error_log errors;
    manual_pool sinking(sinking_to(errors));
    // Runs 0, 1 fail; 2 succeeds; 3, 4, 5 fail: the third in a row ends it.
    auto f = sinking.schedule_at_fixed_rate(1s, 1s,
                                            [&](const tick& t) {
                                                log.record(t);
                                                if (t.index != 2)
                                                    throw std::runtime_error(
                                                        "run " + std::to_string(t.index));
                                            },
                                            {.on_failure = failure_policy::stop_after(3)});
    manual_clock::advance(20s);
    BOOST_CHECK_EXCEPTION(f.get(), std::runtime_error, [](const std::runtime_error& e) {
        return e.what() == std::string("run 5");
    });
    BOOST_TEST(log.runs.value() == 6);
    settle(sinking);
    const std::vector<std::string> expected{"run 0", "run 1", "run 3", "run 4", "run 5"};
    BOOST_TEST(errors.snapshot() == expected, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(the_sink_sees_what_execute_and_one_shot_tasks_throw)
{
    error_log errors;
    manual_pool sinking(sinking_to(errors));
    sinking.execute([] { throw std::runtime_error("no future"); });
    auto f = sinking.submit([]() -> int { throw std::logic_error("with a future"); });
    BOOST_CHECK_THROW(f.get(), std::logic_error); // the future still carries it
    settle(sinking);
    const std::vector<std::string> expected{"no future", "with a future"};
    BOOST_TEST(errors.snapshot() == expected, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(jitter_stays_within_its_spread_and_repeats_with_a_seed)
{
    const periodic_options options{.spread = jitter::uniform(2s), .seed = 2026};
    tick_log twin;
    auto f = pool.schedule_at_fixed_rate(
        10s, 10s, [&](const tick& t) { log.record(t); }, options);
    auto g = pool.schedule_at_fixed_rate(
        10s, 10s, [&](const tick& t) { twin.record(t); }, options);
    constexpr int runs = 50;
    for (int k = 1; k <= runs + 1; ++k)
        manual_clock::advance(10s);
    BOOST_TEST_REQUIRE(log.runs.wait_for_at_least(runs));
    BOOST_TEST_REQUIRE(twin.runs.wait_for_at_least(runs));
    settle(pool);
    BOOST_TEST(f.cancel());
    BOOST_TEST(g.cancel());
    const std::vector<seen> ticks = log.snapshot();
    const std::vector<seen> twin_ticks = twin.snapshot();
    bool moved = false;
    for (int k = 0; k < runs; ++k)
    {
        BOOST_TEST_CONTEXT("run " << k)
        {
            const time_point point = at(10s + k * 10s);
            BOOST_TEST((ticks[k].scheduled >= point - 2s));
            BOOST_TEST((ticks[k].scheduled <= point + 2s));
            BOOST_TEST((ticks[k].scheduled == twin_ticks[k].scheduled)); // the same seed
            moved = moved || ticks[k].scheduled != point;
        }
    }
    BOOST_TEST(moved);
}

// periodic_options.hpp: with no seed, "every task draws a seed of its own". Tasks scheduled
// alike from one thread at one (manual) time, so a seed drawn from the clock, a constant or
// anything else they share gives them all the same offsets; their own seeds, all different
// ones, with nanosecond offsets over ±2 s.
BOOST_AUTO_TEST_CASE(unseeded_tasks_draw_jitter_of_their_own)
{
    constexpr std::size_t tasks = 6;
    constexpr int runs = 3;
    std::array<tick_log, tasks> logs;
    std::vector<manual_future<void>> futures;
    for (tick_log& l : logs)
    {
        futures.push_back(pool.schedule_at_fixed_rate(
            10s, 10s, [&l](const tick& t) { l.record(t); }, {.spread = jitter::uniform(2s)}));
    }
    for (int k = 1; k <= runs + 1; ++k)
        manual_clock::advance(10s); // 40 s: runs 0, 1 and 2 of each are due
    for (tick_log& l : logs)
        BOOST_TEST_REQUIRE(l.runs.wait_for_at_least(runs));
    for (manual_future<void>& f : futures)
        BOOST_TEST(f.cancel());
    for (int k = 0; k < runs; ++k)
    {
        BOOST_TEST_CONTEXT("run " << k)
        {
            std::vector<time_point> scheduled;
            for (const tick_log& l : logs)
                scheduled.push_back(l.snapshot().at(static_cast<std::size_t>(k)).scheduled);
            for (const time_point t : scheduled)
            {
                BOOST_TEST((t >= at(10s + k * 10s - 2s)));
                BOOST_TEST((t <= at(10s + k * 10s + 2s)));
            }
            std::sort(scheduled.begin(), scheduled.end());
            BOOST_TEST((std::adjacent_find(scheduled.begin(), scheduled.end()) == scheduled.end()),
                       "two of " << tasks << " unseeded tasks were given the same offset");
        }
    }
}

BOOST_AUTO_TEST_CASE(options_that_do_not_fit_throw_invalid_argument_and_schedule_nothing)
{
    const auto noop = [] {
    };
    BOOST_CHECK_THROW(pool.schedule_at_fixed_rate(1s, 1s, noop, {.spread = jitter::uniform(2s)}),
                      std::invalid_argument);
    BOOST_CHECK_THROW(
        pool.schedule_with_fixed_delay(1s, 1s, noop, {.missed = missed_tick_policy::skip()}),
        std::invalid_argument);
    BOOST_CHECK_THROW(
        pool.schedule_with_fixed_delay(1s, 1s, noop, {.missed = missed_tick_policy::burst()}),
        std::invalid_argument);
    BOOST_TEST(pool.queue().size() == 0u);
}

BOOST_AUTO_TEST_CASE(a_failure_that_ends_a_task_with_no_future_left_is_written_to_stderr)
{
    // No error_sink: a failure that a future carries stays with it; one that ends a task whose
    // future was dropped (a heartbeat, often) would otherwise go unseen.
    sched::test::stderr_capture captured;
    manual_pool quiet(single_worker());
    auto kept = quiet.schedule_at_fixed_rate(1s, 1s, [] { throw std::runtime_error("kept beat"); });
    (void)quiet.schedule_at_fixed_rate(1s, 1s, [] { throw std::runtime_error("dropped beat"); });
    manual_clock::advance(1s); // both run once their futures are kept and dropped
    BOOST_CHECK_THROW(kept.get(), std::runtime_error);
    settle(quiet);
    const std::string text = captured.text();
    BOOST_TEST(text.find("dropped beat") != std::string::npos);
    BOOST_TEST(text.find("kept beat") == std::string::npos);
}

// A task that cannot go back in the queue for want of memory ends with std::bad_alloc, which is
// reported as any failure that ends a task is: a heartbeat's future is often dropped, and it would
// stop unseen (a review's finding).
BOOST_AUTO_TEST_CASE(a_periodic_task_that_cannot_be_queued_again_ends_and_the_sink_is_told)
{
    error_log errors;
    sched::pool_options options = sinking_to(errors);
    options.far_tier_horizon = 0ns; // the fillers go to the main heap, where it goes back
    manual_pool sinking(options);
    std::vector<manual_future<void>> fillers;
    bool full = false;
    sched::test::counter runs;
    (void)sinking.schedule_at_fixed_rate(0s, 1s, [&] {
        if (runs.value() == 0) // on the worker: fills the queue, then its own push fails
        {
            for (int i = 0; i < 1'000'000 && !full; ++i)
            {
                sched::test::fail_next_aligned_allocation(); // the heap's growth, if it grows
                try
                {
                    fillers.push_back(sinking.schedule(1h, [] {}));
                }
                catch (const std::bad_alloc&)
                {
                    full = true;
                }
            }
            sched::test::fail_next_aligned_allocation(full);
        }
        runs.increment();
    });
    BOOST_TEST_REQUIRE(runs.wait_for_at_least(1));
    BOOST_TEST_REQUIRE(full);
    BOOST_TEST_REQUIRE(sched::test::eventually([&] { return !errors.snapshot().empty(); }));
    manual_clock::advance(5s); // it would have run 5 more times
    settle(sinking);
    BOOST_TEST(runs.value() == 1);
    BOOST_TEST(errors.snapshot() == std::vector<std::string>{std::bad_alloc().what()},
               boost::test_tools::per_element());
}

BOOST_AUTO_TEST_SUITE_END()
