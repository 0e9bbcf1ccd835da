#ifndef SCHED_POOL_OPTIONS_HPP
#define SCHED_POOL_OPTIONS_HPP

#include <sched/detail/visibility.hpp>

#include <chrono>
#include <cstddef>
#include <exception>
#include <functional>
#include <string>

SCHED_VISIBILITY_BEGIN

namespace sched {

/// What a pool does with a task scheduled after shutdown (Java's RejectedExecutionHandler).
/**
 * Whatever the policy, a caller that gets a future learns the task's fate: an exception, a
 * completed future, or a future that reports cancellation (execute(), which returns none, drops
 * a discarded task silently).
 */
enum class rejection_policy
{
    /// Throw sched::rejected_execution (code sched::error::shutdown); nothing is scheduled.
    abort,
    /// Run the task on the calling thread before the scheduling call returns, ignoring its delay;
    /// a periodic task runs once and then ends cancelled (or with its exception, if that run
    /// throws and its failure policy stops it). (Java's CallerRunsPolicy discards a
    /// task once the pool is shut down; this one runs it.) A task that the pool refuses while the
    /// calling thread runs one of its tasks so (a task that schedules itself again) is
    /// discarded, as with `discard`: run inside that run, it would recurse without end. Another
    /// pool's refused task still runs there. Its std::stop_token, if it takes one, is not told
    /// when the pool stops: the pool is already shut down, and (as in Java, whose shutdownNow()
    /// interrupts only the workers) the calling thread is not the pool's. The pool does not
    /// terminate before such a call returns (see basic_scheduled_thread_pool::is_terminated()).
    caller_runs,
    /// Do not run the task; the returned future reports it cancelled.
    discard,
    /// Java's DiscardOldestPolicy: once the pool is shut down there is no older task to make
    /// room for it, so the new task is discarded as with `discard`.
    discard_oldest,
};

/// Wraps every run of one task; it must call `run` exactly once. If it does not, the run fails
/// with std::logic_error (a second call throws it too, without running the task again). See
/// pool_options::decorate_task.
using task_wrapper = std::function<void(const std::function<void()>& run)>;

/// How a scheduled_thread_pool is built and behaves.
/**
 * The three policies keep Java's names. remove_on_cancel defaults to true, unlike Java, where a
 * cancelled task stays queued (holding its memory and whatever it captured) until it would have
 * been due.
 *
 * The hooks that run on the pool's threads must not throw: an exception escaping one calls
 * std::terminate. decorate_task runs on the scheduling thread instead; what it throws propagates
 * to the scheduling call, which then schedules nothing.
 */
struct pool_options
{
    /// Worker threads, at least 1.
    std::size_t threads = 1;

    /// Workers are named `thread_name-0`, `thread_name-1`, ... (cut to 15 characters on Linux).
    std::string thread_name = "sched";

    /// How much later than a task's due time a worker may wake for it, so that one wake-up runs
    /// every task that falls due meanwhile (timer coalescing: 10,000 heartbeats cost a third of
    /// the CPU at the default, see docs/periodic.md). A task never runs before it is due; it may
    /// start up to this much later (plus the scheduling delay any wake-up has). A task with no
    /// other due within the slack after it, when a worker goes to sleep for it, has nothing to
    /// share a wake-up with: the worker wakes for it on time. The default is
    /// the timer slack Linux gives a thread's timed waits (the workers turn the kernel's off in
    /// favour of this one); zero wakes on time. Negative: std::invalid_argument. The io_context
    /// timer that wakes for a scheduler's waits and bound ticks at the head of the queue takes
    /// the same slack.
    std::chrono::nanoseconds timer_slack = std::chrono::microseconds(50);

    /// How long before the next task is due the thread that waits for it stops sleeping and
    /// polls the clock instead, so that the task starts on time rather than a wake-up's delay
    /// late (tens of microseconds, more on a loaded or virtual machine). The cost is CPU: that
    /// thread is busy for up to this long before each wake-up, and all the time while tasks fall
    /// due less than this apart. For a scheduler's waits and bound ticks, the io_context's thread
    /// that wakes for them polls, between its other handlers: its polling is a handler that is
    /// always ready, so io_context::poll() returns only once no such head is due within the spin.
    /// Zero, the default, sleeps; with a spin, timer_slack is not used. Negative:
    /// std::invalid_argument.
    std::chrono::nanoseconds spin_before_due = std::chrono::nanoseconds::zero();

    /// Tasks due at least this far ahead wait in heaps of their own, one per group of scheduling
    /// threads (delayed_work_queue's far tier), so that threads arming and cancelling timeouts
    /// at once do not contend for one lock; a worker moves them to the shared queue half of this
    /// or more before they are due (one wake-up for all that fall due in the next horizon). Tasks
    /// still run in due order; two due at the same time and scheduled from different threads, both
    /// this far ahead, run in either order. Zero: one queue for all. Negative:
    /// std::invalid_argument. Tasks that an io_context waits for (a scheduler's waits and bound
    /// ticks) always use the shared queue.
    std::chrono::nanoseconds far_tier_horizon = std::chrono::milliseconds(50);

    /// Whether periodic tasks keep running after shutdown() (Java's default: false).
    bool continue_existing_periodic_tasks_after_shutdown = false;

    /// Whether queued one-shot tasks still run after shutdown() (Java's default: true). False
    /// drops every one that has not begun, due or not, execute()'s too: one a worker took just
    /// before the shutdown is cancelled instead of run, as in Java 8 (from Java 9, one already
    /// due still runs).
    bool execute_existing_delayed_tasks_after_shutdown = true;

    /// Whether a cancelled task leaves the queue at once (true) or when it would have been due
    /// (false, Java's default). Once the pool is shut down, cancelled tasks always leave at once,
    /// since they would only delay termination.
    bool remove_on_cancel = true;

    /// What happens to tasks scheduled after shutdown.
    rejection_policy rejection = rejection_policy::abort;

    /// Runs first on each new worker, given its index: set affinity or priority here.
    std::function<void(std::size_t worker)> on_thread_start;

    /// Runs last on each worker before it exits.
    std::function<void(std::size_t worker)> on_thread_stop;

    /// Sees every exception that a task, a periodic run or an executor function throws on the
    /// pool's threads, on that thread, before after_execute; it must not throw. Empty: the
    /// exceptions that no future or completion handler carries (a periodic task's failures that
    /// its failure_policy lets it survive, execute()'s tasks, executor functions, and the failure
    /// that ends a task whose futures were all dropped, std::bad_alloc for a periodic task that
    /// cannot go back in the queue included) are written to std::cerr, one line each, so that no
    /// failure is silent.
    std::function<void(std::exception_ptr)> error_sink;

    /// Runs on the worker before each run of a task (Java's beforeExecute); for a scheduler's
    /// wait, and a tick bound to its io_context, on the io_context's thread that takes it (see
    /// basic_scheduler). A task cancelled while this hook runs does not run, nor does one that a
    /// shutdown meanwhile ends (as Java asks canRunInCurrentRunState after beforeExecute); it
    /// ends cancelled, and after_execute still runs. For a periodic operation's tick bound to
    /// an executor, the two hooks bracket its hand-off: before_execute as it is posted, and
    /// after_execute where it was to run; one that does not run there (its missed_tick_policy
    /// skips it, it was cancelled on its way, or a shutdown ended it) still gets both, the
    /// second with null, unless the pool has been destroyed by then.
    std::function<void()> before_execute;

    /// Runs on the worker after each run of a task, with what the run threw, or null (Java's
    /// afterExecute); for a scheduler's wait, on the io_context's thread that takes it.
    std::function<void(std::exception_ptr)> after_execute;

    /// Runs on the scheduling thread for every new task (in the spirit of Java's decorateTask);
    /// the wrapper it returns, if not empty, wraps every run of that task. Use it to carry
    /// context (a trace id, a logging context) from where a task is scheduled to where it runs.
    /// A scheduler's async_schedule() work and periodic ticks are such tasks (a tick bound to an
    /// executor runs there inside the wrapper; the hook runs as the operation is initiated, and
    /// what it throws leaves the initiating function, which starts nothing); its waits, which
    /// run nothing on the pool, are not.
    std::function<task_wrapper()> decorate_task;
};

} // namespace sched

SCHED_VISIBILITY_END

#endif // SCHED_POOL_OPTIONS_HPP
