#ifndef SCHED_DETAIL_DEADLINE_WAIT_HPP
#define SCHED_DETAIL_DEADLINE_WAIT_HPP

#include <sched/scheduled_thread_pool.hpp>

#include <sched/detail/pool_access.hpp>
#include <sched/detail/task.hpp>

#include <algorithm>
#include <atomic>
#include <limits>
#include <thread>

namespace sched::detail {

// The wait of a basic_deadline: a queue node whose expiry moves without a handler invocation.
//
// Moving it later is lazy: one atomic exchange, and the node stays where it is in the queue.
// When it comes due there, the runner finds the expiry still ahead (due_after_all()) and queues
// it again at the expiry, so a deadline pushed back a thousand times before it falls costs one
// extra pass through the queue. Moving it earlier moves the node in place (O(log n)), since the
// queue would otherwise wake too late.
//
// Moving and firing have one winner: the runner fires only by swapping the expiry for a "fired"
// mark while it is due, and a move succeeds only if it swaps in its time before that.
template <class Clock>
class deadline_wait : public task<Clock>
{
public:
    using time_point = typename Clock::time_point;
    using duration = typename Clock::duration;

    // Sets the expiry to `t`; returns false if the wait has fired (or is firing) or has ended.
    bool move_expiry(basic_scheduled_thread_pool<Clock>& pool, time_point t) noexcept
    {
        const rep wanted = std::max(t.time_since_epoch().count(), fired + 1);
        rep was = expiry_.load(std::memory_order_acquire);
        do
        {
            if (was == fired)
                return false;
        } while (!expiry_.compare_exchange_weak(was, wanted, std::memory_order_acq_rel,
                                                std::memory_order_acquire));
        if (wanted < was)
        {
            // Earlier: move the node now. A runner holding it (to queue it again at the old
            // expiry) puts it back in a moment; then move it.
            while (!pool_access::reschedule(pool, *this, t) &&
                   expiry_.load(std::memory_order_acquire) != fired &&
                   this->state() == future_state::pending)
                std::this_thread::yield();
        }
        return this->state() == future_state::pending;
    }

    bool due_after_all() noexcept override
    {
        const rep now = Clock::now().time_since_epoch().count();
        rep expiry = expiry_.load(std::memory_order_acquire);
        while (expiry <= now)
        {
            if (expiry_.compare_exchange_weak(expiry, fired, std::memory_order_acq_rel,
                                              std::memory_order_acquire))
                return true;
        }
        return false;
    }

protected:
    using task<Clock>::task;

    // Before the node is queued.
    void set_expiry(time_point t) noexcept
    {
        expiry_.store(std::max(t.time_since_epoch().count(), fired + 1), std::memory_order_relaxed);
    }

    // Runner only, when due_after_all() said no.
    time_point expiry() const noexcept
    {
        return time_point(duration(expiry_.load(std::memory_order_acquire)));
    }

private:
    using rep = typename duration::rep;
    static constexpr rep fired = std::numeric_limits<rep>::min();

    std::atomic<rep> expiry_{std::numeric_limits<rep>::max()};
};

} // namespace sched::detail

#endif // SCHED_DETAIL_DEADLINE_WAIT_HPP
