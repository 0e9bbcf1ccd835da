#ifndef SCHED_TEST_SUPPORT_QUEUE_ACCESS_HPP
#define SCHED_TEST_SUPPORT_QUEUE_ACCESS_HPP

#include <sched/delayed_work_queue.hpp>

#include <cstdint>

namespace sched::detail {

// What the tests see of a queue's insides: where a task waits, and the end of the main heap's
// push orders.
template <class Queue>
struct queue_access
{
    // Whether `task` waits in the far tier (see set_far_tier()) rather than the main heap.
    static bool in_far_tier(const typename Queue::node& task)
    {
        return Queue::far_number(task) != 0;
    }

    static constexpr std::uint64_t order_limit = Queue::order_limit;

    // Brings the main heap to the end of its push orders, which a heap otherwise reaches only
    // after 2^44 pushes: the next push or move takes the order `left` before the last there is,
    // and the ones after make it renumber its tasks.
    static void leave_orders(Queue& queue, std::uint64_t left)
    {
        queue.heap_.set_next_order(order_limit - left);
    }
};

} // namespace sched::detail

#endif
