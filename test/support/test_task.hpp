#ifndef SCHED_TEST_SUPPORT_TEST_TASK_HPP
#define SCHED_TEST_SUPPORT_TEST_TASK_HPP

#include <sched/delayed_work_queue.hpp>
#include <sched/manual_clock.hpp>

namespace sched::test {

// A queue node that knows its name, for tests of the queue on its own.
template <class Clock = manual_clock>
struct basic_test_task : basic_delayed_work_queue<Clock>::node
{
    explicit basic_test_task(int id = 0) : id(id) {}
    int id;
};

using test_task = basic_test_task<>;

// The id of a task the queue gave back, or -1 for none.
inline int id_of(basic_delayed_work_queue<manual_clock>::node* n)
{
    return n == nullptr ? -1 : static_cast<basic_test_task<manual_clock>*>(n)->id;
}

inline int id_of(basic_delayed_work_queue<std::chrono::steady_clock>::node* n)
{
    return n == nullptr ? -1 : static_cast<basic_test_task<std::chrono::steady_clock>*>(n)->id;
}

} // namespace sched::test

#endif
