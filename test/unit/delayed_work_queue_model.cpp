// The queue against an independent model: Boost.Heap's mutable d-ary heap keyed by (due time,
// push order) must agree with it on every operation of a long random sequence.

#include <sched/delayed_work_queue.hpp>

#include <boost/heap/d_ary_heap.hpp>
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <iterator>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "support/manual_clock_fixture.hpp"
#include "support/test_task.hpp"

using namespace std::chrono_literals;
using sched::manual_clock;
using sched::test::id_of;
using sched::test::test_task;

namespace {

using queue_type = sched::basic_delayed_work_queue<manual_clock>;

struct model_entry
{
    manual_clock::time_point due;
    std::uint64_t order;
    int id;
};

struct model_later // Boost.Heap is a max-heap: "less" means "comes out later"
{
    bool operator()(const model_entry& a, const model_entry& b) const
    {
        return a.due > b.due || (a.due == b.due && a.order > b.order);
    }
};

using model_heap = boost::heap::d_ary_heap<model_entry,
                                           boost::heap::arity<4>,
                                           boost::heap::mutable_<true>,
                                           boost::heap::compare<model_later>>;

struct model_fixture : sched::test::manual_clock_fixture
{
    static constexpr int task_count = 500;

    std::vector<std::unique_ptr<test_task>> tasks; // outlives the queue
    queue_type queue;
    model_heap model;
    std::vector<model_heap::handle_type> handles;
    std::vector<bool> queued;
    // When each task was last due once it left the queue (the epoch before its first push).
    std::vector<manual_clock::time_point> last_due;
    std::uint64_t pushes = 0;

    model_fixture() : handles(task_count), queued(task_count, false), last_due(task_count)
    {
        for (int i = 0; i < task_count; ++i)
            tasks.push_back(std::make_unique<test_task>(i));
    }

    void push(int id, manual_clock::duration delay)
    {
        queue.push(*tasks[static_cast<std::size_t>(id)], delay);
        handles[static_cast<std::size_t>(id)] =
            model.push(model_entry{manual_clock::now() + delay, pushes++, id});
        queued[static_cast<std::size_t>(id)] = true;
    }

    // Takes out everything due, checking that queue and model agree on the order.
    void poll_due()
    {
        for (;;)
        {
            const int got = id_of(queue.poll());
            const bool model_due = !model.empty() && model.top().due <= manual_clock::now();
            BOOST_TEST_REQUIRE((got >= 0) == model_due);
            if (got < 0)
                return;
            BOOST_TEST_REQUIRE(got == model.top().id);
            leaves(got);
        }
    }

    // The model's top leaves, as its task has left the queue.
    void leaves(int id)
    {
        last_due[static_cast<std::size_t>(id)] = model.top().due;
        model.pop();
        queued[static_cast<std::size_t>(id)] = false;
    }

    // The queue's due time of a task, and its last one, agree with the model.
    void check_due_times(int id)
    {
        const auto i = static_cast<std::size_t>(id);
        const std::optional<manual_clock::time_point> due = queue.due_time(*tasks[i]);
        const std::optional<manual_clock::time_point> last = tasks[i]->last_due_time();
        if (queued[i])
        {
            BOOST_TEST_REQUIRE((due == (*handles[i]).due));
            BOOST_TEST_REQUIRE(!last);
        }
        else
        {
            BOOST_TEST_REQUIRE(!due);
            BOOST_TEST_REQUIRE((last == last_due[i]));
        }
    }

    void reschedule(int id, manual_clock::duration delay)
    {
        const auto i = static_cast<std::size_t>(id);
        const auto due = manual_clock::now() + delay;
        BOOST_TEST_REQUIRE(queue.reschedule(*tasks[i], due) == queued[i]);
        if (queued[i]) // it comes after the tasks already queued for that time
        {
            model.erase(handles[i]);
            handles[i] = model.push(model_entry{due, pushes++, id});
        }
    }

    // A long random sequence of every operation, checked against the model throughout.
    void run_random_operations()
    {
        std::mt19937_64 random(20261122); // fixed seed: a failure reproduces
        std::uniform_int_distribution<int> pick_task(0, task_count - 1);
        std::uniform_int_distribution<int> pick_op(0, 99);
        // Few distinct delays, so that equal due times (FIFO) are common.
        std::uniform_int_distribution<int> pick_delay(0, 40);
        constexpr int operations = 200000;
        int removes = 0, reschedules = 0, pops = 0, drains = 0;
        for (int op = 0; op < operations; ++op)
        {
            const int kind = pick_op(random);
            const int id = pick_task(random);
            const auto i = static_cast<std::size_t>(id);
            if (kind < 45)
            {
                if (!queued[i])
                    push(id, std::chrono::milliseconds(pick_delay(random) * 50));
            }
            else if (kind < 50)
            {
                reschedule(id, std::chrono::milliseconds(pick_delay(random) * 50));
                ++reschedules;
            }
            else if (kind < 75)
            {
                // remove(): true exactly for queued tasks.
                BOOST_TEST_REQUIRE(queue.remove(*tasks[i]) == queued[i]);
                if (queued[i])
                {
                    last_due[i] = (*handles[i]).due;
                    model.erase(handles[i]);
                    queued[i] = false;
                    ++removes;
                }
            }
            else if (kind < 90)
            {
                manual_clock::advance(std::chrono::milliseconds(pick_delay(random)));
                poll_due();
                ++pops;
            }
            else if (kind < 97)
            {
                BOOST_TEST_REQUIRE(id_of(queue.peek()) == (model.empty() ? -1 : model.top().id));
                BOOST_TEST_REQUIRE(queue.size() == model.size());
                check_due_times(id);
            }
            else
            {
                // drain(): the due prefix of the model, in order, at most 5.
                manual_clock::advance(5ms);
                std::vector<queue_type::node*> out;
                queue.drain(std::back_inserter(out), 5);
                for (queue_type::node* n : out)
                {
                    BOOST_TEST_REQUIRE(!model.empty());
                    BOOST_TEST_REQUIRE(id_of(n) == model.top().id);
                    BOOST_TEST_REQUIRE((model.top().due <= manual_clock::now()));
                    leaves(id_of(n));
                }
                BOOST_TEST_REQUIRE(
                    (out.size() == 5u || model.empty() || model.top().due > manual_clock::now()));
                ++drains;
            }
        }
        manual_clock::advance(1h);
        poll_due();
        BOOST_TEST(queue.empty());
        BOOST_TEST(model.empty());
        BOOST_TEST_MESSAGE(operations << " operations: " << removes << " removes, " << reschedules
                                      << " reschedules, " << pops << " poll rounds, " << drains
                                      << " drains");
        BOOST_TEST(removes > 10000); // the mix really exercised remove()
    }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(test_delayed_work_queue, model_fixture)

BOOST_AUTO_TEST_CASE(random_operations_agree_with_a_boost_heap_model)
{
    run_random_operations();
}

// Most pushes go to the far tier (one shard: a single thread pushes), and its tasks move while
// others are pushed, removed, rescheduled and taken around them.
BOOST_AUTO_TEST_CASE(random_operations_agree_with_a_boost_heap_model_with_a_far_tier)
{
    queue.set_far_tier(300ms, 3);
    run_random_operations();
}

BOOST_AUTO_TEST_SUITE_END()
