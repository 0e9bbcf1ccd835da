#ifndef SCHED_PERIODIC_OPTIONS_HPP
#define SCHED_PERIODIC_OPTIONS_HPP

#include <sched/detail/time.hpp>
#include <sched/detail/visibility.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>

SCHED_VISIBILITY_BEGIN

namespace sched {

/// What a periodic task on a fixed-rate grid does about runs it could not make on time, because a
/// run was slow or its threads were busy. The grid's points are first + k·period.
/**
 * A run is late by k periods when it starts k whole periods after it was due; the k points after
 * its own are then due too. docs/periodic.md draws each policy.
 */
class missed_tick_policy
{
public:
    enum class kind : unsigned char
    {
        burst,
        skip,
        delay,
    };

    /// Every point gets its run: late runs follow one another at once until the task is back on
    /// its grid (Java's scheduleAtFixedRate; the default of the fixed-rate calls).
    static constexpr missed_tick_policy burst() noexcept { return {kind::burst, 0}; }

    /// As burst(), but at most @p max_runs runs in a row catch up: a run late by k periods, with
    /// k + 1 points due, stands for the latest @p max_runs of them; the older ones are dropped
    /// and counted in tick::missed.
    /** @throws std::invalid_argument if @p max_runs is 0. */
    static missed_tick_policy burst(std::size_t max_runs)
    {
        if (max_runs == 0)
            throw std::invalid_argument("sched: a burst cap must be at least 1");
        return {kind::burst, max_runs};
    }

    /// A run late by a whole period or more does not happen: the task waits for the first point
    /// of its grid that has not passed, and the next run's tick::missed counts the points
    /// skipped. A run late by less than a period runs. On a pool that does not spin
    /// (pool_options::spin_before_due), a run late by a period or more, but by less than that
    /// beyond the pool's timer_slack (which the pool may add on purpose), runs all the same,
    /// standing for the latest point that has passed (the others count as missed): a period
    /// shorter than the slack would otherwise skip every run.
    static constexpr missed_tick_policy skip() noexcept { return {kind::skip, 0}; }

    /// Each run moves the grid to its start (one started before it was due does not): the next
    /// run is due a period after this one started, and its tick::missed counts the whole periods
    /// it was late (java.util.Timer's schedule with a period; the only policy of a fixed-delay
    /// task). With jitter, each start carries its own offset into the grid: intervals stay
    /// within the period ± the spread, but the task's phase wanders (burst() and skip() keep
    /// it).
    static constexpr missed_tick_policy delay() noexcept { return {kind::delay, 0}; }

    /// Which policy this is.
    constexpr kind which() const noexcept { return kind_; }

    /// For burst: the most runs in a row that catch up; 0 for no cap.
    constexpr std::size_t max_burst() const noexcept { return max_burst_; }

    friend constexpr bool operator==(const missed_tick_policy&,
                                     const missed_tick_policy&) noexcept = default;

private:
    constexpr missed_tick_policy(kind k, std::size_t max_burst) noexcept
        : kind_(k), max_burst_(max_burst)
    {}

    kind kind_;
    std::size_t max_burst_;
};

/// What a periodic task does when a run throws. Whatever it does, the failure is reported: the
/// pool's error_sink (or the timer's error handler) sees every exception.
class failure_policy
{
public:
    /// The first failure ends the task: its future's get(), or its completion handler, gets the
    /// exception (Java's behaviour; the default).
    static constexpr failure_policy stop() noexcept { return failure_policy(1); }

    /// Failures do not end the task; each goes to the error sink only.
    static constexpr failure_policy keep_running() noexcept { return failure_policy(0); }

    /// The task ends with the @p failures-th failure in a row, as stop() does; a run that
    /// succeeds starts the count again. Earlier failures go to the error sink only.
    /** @throws std::invalid_argument if @p failures is 0. */
    static failure_policy stop_after(std::size_t failures)
    {
        if (failures == 0)
            throw std::invalid_argument("sched: stop_after needs at least one failure");
        return failure_policy(failures);
    }

    /// How many failures in a row end the task; 0 for never.
    constexpr std::size_t max_consecutive_failures() const noexcept { return limit_; }

    friend constexpr bool operator==(const failure_policy&,
                                     const failure_policy&) noexcept = default;

private:
    explicit constexpr failure_policy(std::size_t limit) noexcept : limit_(limit) {}

    std::size_t limit_;
};

/// A random offset for each run of a periodic task, uniform in [-spread, +spread] around its
/// point on the grid, so that many tasks with one period (heartbeats of 10,000 connections) do
/// not run in lock-step. The grid itself does not move, so a fixed rate keeps its average rate
/// (unless missed_tick_policy::delay() moves the grid to each run's start, jitter included).
class jitter
{
public:
    /// No offset (the default).
    constexpr jitter() noexcept = default;

    /// Offsets of up to ± @p spread.
    /** @throws std::invalid_argument if @p spread is negative or NaN. (A spread larger than the
     *  period is refused when the task is scheduled.) */
    template <class Rep, class Period>
    static jitter uniform(std::chrono::duration<Rep, Period> spread)
    {
        if (!(spread >= spread.zero()))
            throw std::invalid_argument("sched: a jitter spread must not be negative");
        jitter j;
        j.spread_ = detail::saturating_cast<std::chrono::nanoseconds>(spread);
        return j;
    }

    /// Offsets of up to ± @p fraction of the period.
    /** @throws std::invalid_argument unless 0 ≤ @p fraction ≤ 1. */
    static jitter fraction_of_period(double fraction)
    {
        if (!(fraction >= 0.0 && fraction <= 1.0))
            throw std::invalid_argument("sched: a jitter fraction must be between 0 and 1");
        jitter j;
        j.fraction_ = fraction;
        return j;
    }

    /// The spread for a task with @p period.
    /** @throws std::invalid_argument if it is larger than the period. */
    template <class Rep, class Period>
    std::chrono::duration<Rep, Period> spread_for(std::chrono::duration<Rep, Period> period) const
    {
        using duration = std::chrono::duration<Rep, Period>;
        if (fraction_)
        {
            return std::chrono::duration_cast<duration>(
                std::chrono::duration<long double, Period>(period) * *fraction_);
        }
        // Compared in floating seconds: either duration may overflow the other's type.
        using seconds = std::chrono::duration<long double>;
        if (seconds(spread_) > seconds(period))
            throw std::invalid_argument("sched: jitter larger than the period");
        return detail::saturating_cast<duration>(spread_);
    }

private:
    std::chrono::nanoseconds spread_{};
    std::optional<double> fraction_;
};

/// How a periodic task behaves beyond its period: pass it to schedule_at_fixed_rate,
/// schedule_with_fixed_delay, the scheduler's periodic operations or the timer's periodic calls.
/**
 * @code
 * pool.schedule_at_fixed_rate(1s, 1s, heartbeat,
 *                             {.missed = sched::missed_tick_policy::skip(),
 *                              .on_failure = sched::failure_policy::stop_after(3),
 *                              .spread = sched::jitter::fraction_of_period(0.1)});
 * @endcode
 */
struct periodic_options
{
    /// Empty: the call's own behaviour, Java's (burst for a fixed rate, delay for a fixed delay
    /// and for java.util.Timer's schedule). A fixed-delay call accepts only delay(): it has no
    /// grid to catch up on (std::invalid_argument otherwise).
    std::optional<missed_tick_policy> missed{};

    /// What a run that throws does to the task.
    failure_policy on_failure = failure_policy::stop();

    /// A random offset for each run, the first included.
    jitter spread{};

    /// Seeds the jitter's generator, for runs that repeat exactly (tests); empty: every task
    /// draws a seed of its own.
    std::optional<std::uint64_t> seed{};
};

} // namespace sched

SCHED_VISIBILITY_END

#endif // SCHED_PERIODIC_OPTIONS_HPP
