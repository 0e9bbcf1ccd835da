#ifndef SCHED_MANUAL_CLOCK_HPP
#define SCHED_MANUAL_CLOCK_HPP

#include <sched/detail/clock_listener.hpp>
#include <sched/detail/time.hpp>
#include <sched/detail/visibility.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <stdexcept>

SCHED_VISIBILITY_BEGIN

namespace sched {

/// A steady clock that moves only when told to: deterministic time for tests.
/**
 * Use it as the `Clock` parameter of sched's types (`basic_scheduled_thread_pool<manual_clock>`)
 * to test timeout and periodic code without sleeping: nothing becomes due until the test calls
 * advance(), and advance() wakes every queue waiting on this clock, so its due tasks run at once.
 * (A future's wait_until() takes no deadline on this clock: it would wait in real time.)
 *
 * Time is process-wide (now() is static, as std::chrono and Asio require of a clock) and starts
 * at the epoch. A forked child's advance() wakes only the queues made in the child: a queue made
 * before the fork is not woken there (its lock may have been held by a thread of the parent).
 *
 * @par Thread safety
 * All functions may be called from any thread, but not from under the lock of a queue on this
 * clock (in a callback it calls with its lock held): advance() wakes that queue, which takes its
 * lock.
 */
class manual_clock
{
public:
    using rep = std::int64_t;
    using period = std::nano;
    using duration = std::chrono::duration<rep, period>;
    using time_point = std::chrono::time_point<manual_clock>;
    static constexpr bool is_steady = true;

    /// The latest time the clock reaches: one nanosecond short of time_point::max(), which
    /// sched's queues take as "never", so that work due now still runs at the end of time.
    static constexpr time_point end_of_time() noexcept { return time_point::max() - duration(1); }

    /// The current manual time.
    static time_point now() noexcept { return time_point(duration(ticks_.load())); }

    /// Moves time forward by @p d, in any unit (a fraction of a nanosecond counts as one), and
    /// wakes everything waiting on this clock.
    /**
     * Time saturates at end_of_time() rather than wrapping, whatever @p d's unit.
     * @throws std::invalid_argument if @p d is negative or NaN; time never goes back.
     */
    template <class Rep, class Period>
    static void advance(std::chrono::duration<Rep, Period> d)
    {
        detail::check_not_nan(d);
        if (d < d.zero())
            throw std::invalid_argument("manual_clock::advance: negative duration");
        add(detail::saturating_ceil<duration>(d));
    }

    /// Moves time forward to @p t, in any unit (rounded up to a nanosecond, and saturating at
    /// end_of_time()), and wakes waiters; at now(), time stays.
    /** @throws std::invalid_argument if @p t is earlier than now(), or NaN. */
    template <class Duration>
    static void advance_to(std::chrono::time_point<manual_clock, Duration> t)
    {
        detail::check_not_nan(t.time_since_epoch());
        move_to(time_point(detail::saturating_ceil<duration>(t.time_since_epoch())));
    }

    /// Sets time back to the epoch, for a test fixture to start from a known time.
    /** Call it only while nothing schedules on this clock. */
    static void reset() noexcept;

    /// Registers @p listener to be told whenever time moves (used by sched's queues).
    static void add_listener(detail::clock_listener& listener);

    /// Unregisters @p listener; it is not called again once this returns.
    static void remove_listener(detail::clock_listener& listener) noexcept;

private:
    static void add(duration d);       // d is not negative
    static void move_to(time_point t); // throws if t is past
    static void notify_listeners() noexcept;

    static inline std::atomic<rep> ticks_{0};
};

} // namespace sched

SCHED_VISIBILITY_END

#endif // SCHED_MANUAL_CLOCK_HPP
