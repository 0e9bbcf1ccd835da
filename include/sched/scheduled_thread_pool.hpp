#ifndef SCHED_SCHEDULED_THREAD_POOL_HPP
#define SCHED_SCHEDULED_THREAD_POOL_HPP

#include <sched/delayed_work_queue.hpp>
#include <sched/periodic_options.hpp>
#include <sched/pool_options.hpp>
#include <sched/scheduled_future.hpp>
#include <sched/task_handle.hpp>
#include <sched/tick.hpp>

#include <sched/detail/task.hpp>
#include <sched/detail/task_impl.hpp>
#include <sched/detail/thread_scope.hpp>
#include <sched/detail/time.hpp>
#include <sched/detail/visibility.hpp>

#include <boost/asio/execution_context.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <stop_token>
#include <thread>
#include <vector>

SCHED_VISIBILITY_BEGIN

namespace sched {
namespace detail {
struct pool_access;

// The pool whose worker this thread is, if any. (A function's local: as a thread_local static
// member of the pool, an extern template, it was reached through a null TLS init function in
// GCC's optimised builds.)
inline const void*& this_thread_pool() noexcept
{
    thread_local const void* pool = nullptr;
    return pool;
}
} // namespace detail

template <class Clock, class Allocator, unsigned int Bits>
class basic_pool_executor;

/// Worker threads running one-shot and periodic tasks when they are due: Java's
/// ScheduledThreadPoolExecutor.
/**
 * Tasks wait in a basic_delayed_work_queue; the workers take them as they become due, waking
 * up to pool_options::timer_slack after the due time (50 µs by default, so that one wake-up
 * takes every task due meanwhile; on time for a task with none due within the slack after it;
 * zero wakes on time), or, with pool_options::spin_before_due,
 * waking that long before and polling the clock until it is due. On Linux each worker sets the
 * kernel's own timer slack to 1 ns, so that a sleep ends when the pool asks. A task is any
 * callable taking no arguments, or a std::stop_token (which is then told when the task is
 * cancelled with interruption or, if a worker runs it, the pool stops). Scheduling returns a
 * basic_scheduled_future for the task's result and for cancelling it.
 *
 * A task's exception goes to its future (and to the error_sink and after_execute hooks), never
 * out of a worker: workers do not die. A periodic task never runs concurrently with itself; by
 * default an exception ends it and its future's get() rethrows it (see periodic_options for
 * what else it may do, and for its missed-tick policy and jitter). A periodic callable may take
 * a `const sched::basic_tick<Clock>&` first: when the run was due, when it started, its index
 * and the runs missed before it.
 *
 * Bad input: a zero or negative period, an empty callable (a null function pointer or empty
 * std::function), a jitter larger than the period, or a burst or skip policy on a fixed delay
 * throws std::invalid_argument, scheduling nothing.
 * A negative delay means "now". Delays and periods too large for the clock saturate: a task due
 * at time_point::max() never runs.
 *
 * The pool is a Boost.Asio execution context too: get_executor() returns an executor that
 * boost::asio::post, dispatch, defer, co_spawn, strands and any_io_executor accept. Its functions
 * run on the workers as tasks due now; unlike tasks, they still run after shutdown() (see
 * basic_pool_executor).
 *
 * Destroying the pool is shutdown_now(), dropping the handed-back tasks (their futures report
 * cancellation; executor functions are destroyed unrun), then joining the workers after their
 * current runs, and waiting for the ticks bound to other executors that have started (see
 * basic_scheduler). To let delayed tasks run
 * first, call shutdown() and await_termination() before. No executor of the pool may be used
 * once its destruction has begun, and a tracked one must be gone by then.
 *
 * A process forked while a pool exists gets none of its workers: the child may build and use
 * pools of its own, but must not use or destroy one made before the fork (its destructor
 * hangs); so a child of a process with a pool of static storage duration ends with _exit() or
 * exec, not exit(). Nor may the child run or destroy an io_context that a scheduler of such a
 * pool used, even after its notify_fork(): that pool's operations are still counted there
 * (run() would not return), and their alarm would take the parent's pool's tasks. The library
 * registers its fork handlers (pthread_atfork) before the program's static objects are made, so a
 * prepare handler that the program registers from then on runs before the library's own, and may
 * schedule or cancel tasks; one registered earlier (by a shared library loaded before this one)
 * must not, nor advance a manual_clock.
 *
 * @tparam Clock The clock that due times are read on (std::chrono::steady_clock by default;
 * sched::manual_clock in tests).
 *
 * @par Thread safety
 * Distinct objects: Safe. Shared objects: Safe, except that the destructor must not run
 * concurrently with a call on the pool or on one of its executors. Its futures and handles may
 * be cancelled on any thread meanwhile: the destructor waits for such a call to be done with
 * the pool (the stop callbacks of cancel(true) may run after it). A tracked executor whose
 * release let await_termination() return is done with the pool by then.
 */
template <class Clock = std::chrono::steady_clock>
class basic_scheduled_thread_pool : public boost::asio::execution_context,
                                    private detail::task_owner<Clock>
{
public:
    using clock_type = Clock;
    using duration = typename Clock::duration;
    using time_point = typename Clock::time_point;
    using queue_type = basic_delayed_work_queue<Clock>;
    using task_handle_type = basic_task_handle<Clock>;
    /// What each run of a periodic task may be told.
    using tick_type = basic_tick<Clock>;
    template <class R>
    using future_type = basic_scheduled_future<R, Clock>;
    /// The pool's Asio executor: possibly blocking, untracked, std::allocator.
    using executor_type = basic_pool_executor<Clock, std::allocator<void>, 0>;

    /// Starts @p threads workers with default options.
    /** @throws std::invalid_argument if @p threads is 0.
     *  @throws std::length_error if 8,191 pools (of any clock) are alive already. */
    explicit basic_scheduled_thread_pool(std::size_t threads);

    /// Starts `options.threads` workers.
    /** @throws std::invalid_argument if `options.threads` is 0.
     *  @throws std::length_error if 8,191 pools (of any clock) are alive already. */
    explicit basic_scheduled_thread_pool(pool_options options);

    /// shutdown_now(), cancelling what had not started (with no memory needed), then joins the
    /// workers, then waits for the periodic ticks that have started on other executors (a tick
    /// that destroys the pool is not waited for, from within), as for a worker's run: such a
    /// tick must not wait for what the destroying thread holds, nor destroy another pool whose
    /// own ticks may destroy this one. Not on one of the pool's workers: not from its tasks, its
    /// hooks that run there (before_execute, after_execute, on_thread_stop...) or the destructors
    /// of its tasks' callables (a worker cannot join itself: the process terminates). Nor from
    /// its hooks or error sink wherever they run (a bound tick's after_execute runs on the tick's
    /// executor), nor from a tick of the pool that one of those hooks runs (a hook that runs the
    /// io_context): the destructor would wait for its caller, so the process terminates instead,
    /// saying so on stderr.
    ~basic_scheduled_thread_pool();

    basic_scheduled_thread_pool(const basic_scheduled_thread_pool&) = delete;
    basic_scheduled_thread_pool& operator=(const basic_scheduled_thread_pool&) = delete;

    /// The options the pool was built with.
    const pool_options& options() const noexcept { return options_; }

    /// The number of worker threads.
    std::size_t thread_count() const noexcept { return options_.threads; }

    /// The queue of tasks waiting to run, to observe (Java's getQueue()).
    const queue_type& queue() const noexcept { return queue_; }

    /// An executor that runs functions on the pool's workers, for Boost.Asio.
    executor_type get_executor() noexcept;

    /// Runs @p f once, @p delay from now.
    /**
     * @returns A future for what @p f returns.
     * @throws std::invalid_argument if @p f is empty (or @p delay is NaN).
     * @throws sched::rejected_execution after shutdown under rejection_policy::abort.
     */
    template <class F, class Rep, class Period>
    requires detail::task_body<F> future_type<detail::task_result_t<F>>
    schedule(std::chrono::duration<Rep, Period> delay, F&& f)
    {
        return schedule_at(detail::due_after<Clock>(delay), std::forward<F>(f));
    }

    /// Runs @p f once, when the clock reaches @p due.
    /** @copydetails schedule */
    template <class F>
    requires detail::task_body<F> future_type<detail::task_result_t<F>> schedule_at(time_point due,
                                                                                    F&& f);

    /// Runs @p f first @p initial_delay from now, then every @p period on a fixed grid: the k-th
    /// run is due at first + k·period, whenever the previous runs happened (Java's
    /// scheduleAtFixedRate). After a stall, missed runs follow one another at once, unless
    /// `options.missed` says otherwise.
    /**
     * @p f returns void and takes nothing, a std::stop_token, a `const tick_type&`, or both
     * (tick first). The future completes only when the task ends: cancelled, or failed with what
     * @p f threw as its failure policy says.
     * @throws std::invalid_argument if @p period is not positive, @p f is empty, the jitter is
     * larger than the period, or a duration is NaN.
     * @throws sched::rejected_execution after shutdown under rejection_policy::abort.
     */
    template <class F, class Rep1, class Period1, class Rep2, class Period2>
    requires detail::periodic_body<F, tick_type> future_type<void>
    schedule_at_fixed_rate(std::chrono::duration<Rep1, Period1> initial_delay,
                           std::chrono::duration<Rep2, Period2> period,
                           F&& f,
                           const periodic_options& options = {});

    /// Runs @p f first @p initial_delay from now, then again @p delay after each run ends (Java's
    /// scheduleWithFixedDelay).
    /** @copydetails schedule_at_fixed_rate
     *  @throws std::invalid_argument also for a missed-tick policy other than delay(). */
    template <class F, class Rep1, class Period1, class Rep2, class Period2>
    requires detail::periodic_body<F, tick_type> future_type<void>
    schedule_with_fixed_delay(std::chrono::duration<Rep1, Period1> initial_delay,
                              std::chrono::duration<Rep2, Period2> delay,
                              F&& f,
                              const periodic_options& options = {});

    /// Runs @p f as soon as a worker is free; returns a future for its result.
    /** @copydetails schedule */
    template <class F>
    requires detail::task_body<F> future_type<detail::task_result_t<F>> submit(F&& f)
    {
        return schedule_at(Clock::now(), std::forward<F>(f));
    }

    /// Runs @p f as soon as a worker is free, without a future: what it throws reaches only the
    /// error_sink (by default, a line on std::cerr) and after_execute hooks (or, handed back by
    /// shutdown_now(), what the handle's run() returns).
    /**
     * With no future, a task rejected under the discard policies after shutdown is dropped
     * without a word; use submit() to learn its fate. Under rejection_policy::caller_runs, what
     * it throws on the calling thread reaches the error_sink there (no hooks run).
     * @throws std::invalid_argument if @p f is empty.
     * @throws sched::rejected_execution after shutdown under rejection_policy::abort.
     */
    template <class F>
    requires detail::task_body<F>
    void execute(F&& f);

    /// Accepts no new tasks; queued tasks run or are cancelled according to the policies.
    /**
     * Periodic tasks stop unless continue_existing_periodic_tasks_after_shutdown; one-shot
     * tasks (delayed ones, and those already due but not yet taken, execute()'s among
     * them) still run when due unless execute_existing_delayed_tasks_after_shutdown is
     * false. Tasks due "never" (time_point::max()) are cancelled, since they would keep the pool
     * from terminating. Cancelled tasks have their futures told. Does not wait for the tasks:
     * see await_termination(). Calling it again has no effect, unless the last call threw: then
     * it drops what that one could not. Any call, on any thread, returns once every task that it
     * or another shutdown call under way dropped has been cancelled and destroyed (Java's waits
     * for the first call's cancellations), except one made from what a dropped task's
     * destruction runs, which does not wait for the others. So what a dropped task's
     * destruction runs must not wait for a thread that calls shutdown() or shutdown_now().
     *
     * The executor still accepts functions, which run whatever the policies say: they continue
     * work the pool accepted. The pool terminates once no task, executor function or tracked
     * executor is left, and not before this call has returned.
     * @throws std::bad_alloc if there is no memory to drop the tasks: the pool is shut down all
     * the same, and they stay queued until it is called again.
     */
    void shutdown();

    /// Accepts no new tasks, takes every queued task out, and stops the workers after their
    /// current runs; tasks running on the workers that take a std::stop_token see stop
    /// requested (not one run on its caller's thread: see rejection_policy::caller_runs).
    /**
     * The executor accepts no functions any more either: it destroys them without running them
     * (except those a worker still finishing its run executes inline: see pool_executor), and
     * the functions still queued are destroyed unrun before this returns, as an Asio
     * execution context destroys its pending handlers (one may hold the pool's own executor: a
     * strand's next turn, a coroutine's next step). It returns once what another shutdown call
     * under way dropped has been cancelled and destroyed too, as shutdown() does.
     *
     * @returns The queued tasks that had not ended, in due order (Java's shutdownNow() gives
     * them in no set order, with the cancelled ones still queued), a periodic task's too, though
     * it may have run before; but not the executor's functions, nor the scheduler's operations
     * (their handlers learn of the shutdown). Each handle runs or cancels its task; dropping it
     * cancels the task, so its future learns it did not run.
     * @throws std::bad_alloc if there is no memory for the list; the workers stop all the same,
     * and the tasks stay queued for the next call (the destructor's, at the latest).
     */
    std::vector<task_handle_type> shutdown_now();

    /// Whether shutdown() or shutdown_now() was called.
    bool is_shutdown() const noexcept;

    /// Whether the pool is shut down and every worker has left its loop (its on_thread_stop has
    /// returned), the shutdown() and shutdown_now() calls made until then having returned (so
    /// that a waiter may then destroy the pool). A worker's thread may still be ending, its
    /// thread_local destructors running, until the destructor joins it, as in Java. Once true,
    /// it stays true. A scheduling call (schedule, submit, execute, the periodic ones) made once
    /// is_shutdown() is true holds termination off in the same way until it returns, a task it
    /// runs on its caller (rejection_policy::caller_runs) included. A call still under way as
    /// shutdown() is called must, as any call, not overlap the pool's destruction.
    bool is_terminated() const noexcept;

    /// Blocks until the pool has terminated. Called from one of the pool's tasks or hooks, from
    /// inside a scheduling call made after shutdown (a task run on its caller by
    /// rejection_policy::caller_runs, say), or from what a task's destruction runs inside
    /// shutdown(), shutdown_now() or the destructor, it never returns, as in Java: that thread
    /// keeps the pool from terminating.
    void await_termination();

    /// Blocks until the pool has terminated or @p timeout of real time passes (never, within
    /// the pool: see above).
    /** @returns whether the pool has terminated.
     *  @throws std::invalid_argument if @p timeout is NaN. */
    template <class Rep, class Period>
    bool await_termination(std::chrono::duration<Rep, Period> timeout)
    {
        std::unique_lock lock(termination_mutex_);
        return terminated_cv_.wait_until(lock,
                                         detail::due_after<std::chrono::steady_clock>(timeout),
                                         [this] { return terminated_; });
    }

private:
    friend struct detail::pool_access;
    template <class, class, unsigned int>
    friend class basic_pool_executor;
    using task_type = detail::task<Clock>;
    using task_ptr = boost::intrusive_ptr<task_type>;

    enum class run_state
    {
        running,
        shutdown, // no new tasks; queued ones per the policies
        stopped,  // shutdown_now: nothing more runs
    };

    // Makes the task for @p f (decorated if the pool has a decorate_task hook) and queues it.
    // An unobserved task is one whose future the caller drops (execute()).
    template <class R, bool Periodic, class F, class Schedule>
    future_type<R> make_and_queue(F&& f,
                                  time_point due,
                                  detail::period_kind kind,
                                  const Schedule& schedule,
                                  bool unobserved = false);

    // Makes and queues a periodic task of `kind`: the checks and the first due time.
    template <class F, class Rep1, class Period1, class Rep2, class Period2>
    future_type<void> make_periodic(detail::period_kind kind,
                                    std::chrono::duration<Rep1, Period1> initial_delay,
                                    std::chrono::duration<Rep2, Period2> period,
                                    F&& f,
                                    const periodic_options& options);

    // The executor's submission: queues `f`, due now, as an executor function in a node from
    // the recycler; `f` itself lives in memory from `a` unless that is a std::allocator.
    template <class F, class Allocator>
    void queue_function(F&& f, const Allocator& a);

    // Returns make(f), or make(the decorated f) if the decorate_task hook gives a wrapper.
    template <class F, class Make>
    decltype(auto) decorate(F&& f, Make make);

    // Queues a new task the caller holds a reference to, plus the runner's reference it hands
    // over. Applies the rejection policy if the pool does not accept it (or the task is
    // cancelled already); returns whether it was queued.
    bool queue_new(task_type& t, time_point due);
    // Under the queue's lock (or a far shard's): whether a new task may be queued.
    bool accepts(const task_type& t) const noexcept;
    void reject(task_type& t);
    // rejection_policy::caller_runs: runs `t` once on this thread, as a task handle would (a
    // periodic task then ends cancelled), and reports what it throws as a worker would.
    void run_on_caller(task_ptr t) noexcept;
    struct caller_run_tag; // a detail::thread_scope: this thread runs a task the pool refused
    struct drop_tag;       // a detail::thread_scope: this thread drops tasks a shutdown took
    // While it lives, this thread drops the tasks a shutdown call took out (counted in
    // drops_under_way_ before it is made); as it ends, the calls waiting for the drop may return.
    class drop_under_way
    {
    public:
        explicit drop_under_way(basic_scheduled_thread_pool& pool) noexcept
            : pool_(pool), scope_(&pool)
        {}
        ~drop_under_way();
        drop_under_way(const drop_under_way&) = delete;
        drop_under_way& operator=(const drop_under_way&) = delete;

    private:
        basic_scheduled_thread_pool& pool_;
        const detail::thread_scope<drop_tag> scope_;
    };
    // Waits until no shutdown call is still dropping; at once from inside a drop of this
    // pool's (what a dropped task's destruction runs), which would otherwise wait for itself.
    void wait_for_drops();

    void worker_main(std::size_t index);
    // On the thread of an external leader that has woken (an io_context's): runs the due tasks
    // it leads, as a worker would, `most` of them at most; `poll` says whether this thread polls
    // the clock for the next (see pool_options::spin_before_due and queue_type::take_led()).
    // Returns whether it stopped at `most` (more may be due: the leader must take them soon).
    bool run_led(typename queue_type::external_leader& leader,
                 typename queue_type::led_poll& poll,
                 std::size_t most);
    static typename queue_type::external_leader* leader_of(typename queue_type::node& n) noexcept
    {
        return as_task(n).leader();
    }
    // Runs or retires a task a worker took; false if the run went on elsewhere (detached), and
    // the task stays counted as pending until it comes back.
    bool run(task_ptr t, const std::stop_token& stop);
    void finish_run(task_type& t, std::exception_ptr error) noexcept override;
    std::optional<time_point> queued_due_time(const task_type& t) const noexcept override
    {
        return queue_.due_time(t);
    }
    // The end of a run: re-queues a periodic task or retires the task, then after_execute.
    void after_run(task_ptr t, std::exception_ptr error) noexcept;
    // What a run threw, to the error sink; without one, to std::cerr unless a future or
    // completion handler carries it.
    void report_failure(const std::exception_ptr& error, bool carried) noexcept;
    // Whether what a run of `t` threw is carried by its future or completion handler: it ended
    // the task, and someone can see the outcome.
    static bool carries_failure(const task_type& t) noexcept;
    void requeue(task_ptr t, time_point due) noexcept;
    // After a task that was not due after all went back (a deadline pushed back): moves the
    // tasks at the head that have moved later too, due by lazy_requeue_horizon after `now`, to
    // their due times, so that they do not each wake a thread.
    void defer_lazy_heads(time_point now) noexcept;
    static constexpr std::chrono::milliseconds lazy_requeue_horizon{10};
    // The runner is done with the task: frees its body and drops the reference. Touches
    // nothing of the pool's, which may be gone by the time it returns (see on_cancelled()).
    // `caller_holds`: this thread holds another reference until it returns, unless the body's
    // destruction lets go of it.
    static void retire(task_ptr t, bool caller_holds = false) noexcept;
    // The same for a task that will not run again, cancelling it first if it is still pending.
    void retire_cancelled(task_ptr t) noexcept;

    bool may_run(const task_type& t) const noexcept override;
    // Whether `t`, due at `due`, may stay queued (or go back in the queue) in this run state.
    bool keeps_after_shutdown(const task_type& t, time_point due) const noexcept;
    bool removes_cancelled(const task_type& t) const noexcept;
    bool belongs_in_queue(const task_type& t) const noexcept;
    void on_cancelled(task_type& t, bool caller_holds) noexcept override;
    // Takes the cancelled task `t` out of the queue if the policies say so, calls then(), and
    // only then retires it if it took it: then() may end a cancel that a holder waits for.
    template <class Then>
    void take_out_cancelled(task_type& t, Then then, bool caller_holds = false) noexcept;
    // Counts one more task held outside the queue, or tracked executor (even once the pool has
    // gone idle after shutdown: finish_pending() gives it back all the same).
    void take_pending() noexcept;
    void finish_pending() noexcept;
    // Under the queue's lock, as `t` leaves it to run: counts it pending, and a periodic task
    // keeps its place among the tasks due at the same time for its next run.
    void taken(task_type& t, typename queue_type::kept_place place) noexcept;
    // As the pool shuts down (again, harmlessly): the pending count and the queue learn it, so
    // that the last step to idle can tell the queue is empty.
    void begin_closing() noexcept;
    // If the pool is shut down and nothing is queued or pending, marks it idle and lets the
    // workers go.
    void stop_if_idle() noexcept;
    // Under the queue's lock, with nothing queued: marks the pool idle if it is shut down and
    // nothing is pending either. Returns the workers' stop source if it did, for the caller to
    // request once the lock is free (the pool may be gone by then); else one with no state.
    std::stop_source become_idle() noexcept;

    // Keeps the pool from terminating while it lives: a shutdown call under way, which touches
    // the pool until it returns (Java's tryTerminate waits for its mainLock likewise), or a
    // scheduling call made once the pool is shut down (see is_terminated()).
    class termination_hold
    {
    public:
        // Holds it off if `holds`; else does nothing.
        explicit termination_hold(basic_scheduled_thread_pool& pool, bool holds = true) noexcept
            : pool_(holds ? &pool : nullptr)
        {
            if (pool_)
                pool_->termination_holds_.fetch_add(1);
        }
        termination_hold(const termination_hold&) = delete;
        termination_hold& operator=(const termination_hold&) = delete;
        ~termination_hold()
        {
            if (pool_)
                pool_->release_termination();
        }

    private:
        basic_scheduled_thread_pool* pool_;
    };
    // Stops the workers, cancels every task still queued, waits for the workers, then lets go of
    // everything that names the pool: the destructor's work, and the constructor's when a worker
    // cannot start.
    void close() noexcept;
    // A worker has exited, or a hold has gone: the last one marks the pool terminated.
    void release_termination() noexcept;

    // Whether this thread is one of the pool's workers.
    bool runs_this_thread() const noexcept { return detail::this_thread_pool() == this; }
    // What an executor function run inside execute() threw: to the error sink and after_execute.
    void after_inline_run(std::exception_ptr error) noexcept;

    // Takes every queued task for which pred(task, due) holds out of the queue, in due order,
    // with the queue's references. Out of memory, it takes what it could (every task that left
    // the queue is in the result) and sets `failure`; it does not throw.
    template <class Predicate>
    std::vector<task_ptr> take_queued(Predicate pred, std::exception_ptr& failure);
    // Room enough for every queued task, and for some pushed meanwhile.
    std::size_t room_for_queued() const { return queue_.size() + 64; }

    static task_type& as_task(typename queue_type::node& n) noexcept
    {
        return static_cast<task_type&>(n);
    }

    // How late a task that an external leader leads may be before a worker takes it instead:
    // the leader's io_context may not be running.
    static constexpr std::chrono::milliseconds lead_grace{10};

    // The number its tasks name it by; registered first, closed once no task names it.
    detail::registered_owner registration_;
    const pool_options options_;
    queue_type queue_;
    std::atomic<run_state> state_{run_state::running};
    // Tasks taken out of the queue by a worker and not yet done with (detached runs included),
    // and tracked executors: the queued tasks are the queue's size. closing_bit joins it as the
    // pool shuts down (the same fact as state_, in this word so that the step to zero knows
    // whether the pool may go idle). When both are zero after shutdown, idle_bit joins it for
    // good: nothing can be queued again, and the workers are stopped. Arming and cancelling a
    // task touch neither.
    std::atomic<std::size_t> pending_{0};
    static constexpr std::size_t idle_bit = ~(~std::size_t(0) >> 1);
    static constexpr std::size_t closing_bit = idle_bit >> 1;
    std::stop_source stop_; // the workers exit; running stop-token tasks see it
    // One shutdown() or shutdown_now() at a time chooses what to drop (held over no user code).
    std::mutex shutdown_mutex_;
    // A shutdown() ran out of memory before it dropped what the policies drop: the next call
    // drops it. Guarded by shutdown_mutex_.
    bool drop_owed_ = false;
    // Shutdown calls that have taken tasks out and are still retiring them (their callables
    // destroyed, their owners told); drops_ended_ is notified as the count falls to zero.
    // Guarded by shutdown_mutex_.
    std::size_t drops_under_way_ = 0;
    std::condition_variable drops_ended_;
    std::vector<std::thread> workers_;
    // Workers not yet exited, and shutdown calls under way (which may still touch the pool):
    // the pool terminates when none is left.
    std::atomic<std::size_t> termination_holds_{0};
    mutable std::mutex termination_mutex_;
    std::condition_variable terminated_cv_;
    bool terminated_ = false;                         // guarded by termination_mutex_
    std::shared_ptr<detail::owner_link<Clock>> link_; // for detached runs
};

/// The pool on std::chrono::steady_clock.
using scheduled_thread_pool = basic_scheduled_thread_pool<>;

} // namespace sched

#include <sched/impl/scheduled_thread_pool.hpp>

namespace sched {
extern template class basic_scheduled_thread_pool<std::chrono::steady_clock>;
} // namespace sched

// The pool's executor_type, which needs the pool complete.
#include <sched/pool_executor.hpp>

SCHED_VISIBILITY_END

#endif // SCHED_SCHEDULED_THREAD_POOL_HPP
