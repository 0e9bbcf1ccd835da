#ifndef SCHED_TICK_HPP
#define SCHED_TICK_HPP

#include <sched/detail/time.hpp>
#include <sched/detail/visibility.hpp>

#include <chrono>
#include <cstdint>

SCHED_VISIBILITY_BEGIN

namespace sched {

/// What one run of a periodic task knows about itself. A periodic callable that takes a
/// `const sched::tick&` is given one on every run (on the pool and the scheduler, it may take a
/// std::stop_token after it).
/**
 * Jitter included, `scheduled` is when this run was due; `started - scheduled` is how late it
 * started. `missed` counts the points of the task's schedule that passed without a run since the
 * previous run (or since it was scheduled): what its missed_tick_policy dropped or skipped. It is
 * always 0 under missed_tick_policy::burst() with no cap, where every point gets its run.
 *
 * @tparam Clock The clock of the pool or timer that runs the task.
 */
template <class Clock = std::chrono::steady_clock>
struct basic_tick
{
    using clock_type = Clock;
    using duration = typename Clock::duration;
    using time_point = typename Clock::time_point;

    /// When this run was due.
    time_point scheduled;
    /// When this run started: the clock read as the run left the queue, before the pool's
    /// before_execute hook (for a tick bound to an executor, as it began there). The
    /// missed-tick policy decides on that reading too.
    time_point started;
    /// How many runs of this task came before this one (0 for the first).
    std::uint64_t index = 0;
    /// How many runs were missed since the previous run (see missed_tick_policy).
    std::uint64_t missed = 0;

    /// How late this run started: `started - scheduled`, never negative, and duration::max()
    /// if that is too long for the duration (a task first due at time_point::min()).
    duration lag() const noexcept
    {
        return started > scheduled ? detail::saturating_difference(started, scheduled)
                                   : duration::zero();
    }
};

/// The tick of a task on std::chrono::steady_clock.
using tick = basic_tick<>;

} // namespace sched

SCHED_VISIBILITY_END

#endif // SCHED_TICK_HPP
