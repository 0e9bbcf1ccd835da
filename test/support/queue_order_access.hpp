#ifndef SCHED_TEST_SUPPORT_QUEUE_ORDER_ACCESS_HPP
#define SCHED_TEST_SUPPORT_QUEUE_ORDER_ACCESS_HPP

#include <sched/delayed_work_queue.hpp>

#include <cstdint>

namespace sched::detail {

// Brings a queue's main heap to the end of its push orders, which a heap otherwise reaches only
// after 2^44 pushes: the next ones make it renumber its tasks.
template <class Queue>
struct queue_order_access
{
    static constexpr std::uint64_t order_limit = Queue::order_limit;

    // The next push or move takes the order `left` before the last there is.
    static void leave_orders(Queue& queue, std::uint64_t left)
    {
        queue.heap_.set_next_order(order_limit - left);
    }
};

} // namespace sched::detail

#endif
