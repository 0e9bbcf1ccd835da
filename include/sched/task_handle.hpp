#ifndef SCHED_TASK_HANDLE_HPP
#define SCHED_TASK_HANDLE_HPP

#include <sched/detail/task.hpp>
#include <sched/detail/visibility.hpp>

#include <boost/smart_ptr/intrusive_ptr.hpp>

#include <chrono>
#include <exception>
#include <future>
#include <stop_token>

SCHED_VISIBILITY_BEGIN

namespace sched {

template <class Clock>
class basic_scheduled_thread_pool;

/// A task that a pool handed back without running it (from shutdown_now()).
/**
 * The handle decides the task's fate: run() runs it on the calling thread; cancel(), or dropping
 * the handle, cancels it. Either way the task's future learns the outcome, so no task is lost
 * silently.
 *
 * @par Thread safety
 * Distinct objects: Safe. Shared objects: Unsafe.
 */
template <class Clock = std::chrono::steady_clock>
class basic_task_handle
{
public:
    using clock_type = Clock;
    using time_point = typename Clock::time_point;

    /// A handle without a task.
    basic_task_handle() noexcept = default;

    basic_task_handle(basic_task_handle&&) noexcept = default;

    /// Cancels the task this handle held, then takes over @p other's.
    basic_task_handle& operator=(basic_task_handle&& other) noexcept
    {
        if (this != &other)
        {
            cancel();
            task_ = std::move(other.task_);
        }
        return *this;
    }

    /// Cancels the task if it was neither run nor cancelled.
    ~basic_task_handle() { cancel(); }

    /// Whether the handle holds a task.
    bool valid() const noexcept { return task_ != nullptr; }
    explicit operator bool() const noexcept { return valid(); }

    /// Whether the task was periodic.
    bool is_periodic() const { return checked().is_periodic(); }

    /// When the task was due.
    time_point due_time() const { return checked().due_time(); }

    /// Runs the task now, on this thread, and empties the handle.
    /**
     * A one-shot task completes its future with its value or exception. A periodic task runs
     * once and then ends cancelled, since nothing will run it again, or with its exception if
     * the run throws and its failure_policy ends it there. A task already cancelled
     * through its future does not run. The pool's before_execute and after_execute hooks and its
     * error_sink are not called: the task has left its pool.
     *
     * @returns What the run threw, or null. For a task that no future carries (one of execute(),
     *          a task whose futures are gone) and for the run of a periodic task whose
     *          failure_policy survives it (its future then reports cancellation), this is the
     *          only report of it.
     * @throws std::future_error (no_state) if the handle is empty.
     */
    std::exception_ptr run()
    {
        checked();
        boost::intrusive_ptr<detail::task<Clock>> t = std::move(task_);
        std::exception_ptr error;
        if (t->state() == future_state::pending)
        {
            error = t->run(std::stop_token{}).error; // a one-shot task's future gets it too
            if (t->is_periodic())
                t->cancel(false);
        }
        t->release_body();
        return error;
    }

    /// Cancels the task without running it and empties the handle.
    /** @returns true if this cancelled it; false if the handle was empty or the task done. */
    bool cancel() noexcept
    {
        if (!task_)
            return false;
        boost::intrusive_ptr<detail::task<Clock>> t = std::move(task_);
        const bool cancelled = t->cancel(false);
        t->release_body();
        return cancelled;
    }

private:
    friend class basic_scheduled_thread_pool<Clock>;

    // Takes over the runner's reference to a task that is not queued.
    explicit basic_task_handle(detail::task<Clock>* adopted) noexcept : task_(adopted, false) {}

    detail::task<Clock>& checked() const
    {
        if (!task_)
            throw std::future_error(std::future_errc::no_state);
        return *task_;
    }

    boost::intrusive_ptr<detail::task<Clock>> task_; // the runner's reference
};

/// A handed-back task of a std::chrono::steady_clock pool.
using task_handle = basic_task_handle<>;

} // namespace sched

SCHED_VISIBILITY_END

#endif // SCHED_TASK_HANDLE_HPP
