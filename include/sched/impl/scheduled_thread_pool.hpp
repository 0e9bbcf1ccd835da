#ifndef SCHED_IMPL_SCHEDULED_THREAD_POOL_HPP
#define SCHED_IMPL_SCHEDULED_THREAD_POOL_HPP

#include <sched/error.hpp>
#include <sched/scheduled_thread_pool.hpp>

#include <sched/detail/report_uncaught.hpp>
#include <sched/detail/thread_name.hpp>
#include <sched/detail/timer_slack.hpp>
#include <sched/detail/visibility.hpp>

#include <boost/iterator/function_output_iterator.hpp>

#include <algorithm>
#include <stdexcept>
#include <thread>
#include <type_traits>
#include <utility>

SCHED_VISIBILITY_BEGIN

namespace sched {
namespace detail {

// Hooks must not throw: a worker has nobody to report to (noexcept makes that std::terminate).
template <class Hook, class... Args>
void call_hook(const Hook& hook, Args&&... args) noexcept
{
    if (hook)
        hook(std::forward<Args>(args)...);
}

inline pool_options options_with_threads(std::size_t threads)
{
    pool_options options;
    options.threads = threads;
    return options;
}

// Shards of the pool's far tier: two per hardware thread, so that threads that schedule at once
// seldom share one.
inline std::size_t far_shards() noexcept
{
    return std::clamp<std::size_t>(2 * std::size_t(std::thread::hardware_concurrency()), 2, 64);
}

} // namespace detail

template <class Clock>
basic_scheduled_thread_pool<Clock>::basic_scheduled_thread_pool(std::size_t threads)
    : basic_scheduled_thread_pool(detail::options_with_threads(threads))
{}

template <class Clock>
basic_scheduled_thread_pool<Clock>::basic_scheduled_thread_pool(pool_options options)
    : registration_(static_cast<detail::task_owner<Clock>*>(this)), options_(std::move(options)),
      link_(std::make_shared<detail::owner_link<Clock>>(
          static_cast<detail::task_owner<Clock>&>(*this)))
{
    if (options_.threads == 0)
        throw std::invalid_argument("scheduled_thread_pool: needs at least one thread");
    queue_.set_leader_finder(&leader_of, detail::saturating_cast<duration>(lead_grace));
    if (options_.timer_slack < std::chrono::nanoseconds::zero())
        throw std::invalid_argument("scheduled_thread_pool: negative timer_slack");
    queue_.set_slack(detail::saturating_cast<duration>(options_.timer_slack));
    if (options_.spin_before_due < std::chrono::nanoseconds::zero())
        throw std::invalid_argument("scheduled_thread_pool: negative spin_before_due");
    queue_.set_spin(detail::saturating_cast<duration>(options_.spin_before_due));
    if (options_.far_tier_horizon < std::chrono::nanoseconds::zero())
        throw std::invalid_argument("scheduled_thread_pool: negative far_tier_horizon");
    queue_.set_far_tier(detail::saturating_cast<duration>(options_.far_tier_horizon),
                        detail::far_shards());
    workers_.reserve(options_.threads);
    termination_holds_.store(options_.threads);
    try
    {
        for (std::size_t i = 0; i < options_.threads; ++i)
            workers_.emplace_back([this, i] { worker_main(i); });
    }
    catch (...) // a worker did not start: those that did may have queued tasks in their hooks
    {
        termination_holds_.fetch_sub(options_.threads - workers_.size());
        close();
        throw;
    }
}

template <class Clock>
basic_scheduled_thread_pool<Clock>::~basic_scheduled_thread_pool()
{
    close();
}

template <class Clock>
void basic_scheduled_thread_pool<Clock>::close() noexcept
{
    try
    {
        (void)shutdown_now(); // the dropped handles cancel their tasks
    }
    catch (...) // out of memory: the workers stop, and the tasks stay queued
    {
        queue_.clear([this](typename queue_type::node& n) noexcept {
            task_ptr t(&as_task(n), false); // the queue's reference
            t->disown();
            retire_cancelled(std::move(t));
        });
    }
    for (std::thread& worker : workers_)
        worker.join(); // throws, hence terminates, if a task destroys its own pool
    link_->sever();    // detached runs that end from now on find the pool gone
    // Asio's services (strands, say) go while the pool's members are still there.
    boost::asio::execution_context::shutdown();
    boost::asio::execution_context::destroy();
    // No task names the pool now; a due_time() that pinned it reads the queue, which it waits
    // for.
    registration_.close();
}

template <class Clock>
auto basic_scheduled_thread_pool<Clock>::get_executor() noexcept -> executor_type
{
    return executor_type(*this);
}

template <class Clock>
template <class F>
requires detail::task_body<F>
auto basic_scheduled_thread_pool<Clock>::schedule_at(time_point due, F&& f)
    -> future_type<detail::task_result_t<F>>
{
    detail::check_not_empty(f);
    const termination_hold hold(*this, is_shutdown()); // first: see is_terminated()
    return make_and_queue<detail::task_result_t<F>, false>(
        std::forward<F>(f), due, detail::period_kind::one_shot, detail::no_schedule{});
}

template <class Clock>
template <class F, class Rep1, class Period1, class Rep2, class Period2>
requires detail::periodic_body<F, basic_tick<Clock>>
auto basic_scheduled_thread_pool<Clock>::schedule_at_fixed_rate(
    std::chrono::duration<Rep1, Period1> initial_delay,
    std::chrono::duration<Rep2, Period2> period,
    F&& f,
    const periodic_options& options) -> future_type<void>
{
    return make_periodic(detail::period_kind::fixed_rate, initial_delay, period, std::forward<F>(f),
                         options);
}

template <class Clock>
template <class F, class Rep1, class Period1, class Rep2, class Period2>
requires detail::periodic_body<F, basic_tick<Clock>>
auto basic_scheduled_thread_pool<Clock>::schedule_with_fixed_delay(
    std::chrono::duration<Rep1, Period1> initial_delay,
    std::chrono::duration<Rep2, Period2> delay,
    F&& f,
    const periodic_options& options) -> future_type<void>
{
    return make_periodic(detail::period_kind::fixed_delay, initial_delay, delay, std::forward<F>(f),
                         options);
}

template <class Clock>
template <class F, class Rep1, class Period1, class Rep2, class Period2>
auto basic_scheduled_thread_pool<Clock>::make_periodic(
    detail::period_kind kind,
    std::chrono::duration<Rep1, Period1> initial_delay,
    std::chrono::duration<Rep2, Period2> period,
    F&& f,
    const periodic_options& options) -> future_type<void>
{
    static_assert(std::is_void_v<detail::periodic_result_t<F, basic_tick<Clock>>>,
                  "a periodic task returns void");
    detail::check_not_empty(f);
    const termination_hold hold(*this, is_shutdown()); // first: see is_terminated()
    detail::periodic_schedule<Clock> schedule(kind, detail::checked_period<duration>(period),
                                              options, queue_.deliberate_lateness());
    const time_point first = schedule.first_due(detail::due_after<Clock>(initial_delay));
    return make_and_queue<void, true>(std::forward<F>(f), first, kind, schedule);
}

template <class Clock>
template <class F>
requires detail::task_body<F>
void basic_scheduled_thread_pool<Clock>::execute(F&& f)
{
    detail::check_not_empty(f);
    const termination_hold hold(*this, is_shutdown()); // first: see is_terminated()
    (void)make_and_queue<detail::task_result_t<F>, false>(std::forward<F>(f), Clock::now(),
                                                          detail::period_kind::one_shot,
                                                          detail::no_schedule{}, true);
}

template <class Clock>
void basic_scheduled_thread_pool<Clock>::shutdown()
{
    const termination_hold hold(*this); // first: once it goes, the pool may go
    std::exception_ptr failure;
    std::vector<task_ptr> dropped;
    {
        std::unique_lock lock(shutdown_mutex_); // a second caller waits for the first's choice
        run_state expected = run_state::running;
        if (state_.compare_exchange_strong(expected, run_state::shutdown))
            begin_closing();
        else if (expected != run_state::shutdown || !drop_owed_)
        {
            lock.unlock();
            wait_for_drops();
            return;
        }
        // Java's onShutdown: drop what the policies say may not run, and what was cancelled.
        dropped = take_queued(
            [this](const task_type& t, time_point due) {
                return t.state() != future_state::pending || !keeps_after_shutdown(t, due);
            },
            failure);
        drop_owed_ = failure != nullptr; // out of memory: what was not taken stays, for next time
        ++drops_under_way_;
    }
    {
        const drop_under_way dropping(*this);
        // Before any of them ends: no move of a dropped deadline's wait succeeds from here (else
        // one could return true and the wait end all the same, or a callable's destructor below
        // move a wait dropped after it, and spin for ever for it to go back). One dropped for
        // its due time, "never", that has moved to another since goes back, to be moved.
        const auto ending =
            std::partition(dropped.begin(), dropped.end(), [this](const task_ptr& t) {
                return t->state() == future_state::pending && !t->end_moves(may_run(*t));
            });
        for (auto moved = dropped.begin(); moved != ending; ++moved)
            requeue(std::move(*moved), time_point::max());
        // Without the lock: the callables dropped (their destructors, a handler told of the
        // shutdown) may shut the pool down again.
        for (auto t = ending; t != dropped.end(); ++t)
            retire_cancelled(std::move(*t));
    }
    stop_if_idle(); // if nothing is queued or running, the workers may go
    wait_for_drops();
    if (failure)
        std::rethrow_exception(failure);
}

template <class Clock>
auto basic_scheduled_thread_pool<Clock>::shutdown_now() -> std::vector<task_handle_type>
{
    const termination_hold hold(*this); // first: once it goes, the pool may go
    std::exception_ptr failure;
    std::vector<task_handle_type> never_ran;
    std::vector<task_ptr> taken;
    {
        std::lock_guard lock(shutdown_mutex_);
        state_.store(run_state::stopped);
        begin_closing();
        try
        {
            never_ran.reserve(room_for_queued()); // before any task leaves the queue
            taken = take_queued([](const task_type&, time_point) { return true; }, failure);
        }
        catch (...) // out of memory: every task stays queued, for the next call
        {
            failure = std::current_exception();
        }
        for (task_ptr& t : taken) // in due order
        {
            (void)t->end_moves(false); // no move of a deadline's wait succeeds now (see shutdown())
            t->disown();               // the handle decides now; the pool may be gone by then
            // An executor function is not handed back: it may hold the pool's own executor (a
            // strand's next turn, a coroutine's step), which must not outlive the pool.
            if (t->state() == future_state::pending && !t->completes_handler() &&
                !t->is_executor_function() &&
                never_ran.size() < never_ran.capacity()) // no room (racing pushes): cancelled
            {
                never_ran.push_back(task_handle_type(t.detach()));
            }
        }
        ++drops_under_way_;
    }
    // Without the lock: what the tasks left over and the running tasks' stop callbacks do may
    // shut the pool down again. Left over: cancelled while queued (its future knows already), an
    // asynchronous operation, whose handler learns of the shutdown now, an executor function,
    // destroyed unrun now, or a task with no room to be handed back.
    {
        const drop_under_way dropping(*this);
        for (task_ptr& t : taken)
        {
            if (t)
                retire_cancelled(std::move(t));
        }
    }
    stop_.request_stop();
    wait_for_drops();
    if (failure)
        std::rethrow_exception(failure);
    return never_ran;
}

template <class Clock>
basic_scheduled_thread_pool<Clock>::drop_under_way::~drop_under_way()
{
    std::lock_guard lock(pool_.shutdown_mutex_);
    if (--pool_.drops_under_way_ == 0)
        pool_.drops_ended_.notify_all();
}

template <class Clock>
void basic_scheduled_thread_pool<Clock>::wait_for_drops()
{
    if (detail::thread_scope<drop_tag>::inside(this))
        return; // it would wait for itself
    std::unique_lock lock(shutdown_mutex_);
    drops_ended_.wait(lock, [this] { return drops_under_way_ == 0; });
}

template <class Clock>
bool basic_scheduled_thread_pool<Clock>::is_shutdown() const noexcept
{
    return state_.load() != run_state::running;
}

template <class Clock>
bool basic_scheduled_thread_pool<Clock>::is_terminated() const noexcept
{
    std::lock_guard lock(termination_mutex_);
    return terminated_;
}

template <class Clock>
void basic_scheduled_thread_pool<Clock>::await_termination()
{
    std::unique_lock lock(termination_mutex_);
    terminated_cv_.wait(lock, [this] { return terminated_; });
}

template <class Clock>
template <class R, bool Periodic, class F, class Schedule>
auto basic_scheduled_thread_pool<Clock>::make_and_queue(
    F&& f, time_point due, detail::period_kind kind, const Schedule& schedule, bool unobserved)
    -> future_type<R>
{
    return decorate(std::forward<F>(f), [&]<class Body>(Body&& body) {
        using task_impl = detail::task_impl<std::decay_t<Body>, R, Clock, Periodic>;
        // Two references: the future's, and the runner's, which queue_new() hands on.
        task_impl* t = task_impl::create({}, std::forward<Body>(body), kind, schedule, 2,
                                         registration_.number());
        future_type<R> future(t);
        if (unobserved)
            t->mark_unobserved();
        queue_new(*t, due);
        return future;
    });
}

template <class Clock>
template <class F, class Allocator>
void basic_scheduled_thread_pool<Clock>::queue_function(F&& f, const Allocator& a)
{
    using function = std::decay_t<F>;
    if constexpr (detail::takes_stop_token<function>)
        queue_function(detail::without_stop_token<function>{std::forward<F>(f)}, a);
    else
    {
        decorate(std::forward<F>(f), [&]<class Body>(Body&& body) {
            using stored = decltype(detail::stored_with(a, std::forward<Body>(body)));
            using function_body = detail::executor_function<stored>;
            using task_impl = detail::task_impl<function_body, void, Clock, false>;
            // One reference, the runner's, which queue_new() hands on: nothing else waits for
            // the outcome.
            task_impl* t = task_impl::create(
                {}, function_body{detail::stored_with(a, std::forward<Body>(body))},
                detail::period_kind::one_shot, detail::no_schedule{}, 1, registration_.number());
            queue_new(*t, Clock::now());
        });
    }
}

template <class Clock>
template <class F, class Make>
decltype(auto) basic_scheduled_thread_pool<Clock>::decorate(F&& f, Make make)
{
    if (options_.decorate_task)
    {
        if (task_wrapper wrapper = options_.decorate_task())
        {
            return make(detail::decorated<std::decay_t<F>, task_wrapper>(std::forward<F>(f),
                                                                         std::move(wrapper)));
        }
    }
    return make(std::forward<F>(f));
}

template <class Clock>
bool basic_scheduled_thread_pool<Clock>::queue_new(task_type& t, time_point due)
{
    bool queued = false;
    try
    {
        // Checked under the queue's lock (or its far tier's shard lock): a shutdown stores the
        // state before it drains the queue under every lock, and the pool goes idle only under
        // every lock (stop_if_idle()), so either the task is found there (and the policies
        // applied to it) or the shutdown is seen here. So is a cancel through an operation's slot,
        // which may come from another thread as it is queued: it finds the task queued, or the task
        // is not queued. Once queued, the task may run and be gone at any moment.
        queued = queue_.push_if(t, due, [&] { return accepts(t) && belongs_in_queue(t); });
    }
    catch (...)
    {
        t.disown();
        t.release_body();
        t.release();
        throw;
    }
    if (!queued) // shut down, or cancelled: reject() tells an operation's handler which
        reject(t);
    return queued;
}

template <class Clock>
bool basic_scheduled_thread_pool<Clock>::accepts(const task_type& t) const noexcept
{
    switch (state_.load())
    {
    case run_state::running:
        return true;
    case run_state::shutdown:
        // Once idle, the workers are gone or going: nothing could run the function.
        return (pending_.load() & idle_bit) == 0 && t.is_executor_function();
    case run_state::stopped:
        break;
    }
    return false;
}

template <class Clock>
void basic_scheduled_thread_pool<Clock>::reject(task_type& t)
{
    t.disown();
    task_ptr runner(&t, false); // takes the runner's reference
    // An asynchronous operation: its handler learns of the shutdown. An executor function is
    // destroyed without running, as in a stopped Asio execution context.
    if (t.completes_handler() || t.is_executor_function())
    {
        retire_cancelled(std::move(runner));
        return;
    }
    switch (options_.rejection)
    {
    case rejection_policy::abort:
        retire_cancelled(std::move(runner));
        throw rejected_execution(error::shutdown, "scheduled_thread_pool: shut down");
    case rejection_policy::caller_runs:
        run_on_caller(std::move(runner));
        return;
    case rejection_policy::discard:
    case rejection_policy::discard_oldest:
        retire_cancelled(std::move(runner));
        return;
    }
}

template <class Clock>
void basic_scheduled_thread_pool<Clock>::run_on_caller(task_ptr t) noexcept
{
    // A task that this pool refuses while this thread runs one of its refused tasks (a task that
    // schedules itself again) would run inside that run, and so on without end: it is discarded
    // instead. Another pool's still runs.
    using caller_run = detail::thread_scope<caller_run_tag>;
    if (caller_run::inside(this))
    {
        retire_cancelled(std::move(t));
        return;
    }
    const detail::run_outcome outcome = [&] {
        const caller_run here(this);
        return t->run(std::stop_token());
    }();
    if (outcome.error)
        report_failure(outcome.error, carries_failure(*t));
    retire_cancelled(std::move(t)); // ends a periodic task: nothing will run it again
}

template <class Clock>
void basic_scheduled_thread_pool<Clock>::worker_main(std::size_t index)
{
    detail::this_thread_pool() = this;
    detail::name_this_thread(options_.thread_name, index);
    detail::wake_on_time();
    detail::call_hook(options_.on_thread_start, index);
    const std::stop_token stop = stop_.get_token();
    // Each task taken is counted as pending as it leaves the queue, and until the worker is done
    // with it (or, for a detached run, until the run comes back).
    const auto count_taken = [this](typename queue_type::node& n,
                                    typename queue_type::kept_place place) noexcept {
        taken(as_task(n), place);
    };
    while (typename queue_type::node* n = queue_.take(stop, count_taken))
    {
        if (run(task_ptr(static_cast<task_type*>(n), false), stop))
            finish_pending();
    }
    detail::call_hook(options_.on_thread_stop, index);
    release_termination();
}

template <class Clock>
void basic_scheduled_thread_pool<Clock>::release_termination() noexcept
{
    // The last hold and the mark go together: a hold taken and let go meanwhile, on another
    // thread, cannot mark the pool terminated while this one still has it.
    std::lock_guard lock(termination_mutex_);
    if (termination_holds_.fetch_sub(1) == 1)
    {
        terminated_ = true;
        terminated_cv_.notify_all();
    }
}

template <class Clock>
bool basic_scheduled_thread_pool<Clock>::run_led(typename queue_type::external_leader& leader,
                                                 typename queue_type::led_poll& poll,
                                                 std::size_t most)
{
    const auto count_taken = [this](typename queue_type::node& n,
                                    typename queue_type::kept_place place) noexcept {
        taken(as_task(n), place);
    };
    for (std::size_t ran = 0; ran < most; ++ran)
    {
        typename queue_type::node* const n = queue_.take_led(leader, count_taken, &poll);
        if (!n)
            return false;
        if (run(task_ptr(&as_task(*n), false), std::stop_token()))
            finish_pending();
    }
    poll.until = time_point::min(); // more may be due now: whoever goes on starts at once
    return true;
}

template <class Clock>
bool basic_scheduled_thread_pool<Clock>::run(task_ptr t, const std::stop_token& stop)
{
    if (t->state() != future_state::pending) // cancelled while queued, remove_on_cancel off
    {
        retire(std::move(t));
        return true;
    }
    if (!may_run(*t)) // Java: canRunInCurrentRunState
    {
        retire_cancelled(std::move(t));
        return true;
    }
    if (!t->due_after_all())
    {
        const time_point now = Clock::now();
        const time_point due = t->next_due(now);
        requeue(std::move(t), due);
        defer_lazy_heads(now);
        return true;
    }
    detail::call_hook(options_.before_execute);
    // Java's ScheduledFutureTask.run asks again once beforeExecute has run: a shutdown meanwhile
    // (from the hook, or another thread) that ends the task cancels it, and the hook's pair
    // follows.
    if (!may_run(*t))
    {
        retire_cancelled(std::move(t));
        detail::call_hook(options_.after_execute, std::exception_ptr());
        return true;
    }
    detail::run_outcome outcome = t->run(stop);
    if (outcome.detached) // the task took the runner's reference and calls finish_run()
    {
        (void)t.detach();
        return false;
    }
    after_run(std::move(t), std::move(outcome.error));
    return true;
}

template <class Clock>
void basic_scheduled_thread_pool<Clock>::defer_lazy_heads(time_point now) noexcept
{
    // A few a lock hold, so that others get the lock between; a bounded number of holds, so
    // that the thread soon goes back to the tasks that are due.
    constexpr std::size_t per_lock_hold = 16;
    constexpr int lock_holds = 16;
    const time_point before =
        detail::saturating_add(now, std::chrono::duration_cast<duration>(lazy_requeue_horizon));
    // Under the queue's lock, as requeue()'s check: once the pool is shut down, a task must go
    // back through that check (a wait pushed back to "never" then ends), so none is moved.
    const auto later_due = [this](typename queue_type::node& n) noexcept {
        task_type& t = as_task(n);
        return state_.load() == run_state::running && belongs_in_queue(t) ? t.lazy_due()
                                                                          : std::nullopt;
    };
    for (int i = 0;
         i < lock_holds && queue_.defer_heads(before, per_lock_hold, later_due) == per_lock_hold;
         ++i)
    {}
}

template <class Clock>
void basic_scheduled_thread_pool<Clock>::finish_run(task_type& t, std::exception_ptr error) noexcept
{
    t.set_owner(registration_.number()); // a detached run unsets it (see detail::owner_link)
    after_run(task_ptr(&t, false), std::move(error));
    finish_pending(); // the worker that detached the run left it counted
}

template <class Clock>
void basic_scheduled_thread_pool<Clock>::after_run(task_ptr t, std::exception_ptr error) noexcept
{
    std::optional<time_point> ended; // a fixed delay counts from the run's end, not the sink's
    if (error)                       // before the task may run again
    {
        if (t->is_periodic())
            ended = Clock::now();
        report_failure(error, carries_failure(*t));
    }
    // As in Java, a periodic task is back in the queue before after_execute runs, so that the
    // hook's own time does not delay the next run. A task that is done is let go after it: its
    // outcome (the same exception, perhaps) then goes to its handler with no copy left here.
    if (t->is_periodic() && t->state() == future_state::pending)
    {
        if (may_run(*t))
        {
            const time_point next = t->next_due(ended ? *ended : Clock::now());
            requeue(std::move(t), next);
        }
        else
            retire_cancelled(std::move(t));
        detail::call_hook(options_.after_execute, std::move(error));
    }
    else
    {
        detail::call_hook(options_.after_execute, std::move(error));
        error = nullptr; // the hook may have taken it by reference
        retire(std::move(t));
    }
}

template <class Clock>
void basic_scheduled_thread_pool<Clock>::report_failure(const std::exception_ptr& error,
                                                        bool carried) noexcept
{
    if (options_.error_sink)
        options_.error_sink(error);
    else if (!carried)
        detail::report_uncaught(options_.thread_name, error);
}

template <class Clock>
bool basic_scheduled_thread_pool<Clock>::carries_failure(const task_type& t) noexcept
{
    // A handler is always told; a future only if one is left (one dropped at once, as a
    // heartbeat's often is, carries nothing).
    return t.state() == future_state::exceptional && !t.unobserved() && !t.is_executor_function() &&
           (t.completes_handler() || t.held_elsewhere());
}

template <class Clock>
void basic_scheduled_thread_pool<Clock>::after_inline_run(std::exception_ptr error) noexcept
{
    if (error)
        report_failure(error, false);
    detail::call_hook(options_.after_execute, std::move(error));
}

template <class Clock>
void basic_scheduled_thread_pool<Clock>::requeue(task_ptr t, time_point due) noexcept
{
    bool queued = false;
    try
    {
        // Checked under the queue's lock (or a far shard's): a cancel or a shutdown that came
        // while the task ran either finds it queued (and takes it out) or is seen here. One due
        // "never" that a shut-down pool refuses ends there, unless it is a deadline's wait whose
        // owner has moved it since the runner read it (and waits for this push to move the entry
        // there): before, such a wait ended though the move had returned true (a review's
        // finding).
        auto allowed = [&] {
            return belongs_in_queue(*t) &&
                   (keeps_after_shutdown(*t, due) ||
                    (due == time_point::max() && may_run(*t) && !t->end_moves(true)));
        };
        // A periodic task keeps its place among tasks due at the same time, as Java's keeps its
        // sequence number; a deadline's wait pushed back takes a new one, as one pulled in does.
        queued = t->is_periodic() ? queue_.push_again_if(*t, due, t->place_kept(), allowed)
                                  : queue_.push_if(*t, due, allowed);
    }
    catch (...)
    {
        // It cannot run again: its future learns why, and so does the error sink (or std::cerr,
        // if no future carries it), as for any failure that ends a task.
        const std::exception_ptr error = std::current_exception();
        t->fail(error);
        if (t->state() == future_state::exceptional)
            report_failure(error, carries_failure(*t));
        retire(std::move(t));
        return;
    }
    if (queued)
        (void)t.detach(); // the queue holds the runner's reference now
    else
        retire_cancelled(std::move(t));
}

template <class Clock>
void basic_scheduled_thread_pool<Clock>::retire(task_ptr t, bool caller_holds) noexcept
{
    t->await_canceller(); // one still inside on_cancelled() keeps the pool
    // The caller's reference is still there if nothing but the library's code runs between its
    // cancel() and the release: the body's destructor may let go of it (a callable that keeps
    // alive what holds the very future being cancelled).
    const bool beside_own = caller_holds && t->body_goes_quietly();
    t->release_body();
    if (beside_own)
        t.detach()->release_beside_own();
    else
        t.reset();
}

template <class Clock>
void basic_scheduled_thread_pool<Clock>::retire_cancelled(task_ptr t) noexcept
{
    // Its future is told; no effect if it had been cancelled already. Every caller cancels for
    // the pool's shutdown.
    if (t->cancel(false))
        t->mark_shut_down();
    else
        t->shut_down_begun_completion(); // the run's second may_run() said no
    retire(std::move(t));
}

template <class Clock>
bool basic_scheduled_thread_pool<Clock>::may_run(const task_type& t) const noexcept
{
    switch (state_.load())
    {
    case run_state::running:
        return true;
    case run_state::shutdown:
        if (t.is_executor_function())
            return true;
        return t.is_periodic() ? options_.continue_existing_periodic_tasks_after_shutdown
                               : options_.execute_existing_delayed_tasks_after_shutdown;
    case run_state::stopped:
        break;
    }
    return false;
}

template <class Clock>
bool basic_scheduled_thread_pool<Clock>::keeps_after_shutdown(const task_type& t,
                                                              time_point due) const noexcept
{
    // A task due "never" would hold a shut-down pool open forever without running.
    return state_.load() == run_state::running || (may_run(t) && due != time_point::max());
}

template <class Clock>
bool basic_scheduled_thread_pool<Clock>::removes_cancelled(const task_type& t) const noexcept
{
    // Once shut down, a cancelled task left queued would only delay termination. An
    // asynchronous operation's handler is told at once whatever remove_on_cancel says.
    return options_.remove_on_cancel || state_.load() != run_state::running ||
           t.completes_handler();
}

template <class Clock>
bool basic_scheduled_thread_pool<Clock>::belongs_in_queue(const task_type& t) const noexcept
{
    return (t.state() == future_state::pending || !removes_cancelled(t)) && !t.context_closing();
}

template <class Clock>
void basic_scheduled_thread_pool<Clock>::on_cancelled(task_type& t, bool caller_holds) noexcept
{
    // Called by cancel() on any thread. Until t's cancel ends, the pool is still there: the
    // queue holds t (and whoever takes it out waits), or a runner does and waits.
    take_out_cancelled(
        t, [&]() noexcept { t.end_cancel(); }, caller_holds);
}

template <class Clock>
template <class Then>
void basic_scheduled_thread_pool<Clock>::take_out_cancelled(task_type& t,
                                                            Then then,
                                                            bool caller_holds) noexcept
{
    // It may be the last task of a shut-down pool: whether the pool is then idle is decided as
    // it leaves the queue, since from then on another thread may find the pool idle, let the
    // workers go and see the pool destroyed. Nothing of the pool's is touched after the removal
    // (retire() touches only the task), nor after then() for a task left where it was.
    std::stop_source idle(std::nostopstate);
    const bool taken = removes_cancelled(t) && queue_.remove(t, [&](bool emptied) noexcept {
        if (emptied)
            idle = become_idle();
    });
    then();
    if (taken)
        retire(task_ptr(&t, false), caller_holds);
    idle.request_stop();
}

template <class Clock>
template <class Predicate>
auto basic_scheduled_thread_pool<Clock>::take_queued(Predicate pred, std::exception_ptr& failure)
    -> std::vector<task_ptr>
{
    std::vector<task_ptr> tasks;
    try
    {
        // Room first: a task leaves the queue only into a place held for it (if there is none
        // after all, it stays queued).
        tasks.reserve(room_for_queued());
        const auto adopt = [&](typename queue_type::node* n) {
            tasks.emplace_back(&as_task(*n), false); // takes over the queue's reference
        };
        queue_.remove_if(
            [&](typename queue_type::node& n, time_point due) { return pred(as_task(n), due); },
            boost::make_function_output_iterator(adopt));
    }
    catch (...) // out of memory: the tasks not taken stay queued; those taken are handled
    {
        failure = std::current_exception();
    }
    return tasks;
}

template <class Clock>
void basic_scheduled_thread_pool<Clock>::taken(task_type& t,
                                               typename queue_type::kept_place place) noexcept
{
    take_pending();
    if (t.is_periodic())
        t.keep_place(place);
}

template <class Clock>
void basic_scheduled_thread_pool<Clock>::take_pending() noexcept
{
    pending_.fetch_add(1);
}

template <class Clock>
void basic_scheduled_thread_pool<Clock>::begin_closing() noexcept
{
    pending_.fetch_or(closing_bit);
    queue_.close_far_tier(); // from now on, a removal can tell the queue is empty
}

template <class Clock>
void basic_scheduled_thread_pool<Clock>::finish_pending() noexcept
{
    // On any thread (a tracked executor's release), which must touch nothing of the pool's once
    // another thread could find it idle. A running pool, or a count that stays above zero, needs
    // no lock: a shutdown that comes after this step sees it (closing_bit).
    std::size_t seen = pending_.load(std::memory_order_relaxed);
    while (seen != (closing_bit | 1))
    {
        if (pending_.compare_exchange_weak(seen, seen - 1))
            return;
    }
    // The last of a shut-down pool: the count reaches zero under the queue's locks, so that
    // whoever empties the queue later sees it, and with nothing queued the pool goes idle there.
    std::stop_source idle = queue_.under_locks([this](bool empty) noexcept {
        pending_.fetch_sub(1);
        return empty ? become_idle() : std::stop_source(std::nostopstate);
    });
    idle.request_stop();
}

template <class Clock>
void basic_scheduled_thread_pool<Clock>::stop_if_idle() noexcept
{
    std::stop_source idle = queue_.under_locks([this](bool empty) noexcept {
        return empty ? become_idle() : std::stop_source(std::nostopstate);
    });
    idle.request_stop();
}

template <class Clock>
std::stop_source basic_scheduled_thread_pool<Clock>::become_idle() noexcept
{
    // Only from zero: a task held or a tracked executor counted meanwhile keeps the pool busy,
    // and its finish_pending() decides. Once set, the bit makes accepts() refuse executor
    // functions, so that one submitted as the pool goes idle is refused rather than stranded in
    // the queue of a pool whose workers are leaving.
    std::size_t none = closing_bit;
    if (!pending_.compare_exchange_strong(none, closing_bit | idle_bit))
        return std::stop_source(std::nostopstate);
    return stop_; // a copy: the pool may be destroyed as soon as the queue's lock is free
}

} // namespace sched

SCHED_VISIBILITY_END

#endif // SCHED_IMPL_SCHEDULED_THREAD_POOL_HPP
