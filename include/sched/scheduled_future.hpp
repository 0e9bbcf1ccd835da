#ifndef SCHED_SCHEDULED_FUTURE_HPP
#define SCHED_SCHEDULED_FUTURE_HPP

#include <sched/error.hpp>
#include <sched/future_state.hpp>

#include <sched/detail/clock_listener.hpp>
#include <sched/detail/task.hpp>
#include <sched/detail/time.hpp>
#include <sched/detail/visibility.hpp>

#include <boost/smart_ptr/intrusive_ptr.hpp>

#include <chrono>
#include <exception>
#include <future>
#include <type_traits>

SCHED_VISIBILITY_BEGIN

namespace sched {

template <class Clock>
class basic_scheduled_thread_pool;

/// The result of a scheduled task, and the handle that cancels it: Java's ScheduledFuture.
/**
 * Copies share one task, like Java's Future or std::shared_future. Dropping every copy does not
 * cancel the task.
 *
 * A default-constructed future has no task: every member but valid() then throws
 * std::future_error with std::future_errc::no_state.
 *
 * @tparam R What the task returns: void or an object type.
 * @tparam Clock The clock of the pool that runs the task; delay() reads it.
 *
 * @par Thread safety
 * Distinct objects: Safe. Shared objects: Safe for the const members and cancel(); copying or
 * assigning one object while another thread uses it is not.
 */
template <class R, class Clock = std::chrono::steady_clock>
class basic_scheduled_future
{
    static_assert(std::is_void_v<R> || (std::is_object_v<R> && !std::is_array_v<R>),
                  "a scheduled task returns void or an object type, not a reference or array");

public:
    using value_type = R;
    using clock_type = Clock;
    using duration = typename Clock::duration;
    using time_point = typename Clock::time_point;

    /// A future without a task.
    basic_scheduled_future() noexcept = default;

    /// Whether this future refers to a task.
    bool valid() const noexcept { return task_ != nullptr; }

    /// Waits for the task to complete, then gives its value.
    /**
     * @returns The value (nothing for void), which lives as long as any copy of this future.
     * @throws The task's own exception, unchanged, if it threw.
     * @throws sched::cancelled_error if it was cancelled (a periodic task ends no other way,
     * unless it throws, or there is no memory to queue its next run: std::bad_alloc).
     */
    std::add_lvalue_reference_t<std::add_const_t<R>> get() const
    {
        const auto& t = checked();
        t.wait();
        switch (t.state())
        {
        case future_state::normal:
            if constexpr (std::is_void_v<R>)
                return;
            else
                return t.value();
        case future_state::exceptional:
            std::rethrow_exception(t.error());
        default:
            throw cancelled_error();
        }
    }

    /// Blocks until the task has completed (normally, exceptionally or by cancellation).
    void wait() const { checked().wait(); }

    /// Blocks until the task completes or @p timeout of real time passes (a NaN is rejected
    /// with std::invalid_argument).
    template <class Rep, class Period>
    std::future_status wait_for(const std::chrono::duration<Rep, Period>& timeout) const
    {
        using steady = std::chrono::steady_clock;
        return wait_until(detail::due_after<steady>(timeout));
    }

    /// Blocks until the task completes or @p deadline on a real clock passes (a NaN is rejected
    /// with std::invalid_argument). A deadline on the manual clock does not compile: nothing
    /// would wake the wait as that clock moves.
    template <detail::real_time_clock WaitClock, class WaitDuration>
    std::future_status
    wait_until(const std::chrono::time_point<WaitClock, WaitDuration>& deadline) const
    {
        const auto& t = checked();
        detail::check_not_nan(deadline.time_since_epoch());
        if (deadline == std::chrono::time_point<WaitClock, WaitDuration>::max())
        {
            t.wait();
            return std::future_status::ready;
        }
        return t.wait_until(deadline) ? std::future_status::ready : std::future_status::timeout;
    }

    /// Cancels the task unless it has already completed.
    /**
     * A queued task will not run; with the pool's remove_on_cancel policy (the default) it
     * leaves the queue at once and frees what its callable holds. A running task finishes its
     * run, but its result is discarded and a periodic task does not run again (a run that a
     * worker had already taken, one-shot or periodic, may still begin just after this returns,
     * as in Java; none begins after that one). With
     * @p may_interrupt_if_running, a running task that takes a std::stop_token sees stop
     * requested (interruption is cooperative).
     *
     * The callable that the cancel frees may own what holds this future: the future is not
     * touched once the cancel has begun, so the call may destroy it.
     *
     * @returns true if this call cancelled the task; false if it had already completed or been
     * cancelled, in which case nothing changes.
     */
    bool cancel(bool may_interrupt_if_running = false)
    {
        return checked().cancel(may_interrupt_if_running, true);
    }

    /// Whether the task has completed in any way (normally, exceptionally or by cancellation).
    bool is_done() const { return checked().is_done(); }

    /// Whether the task was cancelled before it completed normally.
    bool is_cancelled() const { return checked().is_cancelled(); }

    /// Whether the task runs periodically.
    bool is_periodic() const { return checked().is_periodic(); }

    /// Time left until the task is (next) due on the pool's clock; negative once overdue
    /// (saturating at duration::min() for a task due at time_point::min()). While the task is
    /// queued, it reads the due time under the lock of its pool's queue.
    duration delay() const
    {
        return detail::saturating_difference(checked().due_time(), Clock::now());
    }

    /// Where the task is in its life.
    future_state state() const { return checked().state(); }

private:
    friend class basic_scheduled_thread_pool<Clock>;

    using task_type = detail::result_task<R, Clock>;

    explicit basic_scheduled_future(task_type* adopted) noexcept : task_(adopted, false) {}

    task_type& checked() const
    {
        if (!task_)
            throw std::future_error(std::future_errc::no_state);
        return *task_;
    }

    boost::intrusive_ptr<task_type> task_;
};

/// A future of a task on a std::chrono::steady_clock pool.
template <class R>
using scheduled_future = basic_scheduled_future<R, std::chrono::steady_clock>;

} // namespace sched

SCHED_VISIBILITY_END

#endif // SCHED_SCHEDULED_FUTURE_HPP
