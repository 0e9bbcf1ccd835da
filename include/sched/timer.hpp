#ifndef SCHED_TIMER_HPP
#define SCHED_TIMER_HPP

#include <sched/delayed_work_queue.hpp>
#include <sched/periodic_options.hpp>
#include <sched/tick.hpp>
#include <sched/timer_task.hpp>

#include <sched/detail/periodic_schedule.hpp>
#include <sched/detail/report_uncaught.hpp>
#include <sched/detail/thread_name.hpp>
#include <sched/detail/time.hpp>
#include <sched/detail/timer_node.hpp>
#include <sched/detail/timer_slack.hpp>
#include <sched/detail/visibility.hpp>

#include <chrono>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>

SCHED_VISIBILITY_BEGIN

namespace sched {

/// Thrown by sched::basic_timer's schedule calls once the timer has been cancelled.
class timer_cancelled : public std::logic_error
{
public:
    timer_cancelled() : std::logic_error("sched::timer: already cancelled") {}
};

/// Thrown by sched::basic_timer's schedule calls for a task that was scheduled before, or
/// cancelled (java.util.Timer's "Task already scheduled or cancelled").
class task_already_scheduled : public std::logic_error
{
public:
    task_already_scheduled() : std::logic_error("sched::timer: task already scheduled or cancelled")
    {}
};

/// java.util.Timer: one thread of its own runs its tasks one at a time, in due order.
/**
 * Tasks are sched::basic_timer_task objects, each scheduled once, to run once, with Timer's
 * fixed delay (the next run is due a period after the previous one *started*), or at a fixed
 * rate (each run is due a period after the previous one was due: after a stall, the missed runs
 * happen in rapid succession). A task that is due while another runs waits for it.
 *
 * Periodic calls take sched::periodic_options too: a failure policy (a periodic task that
 * throws may keep running), a jitter, and for schedule_at_fixed_rate a missed-tick policy. A
 * task's callable may take a `const sched::basic_tick<Clock>&`: when the run was due, when it
 * started, its index and the runs missed before it.
 *
 * Two of Timer's traps are gone:
 * - A task that throws does not kill the thread. The exception goes to the timer's error
 *   handler (by default, a line on std::cerr; also there if the run destroyed its own timer,
 *   handler and all); a periodic task that throws ends (its state becomes `executed`, before the
 *   handler is called) unless its failure policy keeps it running, and every other task goes
 *   on.
 * - Times are on @p Clock, the steady clock by default, so moving the wall clock moves nothing.
 *   A `std::chrono::system_clock` time point is accepted and converted once, when scheduled.
 *
 * Delays and periods too large for the clock saturate: a run due at time_point::max() never
 * happens.
 *
 * When memory runs out, a schedule call that cannot queue its task throws std::bad_alloc and
 * leaves the task as it was (it may be scheduled again); a periodic task that cannot be queued
 * for its next run ends (`executed`), and the error handler is given the std::bad_alloc.
 *
 * cancel() ends the timer: the tasks still queued are cancelled (their state says so) and never
 * run, a run under way finishes (cancel() waits for it, unless called by that run), and
 * scheduling afterwards throws sched::timer_cancelled. The destructor cancels the timer and
 * waits for a run under way, unless called by that run: a task may destroy its own timer, but a
 * run must not wait for another thread that cancels or destroys it (see cancel()).
 *
 * A process forked while a timer exists gets none of its thread: the child must not use or
 * destroy that timer (a task scheduled there would never run, nor be cancelled), so a child of
 * a process with a timer of static storage duration ends with _exit() or exec, not exit().
 *
 * @par Thread safety
 * Every member function may be called from any thread, including from inside a task. The
 * destructor, whether a task runs it or not, must not run concurrently with another call on the
 * timer, other than one made by the run it waits for: a cancel() on another thread must have
 * returned, even once a second cancel() has (the first may still be destroying the callables of
 * the tasks it dropped, or waiting for the run that destroys the timer).
 */
template <class Clock = std::chrono::steady_clock>
class basic_timer
{
public:
    using clock_type = Clock;
    using duration = typename Clock::duration;
    using time_point = typename Clock::time_point;
    using task_type = basic_timer_task<Clock>;
    /// Told of every exception a task throws; called on the timer's thread; must not throw. It
    /// may use the timer (schedule, cancel), but not destroy it: it is the timer's own.
    using error_handler = std::function<void(std::exception_ptr)>;

    /// Starts the timer's thread, named @p name (cut to 15 characters on Linux). Exceptions
    /// thrown by tasks go to @p on_error, or a line on std::cerr if it is empty.
    explicit basic_timer(std::string name = "sched-timer", error_handler on_error = {})
        : name_(std::move(name)), on_error_(std::move(on_error))
    {
        thread_ = std::jthread([this](std::stop_token stop) { main_loop(std::move(stop)); });
    }

    basic_timer(const basic_timer&) = delete;
    basic_timer& operator=(const basic_timer&) = delete;

    /// Cancels the timer and waits for a run under way. Called from that run (a task letting go
    /// of the last owner of its timer), it does not wait: the run is the last, and the thread
    /// ends after it without touching the timer again.
    ~basic_timer()
    {
        cancel();
        if (this_thread_timer_ == this)
        {
            this_thread_timer_ = nullptr; // the run sees it; it may make a timer where this was
            thread_.detach();
        }
    }

    /// The name given to the timer's thread.
    const std::string& name() const noexcept { return name_; }

    /// Runs @p task once, after @p delay.
    /** @throws std::invalid_argument if @p delay is negative; sched::timer_cancelled;
     *  sched::task_already_scheduled. */
    template <class Rep, class Period>
    void schedule(const task_type& task, std::chrono::duration<Rep, Period> delay)
    {
        queue(task, first_due(delay), std::nullopt);
    }

    /// Runs @p task once, at @p time (at once if it has passed).
    /** @throws sched::timer_cancelled; sched::task_already_scheduled. */
    void schedule(const task_type& task, time_point time) { queue(task, time, std::nullopt); }

    /// Runs @p task once, at the wall-clock @p time (converted to @p Clock now; at once if it
    /// has passed, even before the epoch, which Java's Timer refuses).
    /** @throws sched::timer_cancelled; sched::task_already_scheduled. */
    void schedule(const task_type& task, std::chrono::system_clock::time_point time) requires(
        !std::is_same_v<Clock, std::chrono::system_clock>)
    {
        queue(task, from_system(time), std::nullopt);
    }

    /// Runs @p task after @p delay, then again @p period after each run *started* (Timer's
    /// fixed delay: late runs push the later ones back; missed_tick_policy::delay()).
    /**
     * @p options may set the failure policy and jitter; its missed-tick policy, if set, must be
     * delay().
     * @throws std::invalid_argument if @p delay is negative, @p period is not positive, or
     * @p options do not fit (a jitter larger than the period, another missed-tick policy);
     * sched::timer_cancelled; sched::task_already_scheduled.
     */
    template <class Rep1, class Period1, class Rep2, class Period2>
    void schedule(const task_type& task,
                  std::chrono::duration<Rep1, Period1> delay,
                  std::chrono::duration<Rep2, Period2> period,
                  const periodic_options& options = {})
    {
        schedule(task, first_due(delay), period, options);
    }

    /// As above, first at @p first (at once if it has passed).
    /** @throws std::invalid_argument if @p period is not positive or @p options do not fit;
     *  sched::timer_cancelled; sched::task_already_scheduled. */
    template <class Rep, class Period>
    void schedule(const task_type& task,
                  time_point first,
                  std::chrono::duration<Rep, Period> period,
                  const periodic_options& options = {})
    {
        queue(task, first, timer_fixed_delay(period, options));
    }

    /// As above, first at the wall-clock time @p first.
    /** @throws std::invalid_argument if @p period is not positive or @p options do not fit;
     *  sched::timer_cancelled; sched::task_already_scheduled. */
    template <class Rep, class Period>
    void schedule(const task_type& task,
                  std::chrono::system_clock::time_point first,
                  std::chrono::duration<Rep, Period> period,
                  const periodic_options& options =
                      {}) requires(!std::is_same_v<Clock, std::chrono::system_clock>)
    {
        schedule(task, from_system(first), period, options);
    }

    /// Runs @p task after @p delay, then every @p period on that grid: run n is due at
    /// first + n·period, and runs missed while the thread was busy happen one after another
    /// (missed_tick_policy::burst(), unless @p options say otherwise).
    /** @throws std::invalid_argument if @p delay is negative, @p period is not positive, or the
     *  jitter is larger than the period; sched::timer_cancelled; sched::task_already_scheduled. */
    template <class Rep1, class Period1, class Rep2, class Period2>
    void schedule_at_fixed_rate(const task_type& task,
                                std::chrono::duration<Rep1, Period1> delay,
                                std::chrono::duration<Rep2, Period2> period,
                                const periodic_options& options = {})
    {
        schedule_at_fixed_rate(task, first_due(delay), period, options);
    }

    /// As above, first at @p first: if that has passed, the runs missed since happen at once (as
    /// the missed-tick policy says: by default all of them, so not from a time long past).
    /** @throws std::invalid_argument if @p period is not positive or the jitter is larger than
     *  the period; sched::timer_cancelled; sched::task_already_scheduled. */
    template <class Rep, class Period>
    void schedule_at_fixed_rate(const task_type& task,
                                time_point first,
                                std::chrono::duration<Rep, Period> period,
                                const periodic_options& options = {})
    {
        queue(task, first,
              schedule_type(detail::period_kind::fixed_rate,
                            detail::checked_period<duration>(period), options));
    }

    /// As above, first at the wall-clock time @p first.
    /** @throws std::invalid_argument if @p period is not positive or the jitter is larger than
     *  the period; sched::timer_cancelled; sched::task_already_scheduled. */
    template <class Rep, class Period>
    void schedule_at_fixed_rate(const task_type& task,
                                std::chrono::system_clock::time_point first,
                                std::chrono::duration<Rep, Period> period,
                                const periodic_options& options =
                                    {}) requires(!std::is_same_v<Clock, std::chrono::system_clock>)
    {
        schedule_at_fixed_rate(task, from_system(first), period, options);
    }

    /// Ends the timer (java.util.Timer.cancel()): queued tasks are cancelled without running, a
    /// run under way finishes, later schedule calls throw sched::timer_cancelled. Returns once
    /// that run has finished, unless called from it (that run is then the last); so does a call
    /// made meanwhile from another thread. Calling it again does nothing. (Java's returns at once:
    /// here a run must not wait for a thread that cancels or destroys its timer, such as the run
    /// of another timer that cancels this one while this run cancels that timer: each would wait
    /// for the other for ever.)
    void cancel() noexcept
    {
        node_type* left = nullptr;
        {
            // Callers other than the timer's thread one at a time, so that a second one too
            // returns only once the first has cancelled the queue and the thread has ended. (The
            // thread itself must not wait for them: they wait for it.)
            const bool on_timer_thread = this_thread_timer_ == this;
            std::unique_lock one_at_a_time(cancel_mutex_, std::defer_lock);
            if (!on_timer_thread)
                one_at_a_time.lock();
            bool first = false;
            {
                std::lock_guard lock(mutex_);
                first = !std::exchange(cancelled_, true);
            }
            if (first)
            {
                thread_.request_stop();
                left = take_queued([](const node_type&) { return true; });
                for (node_type* n = left; n; n = n->next_taken)
                    n->cancel();
            }
            if (!on_timer_thread && thread_.joinable())
                thread_.join();
        }
        // Their callables go once the lock is free: what their destructors do may call cancel().
        while (left)
            node_type::let_go(std::move(std::exchange(left, left->next_taken)->keep));
    }

    /// Removes the cancelled tasks from the queue (java.util.Timer.purge()).
    /** @returns how many it removed. */
    std::size_t purge()
    {
        node_type* removed = take_queued(
            [](const node_type& n) { return n.state() == timer_task_state::cancelled; });
        std::size_t count = 0;
        for (; removed; ++count)
            node_type::let_go(std::move(std::exchange(removed, removed->next_taken)->keep));
        return count;
    }

private:
    using queue_type = basic_delayed_work_queue<Clock>;
    using node_type = detail::timer_node<Clock>;
    using schedule_type = detail::periodic_schedule<Clock>;

    // Links the nodes remove_if() hands out into a list through next_taken: no allocation.
    struct list_inserter
    {
        node_type** last;

        list_inserter& operator*() noexcept { return *this; }
        list_inserter& operator++() noexcept { return *this; }
        list_inserter& operator=(typename queue_type::node* n) noexcept
        {
            node_type& taken = static_cast<node_type&>(*n);
            taken.next_taken = nullptr;
            *last = &taken;
            last = &taken.next_taken;
            return *this;
        }
    };

    // Takes the queued nodes that match `pred` out of the queue, in due order, as a list.
    template <class Predicate>
    node_type* take_queued(Predicate pred) noexcept
    {
        node_type* first = nullptr;
        queue_.remove_if(
            [&](typename queue_type::node& n) noexcept {
                return pred(static_cast<const node_type&>(n));
            },
            list_inserter{&first});
        return first;
    }

    template <class Rep, class Period>
    static time_point first_due(std::chrono::duration<Rep, Period> delay)
    {
        if (delay < delay.zero())
            throw std::invalid_argument("sched::timer: negative delay");
        return detail::due_after<Clock>(delay);
    }

    // A wall-clock time as a time on Clock, as far from now: one that has passed is as long ago
    // (a fixed-rate task then makes up the runs missed since, as with Java's Timer).
    static time_point from_system(std::chrono::system_clock::time_point t)
    {
        using wall_clock = std::chrono::system_clock;
        // Exact in unsigned arithmetic even beyond the signed range (t near min() or max()).
        using unsigned_duration =
            std::chrono::duration<std::make_unsigned_t<wall_clock::rep>, wall_clock::period>;
        const auto distance = [](wall_clock::time_point from, wall_clock::time_point to) {
            return unsigned_duration(
                static_cast<unsigned_duration::rep>(to.time_since_epoch().count()) -
                static_cast<unsigned_duration::rep>(from.time_since_epoch().count()));
        };
        const wall_clock::time_point wall_now = wall_clock::now();
        if (t >= wall_now)
            return detail::due_after<Clock>(distance(wall_now, t)); // saturates at "never"
        const time_point now = Clock::now();
        return detail::saturating_subtract(
            now, detail::saturating_cast<duration>(distance(t, wall_now)));
    }

    // java.util.Timer's fixed delay: a grid that each run's start moves.
    template <class Rep, class Period>
    static schedule_type timer_fixed_delay(std::chrono::duration<Rep, Period> period,
                                           periodic_options options)
    {
        if (options.missed && *options.missed != missed_tick_policy::delay())
        {
            throw std::invalid_argument(
                "sched::timer: schedule with a period is Timer's fixed delay; use "
                "schedule_at_fixed_rate for another missed-tick policy");
        }
        options.missed = missed_tick_policy::delay();
        return schedule_type(detail::period_kind::fixed_rate,
                             detail::checked_period<duration>(period), options);
    }

    // Queues `task` due at `due` (its first point on the grid, if periodic).
    void queue(const task_type& task, time_point due, std::optional<schedule_type> schedule)
    {
        node_type& n = *task.node_;
        if (schedule)
            due = schedule->first_due(due);
        std::unique_lock lock(mutex_); // cancel() cannot pass meanwhile
        if (cancelled_)
            throw timer_cancelled();
        if (!n.begin_schedule(schedule))
            throw task_already_scheduled();
        n.keep = task.node_;
        try
        {
            queue_.push(n, due);
        }
        catch (...) // out of memory: as if never scheduled
        {
            n.keep.reset();
            lock.unlock(); // the task is in no queue: the timer has no more to do with it
            n.abandon_schedule();
            throw;
        }
    }

    // On the timer's thread: a task destroyed the timer (see the destructor).
    static bool destroyed_by_this_run() noexcept { return this_thread_timer_ == nullptr; }

    void main_loop(std::stop_token stop)
    {
        this_thread_timer_ = this;
        detail::name_this_thread(name_);
        detail::wake_on_time(); // as the pool's workers: its tasks start on time
        while (typename queue_type::node* taken = queue_.take(stop))
        {
            run(static_cast<node_type&>(*taken));
            if (destroyed_by_this_run())
                return; // the timer is gone: touch nothing of it
        }
    }

    void run(node_type& n)
    {
        // The timer's reference, until the task goes back in the queue; if it does not, it will
        // not run again, and the timer lets go of it (once the lock is free).
        struct timers_reference
        {
            std::shared_ptr<node_type> keep;
            ~timers_reference()
            {
                if (keep)
                    node_type::let_go(std::move(keep));
            }
        } held{std::move(n.keep)};
        std::shared_ptr<node_type>& keep = held.keep;
        {
            std::lock_guard lock(mutex_);
            if (cancelled_) // taken as cancel() began: dropped, as the rest of the queue
            {
                n.cancel();
                return;
            }
        }
        if (n.state() == timer_task_state::cancelled)
            return; // cancelled while queued: dropped as it comes due
        std::optional<schedule_type>& schedule = n.schedule();
        const time_point due = *n.last_due_time(); // taken: not queued
        const time_point started = Clock::now();
        std::optional<basic_tick<Clock>> tick;
        if (!schedule)
        {
            if (!n.begin_last_run())
                return; // cancelled just now
            tick.emplace(due, started);
        }
        else
            tick = schedule->begin(due, started); // empty: skipped
        if (tick)
        {
            if (schedule && !n.begin_run())
                return; // cancelled just now
            try
            {
                n.run(*tick);
                if (destroyed_by_this_run())
                {
                    if (schedule)
                        n.cancel(); // a periodic task's last run, as when a run cancels the timer
                    return;
                }
                if (schedule)
                    schedule->succeeded();
            }
            catch (...)
            {
                // A task that ends has ended by the time its error is reported.
                if (destroyed_by_this_run()) // its error handler went with it
                {
                    // A periodic task its failure policy keeps running ends by the destruction,
                    // cancelled, as it would without the throw.
                    if (schedule && !schedule->ends_with_failure())
                        n.cancel();
                    else
                        n.end_by_failure();
                    detail::report_uncaught("a destroyed timer", std::current_exception());
                    return;
                }
                const bool ends = !schedule || schedule->ends_with_failure();
                if (ends)
                    n.end_by_failure();
                report(std::current_exception());
                if (ends)
                    return;
            }
            if (schedule)
                n.end_run();
        }
        if (!schedule || n.state() != timer_task_state::scheduled)
            return;
        const time_point next = schedule->next_due(Clock::now());
        std::exception_ptr no_room;
        {
            std::lock_guard lock(mutex_);
            if (cancelled_)
                n.cancel();
            else
            {
                n.keep = std::move(keep);
                try
                {
                    queue_.push(n, next);
                }
                catch (...) // out of memory: the task cannot run again, and ends
                {
                    keep = std::move(n.keep);
                    n.end_by_failure();
                    no_room = std::current_exception();
                }
            }
        }
        if (no_room) // without the lock: the error handler may schedule or cancel
            report(std::move(no_room));
    }

    void report(std::exception_ptr e) noexcept
    {
        if (on_error_)
            on_error_(std::move(e));
        else
            detail::report_uncaught(name_, e);
    }

    const std::string name_;
    const error_handler on_error_;
    queue_type queue_;
    std::mutex mutex_; // orders schedule calls and re-queueing against cancel()
    bool cancelled_ = false;
    std::mutex cancel_mutex_; // see cancel()
    std::jthread thread_;     // last: it starts once the rest is ready
    // On a timer's thread, that timer until a task destroys it (see destroyed_by_this_run());
    // null on any other thread. (Not the thread's id: once the thread has ended, a new thread may
    // have the same.)
    static inline thread_local const basic_timer* this_thread_timer_ = nullptr;
};

/// The timer on std::chrono::steady_clock.
using timer = basic_timer<>;

} // namespace sched

SCHED_VISIBILITY_END

#endif // SCHED_TIMER_HPP
