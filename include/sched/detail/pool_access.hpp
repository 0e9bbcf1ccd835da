#ifndef SCHED_DETAIL_POOL_ACCESS_HPP
#define SCHED_DETAIL_POOL_ACCESS_HPP

#include <sched/scheduled_thread_pool.hpp>

#include <sched/detail/task.hpp>
#include <sched/detail/visibility.hpp>

#include <memory>
#include <utility>

SCHED_VISIBILITY_BEGIN

namespace sched::detail {

// What the Asio front needs of a pool beyond its public interface.
struct pool_access
{
    // The number that the pool's tasks name it by (see owner_registry).
    template <class Clock>
    static owner_registry::number owner_number(basic_scheduled_thread_pool<Clock>& pool) noexcept
    {
        return pool.registration_.number();
    }

    // Returns make(work), or make(the work decorated) if the pool's decorate_task hook gives a
    // wrapper (see basic_scheduled_thread_pool::decorate()).
    template <class Clock, class F, class Make>
    static decltype(auto) decorate(basic_scheduled_thread_pool<Clock>& pool, F&& work, Make make)
    {
        return pool.decorate(std::forward<F>(work), std::move(make));
    }

    // Queues a new task holding the runner's reference, which the pool takes over; returns
    // whether it was queued. After shutdown, a task that completes a handler ends with
    // error::shutdown.
    template <class Clock>
    static bool
    queue(basic_scheduled_thread_pool<Clock>& pool, task<Clock>& t, typename Clock::time_point due)
    {
        return pool.queue_new(t, due);
    }

    // Takes a cancelled task out of the queue at once (what cancel() does, for a task that was
    // cancelled before it was queued).
    template <class Clock>
    static void withdraw(basic_scheduled_thread_pool<Clock>& pool, task<Clock>& t) noexcept
    {
        pool.take_out_cancelled(t, []() noexcept {});
    }

    // Moves a queued task to `due` in place; false if it is not queued (it ran, or is running).
    template <class Clock>
    static bool reschedule(basic_scheduled_thread_pool<Clock>& pool,
                           task<Clock>& t,
                           typename Clock::time_point due) noexcept
    {
        return pool.queue_.reschedule(t, due);
    }

    // Takes every queued task of `context` out of the queue and ends it as in a shutdown.
    // Returns false if memory ran out: some may still be queued.
    template <class Clock>
    static bool abandon_context(basic_scheduled_thread_pool<Clock>& pool,
                                const void* context) noexcept
    {
        // They may be a shut-down pool's last tasks: it terminates only once they are ended.
        const typename basic_scheduled_thread_pool<Clock>::termination_hold hold(pool);
        std::exception_ptr failure; // out of memory: what could not be taken stays queued
        const auto in_context = [context](const task<Clock>& t, typename Clock::time_point) {
            return t.context() == context;
        };
        for (auto& t : pool.take_queued(in_context, failure))
            pool.retire_cancelled(std::move(t));
        pool.stop_if_idle();
        return !failure;
    }

    // For an io_context's timer that leads some of the pool's tasks, once it has woken: runs
    // those that are due on this thread, `most` at most (returns whether it stopped there);
    // `poll` says whether this thread polls the clock for the next (see
    // basic_delayed_work_queue::take_led()).
    template <class Clock>
    static bool run_led(basic_scheduled_thread_pool<Clock>& pool,
                        typename basic_delayed_work_queue<Clock>::external_leader& leader,
                        typename basic_delayed_work_queue<Clock>::led_poll& poll,
                        std::size_t most)
    {
        return pool.run_led(leader, poll, most);
    }

    // Calls f() under the queue's lock and makes sure `leader` no longer leads.
    template <class Clock, class F>
    static void dismiss(basic_scheduled_thread_pool<Clock>& pool,
                        typename basic_delayed_work_queue<Clock>::external_leader& leader,
                        F f) noexcept
    {
        pool.queue_.dismiss(leader, f);
    }

    template <class Clock>
    static const std::shared_ptr<owner_link<Clock>>&
    link(basic_scheduled_thread_pool<Clock>& pool) noexcept
    {
        return pool.link_;
    }
};

} // namespace sched::detail

SCHED_VISIBILITY_END

#endif // SCHED_DETAIL_POOL_ACCESS_HPP
