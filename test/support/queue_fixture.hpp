#ifndef SCHED_TEST_SUPPORT_QUEUE_FIXTURE_HPP
#define SCHED_TEST_SUPPORT_QUEUE_FIXTURE_HPP

#include <sched/delayed_work_queue.hpp>
#include <sched/manual_clock.hpp>

#include <deque>
#include <vector>

#include "manual_clock_fixture.hpp"
#include "test_task.hpp"

namespace sched::test {

// A queue on the manual clock and the tasks a test makes for it.
struct queue_fixture : manual_clock_fixture
{
    using queue_type = basic_delayed_work_queue<manual_clock>;
    using node = queue_type::node;

    // Declared before the queue: tasks must outlive their stay in it, and a test may end with
    // tasks still queued.
    std::deque<test_task> storage;
    queue_type queue;

    test_task& make(int id) { return storage.emplace_back(id); }

    // The ids of every task due now, in the order poll() gives them.
    std::vector<int> poll_all()
    {
        std::vector<int> ids;
        while (node* n = queue.poll())
            ids.push_back(id_of(n));
        return ids;
    }
};

} // namespace sched::test

#endif
