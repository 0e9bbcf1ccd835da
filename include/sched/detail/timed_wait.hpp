#ifndef SCHED_DETAIL_TIMED_WAIT_HPP
#define SCHED_DETAIL_TIMED_WAIT_HPP

#include <sched/detail/time.hpp>
#include <sched/detail/visibility.hpp>

#include <chrono>
#include <condition_variable>
#include <type_traits>

SCHED_VISIBILITY_BEGIN

namespace sched::detail {

// Waits on `cv` until notified or until `t` on any clock, or returns sooner (spuriously, as
// every condition wait may): the caller checks its condition, and calls again. Returns false
// once `t` has passed: after the wait on the steady or the system clock, else at the next call.
//
// The standard library waits on a clock other than the steady or the system clock by adding
// the time left to the steady clock's now in nanoseconds, which overflows for a time point
// further ahead than the steady clock can reach (292 years in nanoseconds; any time point on a
// coarser clock may be): the wait then ends at once, and a caller that waits again spins. Such a
// wait is made a day at a time here instead. A time point in a unit other than its clock's is
// rounded up to the clock's: the wait never ends before it.
template <class ConditionVariable, class Lock, class WaitClock, class Duration>
bool timed_wait(ConditionVariable& cv,
                Lock& lock,
                const std::chrono::time_point<WaitClock, Duration>& t)
{
    using steady = std::chrono::steady_clock;
    using clock_duration = typename WaitClock::duration;
    // In the clock's own unit, rounded up and saturating: a coarse or far time point would
    // overflow the standard library's conversions even on the steady or system clock.
    const typename WaitClock::time_point due(saturating_ceil<clock_duration>(t.time_since_epoch()));
    if constexpr (std::is_same_v<WaitClock, steady> ||
                  std::is_same_v<WaitClock, std::chrono::system_clock>)
        return cv.wait_until(lock, due) == std::cv_status::no_timeout;
    else
    {
        const clock_duration left = saturating_difference(due, WaitClock::now());
        if (left <= clock_duration::zero())
            return false;
        constexpr steady::duration day = std::chrono::hours(24);
        const steady::duration wait = saturating_ceil<steady::duration>(left);
        cv.wait_for(lock, wait < day ? wait : day);
        return true;
    }
}

} // namespace sched::detail

SCHED_VISIBILITY_END

#endif // SCHED_DETAIL_TIMED_WAIT_HPP
