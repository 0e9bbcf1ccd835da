#ifndef SCHED_TIMER_TASK_HPP
#define SCHED_TIMER_TASK_HPP

#include <sched/tick.hpp>
#include <sched/timer_task_state.hpp>

#include <sched/detail/empty_callable.hpp>
#include <sched/detail/timer_node.hpp>
#include <sched/detail/visibility.hpp>

#include <chrono>
#include <concepts>
#include <memory>
#include <type_traits>
#include <utility>

SCHED_VISIBILITY_BEGIN

namespace sched {

template <class Clock>
class basic_timer;

/// A task for a sched::basic_timer: java.util.TimerTask around a callable. Copies share one
/// task, as Java references do, and a move copies (no object is ever left without its task). A
/// task can be scheduled once: scheduling it again, or after cancel(), throws
/// sched::task_already_scheduled.
/**
 * The callable is destroyed once the task will not run again (a one-shot task ran, a periodic one
 * ended, a cancelled task left its timer's queue, or a task was cancelled before it was
 * scheduled), on the thread where that happened, even while copies of the task remain: a callable
 * may hold a copy of its own task, to cancel it. Such a task keeps itself alive until then, so
 * one that will not be scheduled after all (say, its schedule call threw) must be cancelled, or
 * its callable is never destroyed.
 *
 * @par Thread safety
 * Distinct objects: Safe. Shared objects: cancel(), state() and scheduled_execution_time() may be
 * called from any thread, including from inside the task; assigning to an object is not safe
 * while another thread uses that same object (copies are distinct objects).
 */
template <class Clock = std::chrono::steady_clock>
class basic_timer_task
{
public:
    using clock_type = Clock;
    using time_point = typename Clock::time_point;

    /// A task that runs @p f on the timer's thread: a callable taking no arguments, or a
    /// `const sched::basic_tick<Clock>&` (when the run was due, when it started, its index and
    /// the runs missed before it).
    /** @throws std::invalid_argument if @p f is empty (a null function pointer, an empty
     *  std::function). */
    template <class F>
    requires(std::invocable<std::decay_t<F>&> ||
             std::invocable<std::decay_t<F>&, const basic_tick<Clock>&>) &&
        (!std::same_as<std::remove_cvref_t<F>, basic_timer_task>)explicit basic_timer_task(F&& f)
    {
        detail::check_not_empty(f);
        node_ =
            std::make_shared<detail::timer_node_for<Clock, std::decay_t<F>>>(std::forward<F>(f));
    }

    basic_timer_task(const basic_timer_task&) = default;
    basic_timer_task& operator=(const basic_timer_task&) = default;

    /// Cancels the task (java.util.TimerTask.cancel()): it will not run again. A run under way
    /// finishes. The task stays in its timer's queue (with what its callable holds) until it
    /// falls due, when it is dropped unrun, or basic_timer::purge() removes it, as in Java.
    /** @returns true if this prevented a run: a one-shot task that had not run, or a periodic
     *  task that had not ended; false if it had not been scheduled, had run once or ended, or
     *  was already cancelled. */
    bool cancel() noexcept { return node_->cancel(); }

    /// Where the task is in its life.
    timer_task_state state() const noexcept { return node_->state(); }

    /// The time the most recent run was due (during a run: this run's), as
    /// java.util.TimerTask.scheduledExecutionTime() (except that for a fixed-delay task Java
    /// gives the time the run started); `time_point::min()` before the first run. A run
    /// compares it with the clock to see how late it is.
    time_point scheduled_execution_time() const noexcept
    {
        return node_->scheduled_execution_time();
    }

private:
    friend class basic_timer<Clock>;

    std::shared_ptr<detail::timer_node<Clock>> node_;
};

/// The task type of sched::timer.
using timer_task = basic_timer_task<>;

} // namespace sched

SCHED_VISIBILITY_END

#endif // SCHED_TIMER_TASK_HPP
