#ifndef SCHED_MANUAL_CLOCK_HPP
#define SCHED_MANUAL_CLOCK_HPP

#include <sched/detail/clock_listener.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>

namespace sched {

/// A steady clock that moves only when told to: deterministic time for tests.
/**
 * Use it as the `Clock` parameter of sched's types (`basic_scheduled_thread_pool<manual_clock>`)
 * to test timeout and periodic code without sleeping: nothing becomes due until the test calls
 * advance(), and advance() wakes every queue waiting on this clock, so its due tasks run at once.
 *
 * Time is process-wide (now() is static, as std::chrono and Asio require of a clock) and starts
 * at the epoch.
 *
 * @par Thread safety
 * All functions may be called from any thread.
 */
class manual_clock
{
public:
    using rep = std::int64_t;
    using period = std::nano;
    using duration = std::chrono::duration<rep, period>;
    using time_point = std::chrono::time_point<manual_clock>;
    static constexpr bool is_steady = true;

    /// The current manual time.
    static time_point now() noexcept { return time_point(duration(ticks_.load())); }

    /// Moves time forward by @p d and wakes everything waiting on this clock.
    /**
     * Time saturates at time_point::max() rather than wrapping.
     * @throws std::invalid_argument if @p d is negative; time never goes back.
     */
    static void advance(duration d);

    /// Moves time forward to @p t (no-op if it is already there) and wakes waiters.
    /** @throws std::invalid_argument if @p t is earlier than now(). */
    static void advance_to(time_point t);

    /// Sets time back to the epoch, for a test fixture to start from a known time.
    /** Call it only while nothing schedules on this clock. */
    static void reset() noexcept;

    /// Registers @p listener to be told whenever time moves (used by sched's queues).
    static void add_listener(detail::clock_listener& listener);

    /// Unregisters @p listener; it is not called again once this returns.
    static void remove_listener(detail::clock_listener& listener) noexcept;

private:
    static void notify_listeners() noexcept;

    static inline std::atomic<rep> ticks_{0};
};

} // namespace sched

#endif // SCHED_MANUAL_CLOCK_HPP
