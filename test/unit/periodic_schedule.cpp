// detail::periodic_schedule: when a periodic task's runs are due and what each is told, under
// every missed-tick policy, failure policy and jitter. Times are plain manual-clock values: the
// schedule is told when each run starts and ends, so nothing here runs a thread.

#include <sched/manual_clock.hpp>
#include <sched/periodic_options.hpp>

#include <sched/detail/periodic_schedule.hpp>

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <vector>

#include "support/child_process.hpp"
#include "support/manual_clock_fixture.hpp"

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace {

using namespace std::chrono_literals;
using sched::failure_policy;
using sched::jitter;
using sched::manual_clock;
using sched::missed_tick_policy;
using sched::periodic_options;
using sched::detail::period_kind;
using schedule = sched::detail::periodic_schedule<manual_clock>;
using time_point = manual_clock::time_point;
using tick = sched::basic_tick<manual_clock>;

time_point at(manual_clock::duration d)
{
    return time_point(d);
}

periodic_options with_missed(missed_tick_policy policy)
{
    periodic_options options;
    options.missed = policy;
    return options;
}

// One run that starts at `started`, for a schedule whose next run is due at `due`; returns its
// tick (empty if skipped) and the next due time, given that the run ended at `ended`.
struct run_result
{
    std::optional<tick> told;
    time_point next;
};

run_result run(schedule& s, time_point due, time_point started, time_point ended)
{
    run_result r{s.begin(due, started), {}};
    r.next = s.next_due(r.told ? ended : started);
    return r;
}

// A fixed-rate schedule with a 10 s period whose first run, due at 0, takes 105 s: ten and a half
// periods, so the points 10 to 100 pass during it.
struct slow_first_run
{
    schedule s;
    time_point next;

    explicit slow_first_run(const periodic_options& options)
        : s(period_kind::fixed_rate, 10s, options)
    {
        BOOST_TEST_REQUIRE((s.first_due(at(0s)) == at(0s)));
        const run_result first = run(s, at(0s), at(0s), at(105s));
        BOOST_TEST_REQUIRE(first.told.has_value());
        BOOST_TEST(first.told->index == 0u);
        BOOST_TEST(first.told->missed == 0u);
        next = first.next;
    }
};

} // namespace

BOOST_AUTO_TEST_SUITE(test_periodic_schedule)

BOOST_AUTO_TEST_CASE(burst_gives_every_missed_point_its_run_back_to_back)
{
    slow_first_run task({});
    // Every point from 10 to 100 runs at 105, each told when it was due and how late it is.
    for (int k = 1; k <= 10; ++k)
    {
        BOOST_TEST_CONTEXT("run " << k)
        {
            BOOST_TEST_REQUIRE((task.next == at(k * 10s)));
            const run_result r = run(task.s, task.next, at(105s), at(105s));
            BOOST_TEST_REQUIRE(r.told.has_value());
            BOOST_TEST((r.told->scheduled == at(k * 10s)));
            BOOST_TEST((r.told->lag() == 105s - k * 10s));
            BOOST_TEST(r.told->index == static_cast<std::uint64_t>(k));
            BOOST_TEST(r.told->missed == 0u);
            task.next = r.next;
        }
    }
    BOOST_TEST((task.next == at(110s))); // back on the grid
}

BOOST_AUTO_TEST_CASE(a_capped_burst_runs_only_the_latest_points_and_counts_the_rest_missed)
{
    slow_first_run task({.missed = missed_tick_policy::burst(3)});
    BOOST_TEST_REQUIRE((task.next == at(10s)));
    // At 105 the points 10..100 are due: ten. The cap keeps 80, 90 and 100; 10..70 are missed.
    const run_result first = run(task.s, task.next, at(105s), at(105s));
    BOOST_TEST_REQUIRE(first.told.has_value());
    BOOST_TEST((first.told->scheduled == at(80s)));
    BOOST_TEST(first.told->missed == 7u);
    BOOST_TEST(first.told->index == 1u);
    BOOST_TEST_REQUIRE((first.next == at(90s)));
    const run_result second = run(task.s, first.next, at(105s), at(105s));
    BOOST_TEST_REQUIRE(second.told.has_value());
    BOOST_TEST(second.told->missed == 0u);
    BOOST_TEST_REQUIRE((second.next == at(100s)));
    const run_result third = run(task.s, second.next, at(105s), at(105s));
    BOOST_TEST_REQUIRE(third.told.has_value());
    BOOST_TEST(third.told->missed == 0u);
    BOOST_TEST((third.next == at(110s)));
}

BOOST_AUTO_TEST_CASE(a_burst_within_its_cap_is_not_cut)
{
    slow_first_run task({.missed = missed_tick_policy::burst(10)});
    // Ten points due at 105, cap ten: all run, none missed.
    for (int k = 1; k <= 10; ++k)
    {
        const run_result r = run(task.s, task.next, at(105s), at(105s));
        BOOST_TEST_REQUIRE(r.told.has_value());
        BOOST_TEST(r.told->missed == 0u);
        task.next = r.next;
    }
    BOOST_TEST((task.next == at(110s)));
}

BOOST_AUTO_TEST_CASE(skip_waits_for_the_next_point_of_the_grid_and_reports_what_it_skipped)
{
    slow_first_run task(with_missed(missed_tick_policy::skip()));
    BOOST_TEST_REQUIRE((task.next == at(10s)));
    // At 105 the run due at 10 is nine periods late: skipped, with the points up to 100.
    const run_result skipped = run(task.s, task.next, at(105s), at(105s));
    BOOST_TEST(!skipped.told.has_value());
    BOOST_TEST_REQUIRE((skipped.next == at(110s)));
    const run_result next = run(task.s, skipped.next, at(110s), at(110s));
    BOOST_TEST_REQUIRE(next.told.has_value());
    BOOST_TEST((next.told->scheduled == at(110s)));
    BOOST_TEST(next.told->missed == 10u); // 10, 20, ..., 100
    BOOST_TEST(next.told->index == 1u);   // skipped runs are not runs
    BOOST_TEST((next.next == at(120s)));
    // Late by less than a period: it runs, late, and nothing is missed.
    const run_result late = run(task.s, next.next, at(129s), at(129s));
    BOOST_TEST_REQUIRE(late.told.has_value());
    BOOST_TEST((late.told->lag() == 9s));
    BOOST_TEST(late.told->missed == 0u);
    BOOST_TEST((late.next == at(130s)));
}

BOOST_AUTO_TEST_CASE(skip_runs_a_point_that_falls_due_exactly_now)
{
    schedule s(period_kind::fixed_rate, 10s, with_missed(missed_tick_policy::skip()));
    BOOST_TEST_REQUIRE((s.first_due(at(0s)) == at(0s)));
    // Ten periods later: 0..90 have passed, but 100 is due now, not missed.
    const run_result skipped = run(s, at(0s), at(100s), at(100s));
    BOOST_TEST(!skipped.told.has_value());
    BOOST_TEST_REQUIRE((skipped.next == at(100s)));
    const run_result now = run(s, skipped.next, at(100s), at(100s));
    BOOST_TEST_REQUIRE(now.told.has_value());
    BOOST_TEST(now.told->missed == 10u);
    BOOST_TEST((now.told->lag() == 0s));
}

// A pool may start a run up to its timer slack late on purpose; skip() does not skip for that.
// With a slack longer than the period, every run it woke for with company was skipped, for ever
// (a review's probe). Such a run stands for the latest point that has passed, as burst(1) would:
// it runs once, not once for each point (a review of the first fix).
BOOST_AUTO_TEST_CASE(skip_forgives_the_slack_its_queue_may_add)
{
    schedule s(period_kind::fixed_rate, 10s, with_missed(missed_tick_policy::skip()), 25s);
    BOOST_TEST_REQUIRE((s.first_due(at(10s)) == at(10s)));
    const run_result late = run(s, at(10s), at(35s), at(35s)); // late by the slack: it runs
    BOOST_TEST_REQUIRE(late.told.has_value());
    BOOST_TEST((late.told->scheduled == at(30s))); // for the latest point that has passed
    BOOST_TEST(late.told->missed == 2u);           // 10 and 20
    BOOST_TEST((late.next == at(40s)));            // the first point not in the past
    const run_result in_time = run(s, late.next, at(45s), at(45s)); // late by less than a period
    BOOST_TEST_REQUIRE(in_time.told.has_value());
    BOOST_TEST((in_time.told->scheduled == at(40s)));
    BOOST_TEST(in_time.told->missed == 0u);
    // A period late beyond the slack: skipped, up to the first point not in the past.
    const run_result skipped = run(s, in_time.next, at(85s), at(85s));
    BOOST_TEST(!skipped.told.has_value());
    BOOST_TEST((skipped.next == at(90s)));
}

BOOST_AUTO_TEST_CASE(delay_moves_the_grid_to_the_late_run)
{
    slow_first_run task(with_missed(missed_tick_policy::delay()));
    BOOST_TEST_REQUIRE((task.next == at(10s)));
    // Due at 10, started at 105: nine whole periods late, and the grid now runs from 105.
    const run_result late = run(task.s, task.next, at(105s), at(107s));
    BOOST_TEST_REQUIRE(late.told.has_value());
    BOOST_TEST((late.told->scheduled == at(10s)));
    BOOST_TEST(late.told->missed == 9u);
    BOOST_TEST_REQUIRE((late.next == at(115s))); // a period after it started, not after it ended
    const run_result on_time = run(task.s, late.next, at(115s), at(115s));
    BOOST_TEST_REQUIRE(on_time.told.has_value());
    BOOST_TEST(on_time.told->missed == 0u);
    BOOST_TEST((on_time.next == at(125s)));
}

BOOST_AUTO_TEST_CASE(a_fixed_delay_counts_from_the_end_of_each_run)
{
    schedule s(period_kind::fixed_delay, 10s, {});
    BOOST_TEST_REQUIRE((s.first_due(at(5s)) == at(5s)));
    const run_result first = run(s, at(5s), at(5s), at(8s));
    BOOST_TEST_REQUIRE((first.next == at(18s)));
    // Started 25 s late: two whole periods.
    const run_result late = run(s, first.next, at(43s), at(44s));
    BOOST_TEST_REQUIRE(late.told.has_value());
    BOOST_TEST(late.told->missed == 2u);
    BOOST_TEST((late.told->lag() == 25s));
    BOOST_TEST((late.next == at(54s)));
}

BOOST_AUTO_TEST_CASE(a_fixed_delay_refuses_a_grid_policy)
{
    BOOST_CHECK_THROW(
        schedule(period_kind::fixed_delay, 10s, with_missed(missed_tick_policy::burst())),
        std::invalid_argument);
    BOOST_CHECK_THROW(
        schedule(period_kind::fixed_delay, 10s, with_missed(missed_tick_policy::burst(2))),
        std::invalid_argument);
    BOOST_CHECK_THROW(
        schedule(period_kind::fixed_delay, 10s, with_missed(missed_tick_policy::skip())),
        std::invalid_argument);
    BOOST_CHECK_NO_THROW(
        schedule(period_kind::fixed_delay, 10s, with_missed(missed_tick_policy::delay())));
}

BOOST_AUTO_TEST_CASE(bad_policies_are_refused)
{
    BOOST_CHECK_THROW(missed_tick_policy::burst(0), std::invalid_argument);
    BOOST_CHECK_THROW(failure_policy::stop_after(0), std::invalid_argument);
    BOOST_CHECK_THROW(jitter::uniform(-1ms), std::invalid_argument);
    BOOST_CHECK_THROW(jitter::uniform(std::chrono::duration<double>(std::nan(""))),
                      std::invalid_argument);
    BOOST_CHECK_THROW(jitter::fraction_of_period(1.5), std::invalid_argument);
    BOOST_CHECK_THROW(jitter::fraction_of_period(-0.1), std::invalid_argument);
    BOOST_CHECK_THROW(jitter::fraction_of_period(std::nan("")), std::invalid_argument);
    // Larger than the period: refused when it meets the period.
    const periodic_options too_wide{.spread = jitter::uniform(10s + 1ns)};
    BOOST_CHECK_THROW(schedule(period_kind::fixed_rate, 10s, too_wide), std::invalid_argument);
    const periodic_options as_wide{.spread = jitter::uniform(10s)};
    BOOST_CHECK_NO_THROW(schedule(period_kind::fixed_rate, 10s, as_wide));
}

BOOST_AUTO_TEST_CASE(stop_ends_the_task_at_its_first_failure)
{
    schedule s(period_kind::fixed_rate, 1s, {});
    BOOST_TEST(s.ends_with_failure());
}

BOOST_AUTO_TEST_CASE(keep_running_never_ends_the_task)
{
    schedule s(period_kind::fixed_rate, 1s, {.on_failure = failure_policy::keep_running()});
    for (int i = 0; i < 1000; ++i)
        BOOST_TEST_REQUIRE(!s.ends_with_failure());
}

BOOST_AUTO_TEST_CASE(stop_after_counts_failures_in_a_row_and_a_success_starts_again)
{
    schedule s(period_kind::fixed_rate, 1s, {.on_failure = failure_policy::stop_after(3)});
    BOOST_TEST(!s.ends_with_failure());
    BOOST_TEST(!s.ends_with_failure());
    s.succeeded(); // two in a row, then a success: the count starts again
    BOOST_TEST(!s.ends_with_failure());
    BOOST_TEST(!s.ends_with_failure());
    BOOST_TEST(s.ends_with_failure()); // the third in a row
}

BOOST_AUTO_TEST_CASE(jitter_stays_within_its_spread_and_does_not_move_the_grid)
{
    const periodic_options options{.spread = jitter::fraction_of_period(0.1), .seed = 7};
    schedule s(period_kind::fixed_rate, 10s, options);
    time_point due = s.first_due(at(0s));
    bool early = false;
    bool late = false;
    for (int k = 0; k < 2000; ++k)
    {
        BOOST_TEST_CONTEXT("run " << k)
        {
            const time_point point = at(k * 10s);
            BOOST_TEST_REQUIRE((due >= point - 1s));
            BOOST_TEST_REQUIRE((due <= point + 1s));
            early = early || due < point - 500ms;
            late = late || due > point + 500ms;
            // Each run starts when due: the grid, not the jittered time, carries on.
            due = run(s, due, due, due).next;
        }
    }
    BOOST_TEST(early); // the spread is used on both sides
    BOOST_TEST(late);
}

// A late run under delay() moves the grid to its start: the next run is due a period after it,
// moved by its own jitter only, so it never falls due before the late run started (with the
// spread as wide as the period, the late run's offset carried over could take it back that far).
BOOST_AUTO_TEST_CASE(delay_with_jitter_plans_the_next_run_a_period_after_a_late_start)
{
    const periodic_options options{
        .missed = missed_tick_policy::delay(), .spread = jitter::uniform(10s), .seed = 11};
    schedule s(period_kind::fixed_rate, 10s, options);
    time_point due = s.first_due(at(100s));
    for (int k = 0; k < 200; ++k)
    {
        BOOST_TEST_CONTEXT("run " << k)
        {
            const time_point started = due + 30s; // late whatever either offset
            const run_result r = run(s, due, started, started + 1s);
            BOOST_TEST_REQUIRE(r.told.has_value());
            BOOST_TEST_REQUIRE((r.next >= started));
            BOOST_TEST_REQUIRE((r.next <= started + 20s));
            due = r.next;
        }
    }
}

// A run that starts right when due moves the grid as a late one does: java.util.Timer's fixed
// delay counts from each start, jitter included. Before, the grid kept the point and dropped the
// run's offset, so on a manual clock intervals between starts reached the period ± twice the
// spread; a twin schedule whose runs start a tick late shows where each must be due.
BOOST_AUTO_TEST_CASE(delay_with_jitter_counts_an_on_time_start_as_its_start)
{
    const periodic_options options{
        .missed = missed_tick_policy::delay(), .spread = jitter::uniform(4s), .seed = 7};
    schedule on_time(period_kind::fixed_rate, 10s, options);
    schedule a_tick_late(period_kind::fixed_rate, 10s, options);
    time_point due = on_time.first_due(at(100s));
    time_point late_due = a_tick_late.first_due(at(100s));
    BOOST_TEST_REQUIRE((due == late_due));
    for (int k = 0; k < 100; ++k)
    {
        BOOST_TEST_CONTEXT("run " << k)
        {
            const run_result r = run(on_time, due, due, due + 1s);
            const time_point late_start = late_due + 1ns;
            const run_result l = run(a_tick_late, late_due, late_start, late_start + 1s);
            BOOST_TEST_REQUIRE((r.next - due >= 6s));
            BOOST_TEST_REQUIRE((r.next - due <= 14s));
            BOOST_TEST_REQUIRE((r.next - due == l.next - late_start));
            due = r.next;
            late_due = l.next;
        }
    }
}

// Seeds that differ by little (connection numbers, say) must not give offsets close together:
// minstd_rand's first output follows its seed linearly (seeds 1 to 1,000 all gave a first offset
// in the lower third of the spread).
BOOST_AUTO_TEST_CASE(neighbouring_seeds_give_unrelated_offsets)
{
    int early = 0;
    int late = 0;
    for (std::uint64_t seed = 1; seed <= 200; ++seed)
    {
        schedule s(period_kind::fixed_rate, 10s, {.spread = jitter::uniform(3s), .seed = seed});
        const time_point first = s.first_due(at(100s));
        early += first < at(100s) - 1s;
        late += first > at(100s) + 1s;
    }
    // A uniform offset falls in each outer third with probability 1/3: about 67 of 200 each.
    BOOST_TEST(early >= 40);
    BOOST_TEST(late >= 40);
}

BOOST_AUTO_TEST_CASE(jitter_is_reproducible_with_a_seed)
{
    const auto dues = [](std::uint64_t seed) {
        schedule s(period_kind::fixed_rate, 1s, {.spread = jitter::uniform(250ms), .seed = seed});
        std::vector<time_point> out{s.first_due(at(0s))};
        for (int k = 0; k < 100; ++k)
            out.push_back(run(s, out.back(), out.back(), out.back()).next);
        return out;
    };
    BOOST_TEST((dues(42) == dues(42)));
    BOOST_TEST((dues(42) != dues(43)));
}

// A first point centuries back (time_point::min(), "at once"): how far behind it is overflows
// the clock's duration, yet every policy treats it as any late start.
struct first_due_at_the_dawn_of_time
{
    schedule s;
    time_point first;
    time_point now = at(1000s);

    explicit first_due_at_the_dawn_of_time(period_kind kind, const periodic_options& options = {})
        : s(kind, 10s, options), first(s.first_due(time_point::min()))
    {
        BOOST_TEST_REQUIRE((first == time_point::min()));
    }
};

BOOST_AUTO_TEST_CASE(a_capped_burst_from_far_in_the_past_runs_its_latest_points_then_the_grid)
{
    first_due_at_the_dawn_of_time task(period_kind::fixed_rate,
                                       with_missed(missed_tick_policy::burst(3)));
    time_point next = task.first;
    std::vector<time_point> scheduled;
    for (int k = 0; k < 3; ++k)
    {
        const run_result r = run(task.s, next, task.now, task.now);
        BOOST_TEST_REQUIRE(r.told.has_value());
        if (k == 0)
            BOOST_TEST(r.told->missed > 1000u); // every point up to the three
        else
            BOOST_TEST(r.told->missed == 0u);
        scheduled.push_back(r.told->scheduled);
        next = r.next;
    }
    BOOST_TEST(scheduled[0] > task.now - 30s); // the three latest points that have passed
    BOOST_TEST((scheduled[1] == scheduled[0] + 10s));
    BOOST_TEST((scheduled[2] == scheduled[1] + 10s));
    BOOST_TEST(scheduled[2] <= task.now);
    BOOST_TEST(next > task.now); // then the next point, on the same grid
    BOOST_TEST((next == scheduled[2] + 10s));
}

BOOST_AUTO_TEST_CASE(skip_from_far_in_the_past_waits_for_the_next_point_of_the_grid)
{
    first_due_at_the_dawn_of_time task(period_kind::fixed_rate,
                                       with_missed(missed_tick_policy::skip()));
    const run_result skipped = run(task.s, task.first, task.now, task.now);
    BOOST_TEST(!skipped.told.has_value());
    BOOST_TEST(skipped.next >= task.now);
    BOOST_TEST(skipped.next < task.now + 10s);
    const run_result next = run(task.s, skipped.next, skipped.next, skipped.next);
    BOOST_TEST_REQUIRE(next.told.has_value());
    BOOST_TEST(next.told->missed > 1000u);
    BOOST_TEST((next.next == skipped.next + 10s));
}

BOOST_AUTO_TEST_CASE(delay_and_fixed_delay_from_far_in_the_past_run_once_then_a_period_on)
{
    first_due_at_the_dawn_of_time rate(period_kind::fixed_rate,
                                       with_missed(missed_tick_policy::delay()));
    const run_result late = run(rate.s, rate.first, rate.now, rate.now + 1s);
    BOOST_TEST_REQUIRE(late.told.has_value());
    BOOST_TEST((late.told->lag() == manual_clock::duration::max())); // too long to count
    BOOST_TEST(late.told->missed > 1000u);
    BOOST_TEST((late.next == rate.now + 10s)); // a period after it started

    first_due_at_the_dawn_of_time delay(period_kind::fixed_delay);
    const run_result first = run(delay.s, delay.first, delay.now, delay.now + 1s);
    BOOST_TEST_REQUIRE(first.told.has_value());
    BOOST_TEST((first.next == delay.now + 11s)); // a period after it ended
}

BOOST_AUTO_TEST_CASE(due_times_saturate_at_never)
{
    const time_point last = time_point::max() - 1s;
    schedule s(period_kind::fixed_rate, 10s, {});
    BOOST_TEST_REQUIRE((s.first_due(last) == last));
    BOOST_TEST((run(s, last, last, last).next == time_point::max()));
}

#if defined(__linux__)
// Forked children draw seeds of their own for jitter, not the sequence their thread inherits
// (every child drew the same: a prefork server's workers beat in step).
BOOST_AUTO_TEST_CASE(forked_children_draw_jitter_seeds_of_their_own, *boost::unit_test::timeout(60))
{
    (void)sched::detail::next_jitter_seed(); // this thread's sequence has begun
    void* const shared = mmap(nullptr, 2 * sizeof(std::uint64_t), PROT_READ | PROT_WRITE,
                              MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    BOOST_TEST_REQUIRE(shared != MAP_FAILED);
    auto* const drawn = static_cast<std::uint64_t*>(shared);
    for (int child = 0; child < 2; ++child)
    {
        BOOST_TEST_REQUIRE(sched::test::in_child([&] {
            drawn[child] = sched::detail::next_jitter_seed();
            return 0;
        }));
    }
    const std::uint64_t parents = sched::detail::next_jitter_seed();
    BOOST_TEST(drawn[0] != drawn[1]);
    BOOST_TEST(drawn[0] != parents);
    BOOST_TEST(drawn[1] != parents);
    munmap(shared, 2 * sizeof(std::uint64_t));
}
#endif

BOOST_AUTO_TEST_SUITE_END()
