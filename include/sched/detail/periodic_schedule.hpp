#ifndef SCHED_DETAIL_PERIODIC_SCHEDULE_HPP
#define SCHED_DETAIL_PERIODIC_SCHEDULE_HPP

#include <sched/periodic_options.hpp>
#include <sched/tick.hpp>

#include <sched/detail/fork_generation.hpp>
#include <sched/detail/time.hpp>
#include <sched/detail/visibility.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <random>
#include <stdexcept>
#include <type_traits>
#include <utility>

SCHED_VISIBILITY_BEGIN

namespace sched::detail {

// One step of splitmix64 from `state`: states that differ by little (1, 2, 3...) give unrelated
// outputs.
inline std::uint64_t splitmix64(std::uint64_t& state) noexcept
{
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

// A seed for a task's jitter when its options name none: distinct per call, and cheap. Asking
// std::random_device for each task costs a system call, which a server that starts thousands of
// jittered heartbeats a second pays on every connection; so each thread asks it once and then
// steps a splitmix64 sequence from there. A forked child asks again: its thread's sequence is
// the forking thread's, and every child would step the same one.
inline std::uint64_t next_jitter_seed()
{
    struct sequence
    {
        std::uint64_t state = 0;
        std::uint32_t seeded_in = 0; // fork_generation() + 1 as it was seeded; 0: not yet
    };
    thread_local sequence s;
    if (const std::uint32_t now = fork_generation() + 1; s.seeded_in != now)
    {
        s.state = (std::uint64_t{std::random_device()()} << 32) ^ std::random_device()();
        s.seeded_in = now;
    }
    return splitmix64(s.state);
}

// The generator's seed for a seed the options name: mixed first, since the first offsets of
// minstd_rand follow its seed linearly (seeds 1, 2, 3 would give offsets close together, and
// connections seeded by their numbers would beat nearly in step).
inline std::uint64_t mixed_jitter_seed(std::uint64_t seed) noexcept
{
    return splitmix64(seed);
}

// A task's period in the ticks of its clock (`Duration`), rounded up (no run is due before its
// period has passed; a period below the clock's resolution is one tick, so it still moves
// forward), and Duration::max() ("never" again) if too long for the clock. Throws
// std::invalid_argument unless `period` is positive.
template <class Duration, class Rep, class Period>
Duration checked_period(std::chrono::duration<Rep, Period> period)
{
    if (!(period > std::chrono::duration<Rep, Period>::zero()))
        throw std::invalid_argument("sched: the period must be positive");
    return saturating_ceil<Duration>(period);
}

enum class period_kind : std::uint8_t
{
    one_shot,
    fixed_rate,  // on a grid: first + k·period, as the missed-tick policy keeps it
    fixed_delay, // next due = end of the previous run + period
};

// When a periodic task's runs are due, and what each run is told (its tick): the grid, the
// missed-tick policy, the jitter and the count of failures in a row. Used only by the task's
// runner, one run at a time.
//
// A run is planned at two moments: begin() as it starts (the missed-tick policy looks at how late
// it is) and next_due() as it ends. Each run sits on a point of the grid; jitter moves the run by
// an offset drawn for it, never the point, so the grid keeps its rate.
template <class Clock>
class periodic_schedule
{
public:
    using duration = typename Clock::duration;
    using time_point = typename Clock::time_point;
    using tick_type = basic_tick<Clock>;

    // `period` is positive; `slack` is how late its queue may start a run on purpose (see
    // basic_delayed_work_queue::deliberate_lateness()), which skip() forgives. Throws
    // std::invalid_argument for options that do not fit the task: a grid policy on a fixed delay,
    // or jitter larger than the period.
    periodic_schedule(period_kind kind,
                      duration period,
                      const periodic_options& options,
                      duration slack = duration::zero())
        : period_(period), slack_(slack), spread_(options.spread.spread_for(period)),
          failure_limit_(options.on_failure.max_consecutive_failures()),
          policy_(options.missed.value_or(kind == period_kind::fixed_rate
                                              ? missed_tick_policy::burst()
                                              : missed_tick_policy::delay())),
          kind_(kind)
    {
        if (kind == period_kind::fixed_delay && policy_ != missed_tick_policy::delay())
        {
            throw std::invalid_argument(
                "sched: a fixed delay has no grid to catch up on; its only missed-tick policy is "
                "delay()");
        }
        if (spread_ > duration::zero())
        {
            rng_.seed(static_cast<std::minstd_rand::result_type>(
                options.seed ? mixed_jitter_seed(*options.seed) : next_jitter_seed()));
        }
    }

    // The first run's due time, its point on the grid being `first`.
    time_point first_due(time_point first) noexcept
    {
        point_ = first;
        offset_ = draw();
        return due();
    }

    // As the run due at `due` starts at `now`: its tick, or nothing if the missed-tick policy
    // skips it (then next_due() says when the task is due instead). A run that happens whatever
    // the policy (a task handle's) passes `may_skip` false.
    std::optional<tick_type> begin(time_point due, time_point now, bool may_skip = true) noexcept
    {
        // Exact even for a first point centuries back (time_point::min(), say), where now - due
        // overflows the duration.
        const std::uint64_t late_periods = now > due ? span(due, now) / step() : 0;
        time_point scheduled = due;
        if (kind_ == period_kind::fixed_delay)
            missed_ += late_periods;
        else
        {
            switch (policy_.which())
            {
            case missed_tick_policy::kind::burst:
                // late_periods + 1 points are due: this run stands for the latest max_burst.
                if (policy_.max_burst() != 0 && late_periods >= policy_.max_burst())
                {
                    drop_points(late_periods + 1 - policy_.max_burst());
                    scheduled = this->due();
                }
                break;
            case missed_tick_policy::kind::skip:
            {
                if (late_periods == 0 || !may_skip)
                    break;
                // Late by no more than the slack, which a queue that woke for the run as late as
                // it may (with company due within the slack) adds on purpose: the run stands for
                // the latest point that has passed, so that a period shorter than the slack
                // neither skips every run nor catches up.
                const time_point forgiven = saturating_subtract(now, slack_);
                if (forgiven <= due || span(due, forgiven) / step() == 0)
                {
                    drop_points(late_periods);
                    scheduled = this->due();
                    break;
                }
                // This point and the later ones that have passed: up to the first not in the
                // past.
                const std::uint64_t behind = now > point_ ? span(point_, now) : 0;
                drop_points(std::max<std::uint64_t>(1, behind / step() + (behind % step() != 0)));
                offset_ = draw();
                skipped_ = true;
                return std::nullopt;
            }
            case missed_tick_policy::kind::delay:
                // The grid moves to this start: the next point is a period after it (and the
                // next run's own jitter moves that run, not this one's, which has passed). A run
                // that starts right when due moves it too, or its offset would be dropped from
                // the interval to the next start; one started early (by a task handle) does not.
                missed_ += late_periods;
                if (now >= due)
                    point_ = now;
                break;
            }
        }
        return tick_type{scheduled, now, index_++, std::exchange(missed_, 0)};
    }

    // When the task is next due, after the run that began last ended at `ended` (or was
    // skipped). Saturates at time_point::max().
    time_point next_due(time_point ended) noexcept
    {
        if (!std::exchange(skipped_, false))
        {
            point_ = kind_ == period_kind::fixed_delay ? saturating_add(ended, period_)
                                                       : advance(point_, 1);
            offset_ = draw();
        }
        return due();
    }

    // After a run that threw: whether the failure ends the task (its failure policy's limit of
    // failures in a row is reached).
    bool ends_with_failure() noexcept
    {
        return failure_limit_ != 0 && ++failures_ >= failure_limit_;
    }

    // After a run that did not throw.
    void succeeded() noexcept { failures_ = 0; }

    // When the run planned last (by first_due(), next_due() or a skip) is due: its point on the
    // grid moved by its jitter. time_point::max(): never.
    time_point due() const noexcept
    {
        if (point_ == time_point::max())
            return point_; // never
        // The offset is within ± the period, so its negation fits.
        return offset_ >= duration::zero() ? saturating_add(point_, offset_)
                                           : saturating_subtract(point_, -offset_);
    }

private:
    static_assert(std::is_integral_v<typename duration::rep> &&
                      std::is_signed_v<typename duration::rep> &&
                      sizeof(typename duration::rep) <= sizeof(std::uint64_t),
                  "the clock counts whole ticks in at most 64 signed bits");

    // The clock's ticks from `from` to `to` (not before it): exact in unsigned arithmetic, where
    // the signed difference may overflow.
    static std::uint64_t span(time_point from, time_point to) noexcept
    {
        return static_cast<std::uint64_t>(to.time_since_epoch().count()) -
               static_cast<std::uint64_t>(from.time_since_epoch().count());
    }

    std::uint64_t step() const noexcept { return static_cast<std::uint64_t>(period_.count()); }

    // `p` moved `ticks` ticks on, saturating at time_point::max().
    static time_point forward(time_point p, std::uint64_t ticks) noexcept
    {
        if (ticks > span(p, time_point::max()))
            return time_point::max();
        // Not past time_point::max(), so the unsigned sum converts back exactly.
        return time_point(duration(static_cast<typename duration::rep>(
            static_cast<std::uint64_t>(p.time_since_epoch().count()) + ticks)));
    }

    // Moves the planned run `dropped` points on, counting those it passes as missed.
    void drop_points(std::uint64_t dropped) noexcept
    {
        point_ = advance(point_, dropped);
        missed_ += dropped;
    }

    // `p` moved `periods` periods on, saturating at time_point::max().
    time_point advance(time_point p, std::uint64_t periods) const noexcept
    {
        if (periods > span(p, time_point::max()) / step())
            return time_point::max();
        return forward(p, periods * step());
    }

    duration draw() noexcept
    {
        if (spread_ <= duration::zero())
            return duration::zero();
        using rep = typename duration::rep;
        std::uniform_int_distribution<rep> offset(-spread_.count(), spread_.count());
        return duration(offset(rng_));
    }

    duration period_;
    duration slack_;
    duration spread_;
    std::size_t failure_limit_;
    missed_tick_policy policy_;
    period_kind kind_;
    bool skipped_ = false;
    time_point point_{};
    duration offset_{};
    std::uint64_t index_ = 0;
    std::uint64_t missed_ = 0;
    std::size_t failures_ = 0;
    std::minstd_rand rng_;
};

} // namespace sched::detail

SCHED_VISIBILITY_END

#endif // SCHED_DETAIL_PERIODIC_SCHEDULE_HPP
