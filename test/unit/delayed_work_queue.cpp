#include <sched/delayed_work_queue.hpp>

#include <sched/detail/background_unmap.hpp>
#include <sched/detail/mapped_memory.hpp>
#include <sched/detail/recycler.hpp>

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <future>
#include <iterator>
#include <limits>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <thread>
#include <utility>
#include <vector>

#include "support/blocking_call.hpp"
#include "support/millisecond_clock.hpp"
#include "support/queue_access.hpp"
#include "support/queue_fixture.hpp"
#include "support/resident_memory.hpp"
#include "support/silent_clock.hpp"
#include "support/wait.hpp"

using namespace std::chrono_literals;
using sched::manual_clock;
using sched::test::blocking_call;
using sched::test::id_of;
using sched::test::test_task;

namespace {

using queue_type = sched::basic_delayed_work_queue<manual_clock>;
using node = queue_type::node;

using sched::test::queue_fixture;

// A precondition: the queue maps its large heap arrays from the system (not under
// AddressSanitizer, whose allocator keeps freed blocks in quarantine anyway).
boost::test_tools::assertion_result maps_large_arrays(boost::unit_test::test_unit_id)
{
    boost::test_tools::assertion_result result(sched::detail::maps_memory);
    result.message() << "large arrays come from operator new here";
    return result;
}

// As after a program has freed a block of 24 MB: glibc serves blocks below that from its heap from
// then on (its mmap threshold rises to the size of the mapped blocks freed), and keeps them
// resident once freed, until malloc_trim().
void raise_mallocs_mmap_threshold()
{
    void* large = std::malloc(std::size_t(24) << 20);
    BOOST_TEST_REQUIRE(large != nullptr);
    std::memset(large, 1, std::size_t(24) << 20);
    std::free(large);
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(test_delayed_work_queue, queue_fixture)

BOOST_AUTO_TEST_CASE(poll_returns_nothing_before_the_head_is_due)
{
    auto& a = make(1);
    queue.push(a, 10s);
    BOOST_TEST(queue.poll() == nullptr);
    manual_clock::advance(9s);
    BOOST_TEST(queue.poll() == nullptr);
    manual_clock::advance(1s);
    BOOST_TEST(id_of(queue.poll()) == 1);
    BOOST_TEST(queue.empty());
}

BOOST_AUTO_TEST_CASE(tasks_come_out_in_due_order)
{
    auto& a = make(1);
    auto& b = make(2);
    auto& c = make(3);
    auto& d = make(4);
    queue.push(a, 30s);
    queue.push(b, 10s);
    queue.push(c, 40s);
    queue.push(d, 20s);
    manual_clock::advance(40s);
    BOOST_TEST(poll_all() == (std::vector<int>{2, 4, 1, 3}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(equal_due_times_come_out_first_in_first_out)
{
    auto& tasks = storage;
    for (int i = 0; i < 100; ++i)
        tasks.emplace_back(i);
    for (auto& t : tasks) // interleave another due time to exercise reordering
        queue.push(t, t.id % 2 == 0 ? 5s : 3s);
    manual_clock::advance(5s);
    std::vector<int> expected;
    for (int i = 1; i < 100; i += 2)
        expected.push_back(i);
    for (int i = 0; i < 100; i += 2)
        expected.push_back(i);
    BOOST_TEST(poll_all() == expected, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(push_reports_whether_the_task_became_the_head)
{
    auto& a = make(1);
    auto& b = make(2);
    auto& c = make(3);
    auto& d = make(4);
    BOOST_TEST(queue.push(a, 10s));  // first: the head
    BOOST_TEST(!queue.push(b, 20s)); // behind the head
    BOOST_TEST(!queue.push(c, 10s)); // equal due time: FIFO puts it behind
    BOOST_TEST(queue.push(d, 5s));   // earlier: the new head
    BOOST_TEST(id_of(queue.peek()) == 4);
}

BOOST_AUTO_TEST_CASE(push_if_adds_only_what_its_predicate_allows)
{
    auto& a = make(1);
    auto& b = make(2);
    int asked = 0;
    BOOST_TEST(!queue.push_if(a, at(10s), [&] {
        ++asked;
        return false;
    }));
    BOOST_TEST(queue.empty());
    BOOST_TEST(queue.push_if(a, at(10s), [&] {
        ++asked;
        return true;
    }));
    BOOST_TEST(asked == 2);
    BOOST_CHECK_THROW(
        queue.push_if(b, at(5s), []() -> bool { throw std::runtime_error("refused"); }),
        std::runtime_error);
    BOOST_TEST(queue.size() == 1u);
    BOOST_TEST(id_of(queue.peek()) == 1);
    BOOST_TEST((queue.due_time(a) == at(10s)));
}

BOOST_AUTO_TEST_CASE(pushing_a_queued_task_throws_and_changes_nothing)
{
    auto& a = make(1);
    queue.push(a, 10s);
    BOOST_CHECK_THROW(queue.push(a, 1s), std::invalid_argument);
    queue_type other;
    BOOST_CHECK_THROW(other.push(a, 1s), std::invalid_argument);
    BOOST_TEST(queue.size() == 1u);
    BOOST_TEST(other.empty());
    BOOST_TEST((queue.due_time(a) == at(10s)));
}

BOOST_AUTO_TEST_CASE(negative_delay_is_due_now)
{
    auto& a = make(1);
    manual_clock::advance(100s);
    queue.push(a, -5s);
    BOOST_TEST((queue.due_time(a) == at(100s)));
    BOOST_TEST(id_of(queue.poll()) == 1);
}

BOOST_AUTO_TEST_CASE(a_nan_delay_throws_invalid_argument)
{
    auto& a = make(1);
    const double nan = std::numeric_limits<double>::quiet_NaN();
    BOOST_CHECK_THROW(queue.push(a, std::chrono::duration<double>(nan)), std::invalid_argument);
    BOOST_TEST(queue.empty());
}

// A delay is rounded up to the clock's tick, whatever its unit: a task is never due before its
// delay has passed. Before, a delay in a unit that is not a whole number of nanoseconds, or a
// fraction in floating point, was truncated (a review's probe: 1.5 ns ran 1 ns on).
BOOST_AUTO_TEST_CASE(a_delay_that_is_not_a_whole_number_of_ticks_rounds_up)
{
    auto& a = make(1);
    auto& b = make(2);
    queue.push(a, std::chrono::duration<double, std::micro>(0.0015));
    queue.push(b, std::chrono::duration<std::int64_t, std::ratio<1, 3>>(1)); // a third of a second
    BOOST_TEST((queue.due_time(a) == at(2ns)));
    BOOST_TEST((queue.due_time(b) == at(333'333'334ns)));
    manual_clock::advance(1ns);
    BOOST_TEST(queue.poll() == nullptr);
    manual_clock::advance(1ns);
    BOOST_TEST(id_of(queue.poll()) == 1);
    manual_clock::advance_to(at(333'333'333ns));
    BOOST_TEST(queue.poll() == nullptr);
    manual_clock::advance(1ns);
    BOOST_TEST(id_of(queue.poll()) == 2);
}

// At the end of a manual clock's time, a task due never stays queued, and one due now is due
// (the clock stops one tick short of time_point::max(), which is never: a task pushed with no
// delay there never ran; a review's probe).
BOOST_AUTO_TEST_CASE(a_never_due_task_stays_queued_even_at_the_end_of_time)
{
    auto& a = make(1);
    auto& b = make(2);
    auto& c = make(3);
    queue.push(a, manual_clock::duration::max());
    manual_clock::advance(manual_clock::duration::max()); // saturates at end_of_time()
    queue.push(b, manual_clock::time_point{});            // long overdue
    queue.push(c, 0s);                                    // due now
    BOOST_TEST(id_of(queue.poll()) == 2);
    BOOST_TEST(id_of(queue.poll()) == 3);
    BOOST_TEST(queue.poll() == nullptr);
    std::vector<node*> out;
    BOOST_TEST(queue.drain(std::back_inserter(out)) == 0u);
}

BOOST_AUTO_TEST_CASE(huge_delays_saturate_to_never)
{
    auto& a = make(1);
    auto& b = make(2);
    auto& c = make(3);
    auto& d = make(4);
    manual_clock::advance(1000s);
    queue.push(a, std::chrono::hours::max());
    queue.push(b, manual_clock::duration::max());
    queue.push(c, std::chrono::duration<double>(1e300));
    queue.push(d, 1s);
    BOOST_TEST((queue.due_time(a) == manual_clock::time_point::max()));
    BOOST_TEST((queue.due_time(b) == manual_clock::time_point::max()));
    BOOST_TEST((queue.due_time(c) == manual_clock::time_point::max()));
    // "Never" does not hold back what is due.
    manual_clock::advance(1s);
    BOOST_TEST(poll_all() == (std::vector<int>{4}), boost::test_tools::per_element());
    manual_clock::advance(std::chrono::hours(24 * 365 * 100));
    BOOST_TEST(queue.poll() == nullptr);
    BOOST_TEST(queue.size() == 3u);
}

BOOST_AUTO_TEST_CASE(remove_takes_out_the_head_a_middle_and_the_last_entry)
{
    auto& tasks = storage;
    for (int i = 0; i < 20; ++i)
        tasks.emplace_back(i);
    for (auto& t : tasks)
        queue.push(t, std::chrono::seconds(t.id));
    BOOST_TEST(queue.remove(tasks[0]));  // the head
    BOOST_TEST(queue.remove(tasks[7]));  // somewhere in the middle
    BOOST_TEST(queue.remove(tasks[19])); // the last in due order
    BOOST_TEST(!queue.remove(tasks[7])); // no longer queued
    BOOST_TEST(queue.size() == 17u);
    manual_clock::advance(100s);
    std::vector<int> expected;
    for (int i = 1; i < 19; ++i)
    {
        if (i != 7)
            expected.push_back(i);
    }
    BOOST_TEST(poll_all() == expected, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(remove_moves_the_last_entry_up_when_it_is_earlier_than_the_holes_parent)
{
    // Built from the fan-out k: the root; k children (the first due at 50 s, the second at 15 s,
    // the rest at 30 s); k grandchildren under the first child (60 s); one under the second
    // (20 s), in the last array slot. Removing a grandchild of the first child moves that last
    // entry into the hole, below a parent due later than it: it must go up, or it comes out
    // after the 30 s tasks.
    constexpr int k = static_cast<int>(queue_type::arity);
    queue.push(make(0), 0s);
    queue.push(make(1), 50s);
    queue.push(make(2), 15s);
    for (int i = 3; i <= k; ++i)
        queue.push(make(i), 30s);
    std::vector<test_task*> late;
    for (int i = 0; i < k; ++i)
    {
        late.push_back(&make(100 + i));
        queue.push(*late.back(), 60s);
    }
    auto& early = make(200);
    queue.push(early, 20s);
    BOOST_TEST(queue.remove(early)); // the last slot itself
    queue.push(early, 20s);
    BOOST_TEST(queue.remove(*late[0]));
    manual_clock::advance(100s);
    std::vector<int> expected = {0, 2, 200};
    for (int i = 3; i <= k; ++i)
        expected.push_back(i);
    expected.push_back(1);
    for (int i = 1; i < k; ++i)
        expected.push_back(100 + i);
    BOOST_TEST(poll_all() == expected, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(remove_ignores_a_task_queued_elsewhere)
{
    queue_type other;
    auto& a = make(1);
    auto& b = make(2);
    other.push(a, 1s);
    queue.push(b, 1s);
    BOOST_TEST(!queue.remove(a)); // same index, other queue
    BOOST_TEST(other.size() == 1u);
    BOOST_TEST(queue.size() == 1u);
}

BOOST_AUTO_TEST_CASE(a_removed_task_can_be_pushed_again)
{
    auto& a = make(1);
    queue.push(a, 10s);
    BOOST_TEST(queue.remove(a));
    queue.push(a, 1s);
    manual_clock::advance(1s);
    BOOST_TEST(id_of(queue.poll()) == 1);
}

BOOST_AUTO_TEST_CASE(drain_moves_only_due_tasks_in_due_order)
{
    auto& a = make(1);
    auto& b = make(2);
    auto& c = make(3);
    auto& d = make(4);
    queue.push(a, 3s);
    queue.push(b, 1s);
    queue.push(c, 10s);
    queue.push(d, 2s);
    manual_clock::advance(3s);
    std::vector<node*> out;
    BOOST_TEST(queue.drain(std::back_inserter(out)) == 3u);
    std::vector<int> ids;
    for (node* n : out)
        ids.push_back(id_of(n));
    BOOST_TEST(ids == (std::vector<int>{2, 4, 1}), boost::test_tools::per_element());
    BOOST_TEST(queue.size() == 1u);
    BOOST_TEST(queue.remove(c));
}

BOOST_AUTO_TEST_CASE(drain_stops_at_the_maximum)
{
    auto& a = make(1);
    auto& b = make(2);
    auto& c = make(3);
    queue.push(a, 1s);
    queue.push(b, 2s);
    queue.push(c, 3s);
    manual_clock::advance(3s);
    std::vector<node*> out;
    BOOST_TEST(queue.drain(std::back_inserter(out), 2) == 2u);
    BOOST_TEST(out.size() == 2u);
    BOOST_TEST(id_of(queue.poll()) == 3);
}

BOOST_AUTO_TEST_CASE(drain_keeps_the_task_whose_output_threw)
{
    auto& a = make(1);
    auto& b = make(2);
    queue.push(a, 1s);
    queue.push(b, 2s);
    manual_clock::advance(2s);
    struct throwing_output
    {
        int* written;
        throwing_output& operator*() { return *this; }
        throwing_output& operator++() { return *this; }
        throwing_output& operator=(node*)
        {
            if (++*written == 2)
                throw std::runtime_error("full");
            return *this;
        }
    };
    int written = 0;
    BOOST_CHECK_THROW(queue.drain(throwing_output{&written}), std::runtime_error);
    BOOST_TEST(queue.size() == 1u);
    BOOST_TEST(id_of(queue.poll()) == 2);
}

BOOST_AUTO_TEST_CASE(remove_if_takes_matching_tasks_due_or_not_in_queue_order)
{
    auto& tasks = storage;
    for (int i = 0; i < 50; ++i)
        tasks.emplace_back(i);
    for (auto& t : tasks) // due in reverse id order, pairs sharing a due time
        queue.push(t, std::chrono::seconds((50 - t.id) / 2));
    std::vector<node*> out;
    const auto removed = queue.remove_if(
        [](node& n) { return static_cast<test_task&>(n).id % 3 == 0; }, std::back_inserter(out));
    BOOST_TEST(removed == 17u);
    // Handed out as they would have come out: by due time, then push order.
    std::vector<int> removed_ids, expected_removed;
    for (node* n : out)
        removed_ids.push_back(id_of(n));
    for (int i = 0; i < 50; i += 3)
        expected_removed.push_back(i);
    // Pushed in id order, so among equal due times the lower id comes first.
    std::sort(expected_removed.begin(), expected_removed.end(),
              [](int a, int b) { return std::pair((50 - a) / 2, a) < std::pair((50 - b) / 2, b); });
    BOOST_TEST(removed_ids == expected_removed, boost::test_tools::per_element());
    manual_clock::advance(50s);
    std::vector<int> rest = poll_all();
    BOOST_TEST(rest.size() == 33u);
    for (int id : rest)
        BOOST_TEST(id % 3 != 0);
    for (node* n : out) // removed tasks are unqueued and can be pushed again
        BOOST_TEST(queue.push(*n, 1s) == (n == out.front()));
}

BOOST_AUTO_TEST_CASE(remove_if_may_ask_for_each_tasks_due_time)
{
    auto& a = make(1);
    auto& b = make(2);
    auto& c = make(3);
    queue.push(a, 30s);
    queue.push(b, 10s);
    queue.push(c, 20s);
    std::vector<node*> out;
    std::vector<manual_clock::time_point> asked;
    BOOST_TEST(queue.remove_if(
                   [&](node&, manual_clock::time_point due) {
                       asked.push_back(due);
                       return due >= at(20s);
                   },
                   std::back_inserter(out)) == 2u);
    std::sort(asked.begin(), asked.end());
    BOOST_TEST((asked == std::vector{at(10s), at(20s), at(30s)}));
    BOOST_TEST(out.size() == 2u);
    BOOST_TEST(id_of(queue.peek()) == 2);
}

BOOST_AUTO_TEST_CASE(due_time_asks_the_queue_and_last_due_time_the_task_that_left_it)
{
    auto& a = make(1);
    auto& b = make(2);
    auto& c = make(3);
    BOOST_TEST((a.last_due_time() == manual_clock::time_point{})); // never pushed
    BOOST_TEST(!queue.due_time(a));
    queue.push(a, 10s);
    queue.push(b, 5s);
    BOOST_TEST((queue.due_time(a) == at(10s)));
    BOOST_TEST((queue.due_time(b) == at(5s)));
    BOOST_TEST(!a.last_due_time()); // queued: its queue knows
    queue_type other;
    BOOST_TEST(!other.due_time(a)); // queued elsewhere
    BOOST_TEST(queue.reschedule(a, at(20s)));
    BOOST_TEST((queue.due_time(a) == at(20s)));
    BOOST_TEST(queue.remove(a));
    BOOST_TEST(!queue.due_time(a));
    BOOST_TEST((a.last_due_time() == at(20s)));
    manual_clock::advance(5s);
    BOOST_TEST(id_of(queue.poll()) == 2);
    BOOST_TEST((b.last_due_time() == at(5s)));
    BOOST_TEST(!queue.push_if(c, at(7s), [] { return false; }));
    BOOST_TEST((c.last_due_time() == at(7s))); // when it would have been due
    queue.push(a, 1s);
    BOOST_TEST(queue.clear() == 1u);
    BOOST_TEST((a.last_due_time() == at(6s)));
}

BOOST_AUTO_TEST_CASE(defer_heads_moves_heads_due_by_then_whose_due_time_moved_later)
{
    // Tasks 1..5 due at 1..5 s; the due times that have moved without the queue being told.
    std::vector<std::optional<manual_clock::time_point>> moved{std::nullopt, at(20s), at(30s),
                                                               std::nullopt, at(40s), at(50s)};
    for (int id = 1; id <= 5; ++id)
        queue.push(make(id), at(std::chrono::seconds(id)));
    std::vector<int> asked;
    const auto later_due = [&](node& n) noexcept {
        asked.push_back(id_of(&n));
        return moved[static_cast<std::size_t>(id_of(&n))];
    };

    // At most `max`.
    BOOST_TEST(queue.defer_heads(at(10s), 1, later_due) == 1u);
    BOOST_TEST((queue.due_time(storage[0]) == at(20s)));
    BOOST_TEST(id_of(queue.peek()) == 2);
    // Stops at a head whose due time has not moved (3 comes after 2 and is not moved).
    BOOST_TEST(queue.defer_heads(at(10s), 5, later_due) == 1u);
    BOOST_TEST((queue.due_time(storage[1]) == at(30s)));
    BOOST_TEST(id_of(queue.peek()) == 3);
    BOOST_TEST((asked == std::vector<int>{1, 2, 3}));
    BOOST_TEST((queue.due_time(storage[2]) == at(3s)));
    // A head due after `before` is not asked about.
    manual_clock::advance(3s);
    BOOST_TEST(id_of(queue.poll()) == 3);
    asked.clear();
    BOOST_TEST(queue.defer_heads(at(4s) - 1ns, 5, later_due) == 0u);
    BOOST_TEST(asked.empty());
    // Nor is one moved to a time not later than it is due.
    moved[4] = at(4s);
    BOOST_TEST(queue.defer_heads(at(10s), 5, later_due) == 0u);
    BOOST_TEST((queue.due_time(storage[3]) == at(4s)));
    // Moved tasks come out in their new order.
    moved[4] = at(25s);
    BOOST_TEST(queue.defer_heads(at(10s), 5, later_due) == 2u); // 4, then 5
    manual_clock::advance(60s);
    BOOST_TEST((poll_all() == std::vector<int>{1, 4, 2, 5}));
}

BOOST_AUTO_TEST_CASE(a_taker_sleeping_for_a_deferred_head_sleeps_on_until_the_new_head)
{
    auto& one = make(1);
    queue.push(one, at(1s));
    queue.push(make(2), at(2s));
    blocking_call<node*> taker([&] { return queue.take(); });
    BOOST_TEST_REQUIRE(taker.wait_until_blocked());
    BOOST_TEST(queue.defer_heads(at(1s), 5, [&](node& n) noexcept {
        return &n == &one ? std::optional(at(3s)) : std::nullopt;
    }) == 1u);
    const std::uint64_t sleeps = taker.sleeps();
    manual_clock::advance(1s); // 1's old due time: nothing comes out
    BOOST_TEST(taker.wait_until_blocked(sleeps));
    manual_clock::advance(1s);
    BOOST_TEST(id_of(taker.get()) == 2);
    BOOST_TEST((queue.due_time(one) == at(3s)));
}

BOOST_AUTO_TEST_CASE(due_time_finds_a_task_in_the_far_tier_and_after_it_moved)
{
    queue.set_far_tier(1s, 2);
    auto& a = make(1);
    BOOST_TEST(!queue.push(a, 10s)); // far: the main heap's head is the far tier's marker
    BOOST_TEST((queue.due_time(a) == at(10s)));
    BOOST_TEST(!a.last_due_time());
    manual_clock::advance(9s + 600ms); // the far tasks due within the horizon move
    BOOST_TEST(queue.poll() == nullptr);
    BOOST_TEST((queue.due_time(a) == at(10s)));
    manual_clock::advance(400ms);
    BOOST_TEST(id_of(queue.poll()) == 1);
    BOOST_TEST(!queue.due_time(a));
    BOOST_TEST((a.last_due_time() == at(10s)));
}

BOOST_AUTO_TEST_CASE(last_due_time_is_exact_but_for_a_window_146_years_before_the_epoch)
{
    using time_point = manual_clock::time_point;
    using duration = manual_clock::duration;
    const std::int64_t window = -(std::int64_t(1) << 62); // where a task records its place
    const std::int64_t past_window = window + (std::int64_t(1) << 60);
    const std::pair<time_point, time_point> pushed_and_read[] = {
        {time_point::min(), time_point::min()},
        {time_point::max(), time_point::max()},
        {time_point{}, time_point{}},
        {time_point(duration(window - 1)), time_point(duration(window - 1))},
        {time_point(duration(window)), time_point(duration(window - 1))},
        {time_point(duration(window + 5)), time_point(duration(window - 1))},
        {time_point(duration(past_window - 1)), time_point(duration(window - 1))},
        {time_point(duration(past_window)), time_point(duration(past_window))},
    };
    auto& a = make(1);
    for (const auto& [due, read] : pushed_and_read)
    {
        queue.push(a, due);
        BOOST_TEST((queue.due_time(a) == due)); // exact while queued
        BOOST_TEST(queue.remove(a));
        BOOST_TEST((a.last_due_time() == read));
    }
}

// Tasks due at the same time come out in the order they were pushed, even when the heap runs out
// of push orders between them and renumbers its tasks (as it does once every 2^44 pushes); the
// tasks' recorded positions stay right for removing and moving them.
BOOST_AUTO_TEST_CASE(equal_due_times_keep_their_push_order_across_a_renumbering)
{
    sched::detail::queue_access<queue_type>::leave_orders(queue, 4);
    for (int id = 1; id <= 3; ++id)
        queue.push(make(id), 10s);
    queue.push(make(4), 5s);        // to the front: task 1 goes behind tasks 2 and 3 in the array
    for (int id = 5; id <= 7; ++id) // the first of these renumbers
        queue.push(make(id), id == 6 ? 5s : 10s);
    BOOST_TEST(queue.remove(storage[4]));                               // id 5
    BOOST_TEST(queue.reschedule(storage[2], manual_clock::now() + 5s)); // id 3: after 4 and 6
    manual_clock::advance(10s);
    BOOST_TEST(poll_all() == (std::vector<int>{4, 6, 3, 1, 2, 7}),
               boost::test_tools::per_element());
}

// push_again_if() puts a task back where it stood among the tasks due at the same time when it
// left (take() hands its place to on_take), unless the heap has renumbered its tasks since.
BOOST_AUTO_TEST_CASE(push_again_if_puts_a_task_back_in_its_place_unless_renumbered_since)
{
    const auto always = [] {
        return true;
    };
    auto& a = make(1);
    queue_type::kept_place place;
    const auto keep = [&](node&, queue_type::kept_place p) noexcept {
        place = p;
    };
    queue.push(a, 0s);
    BOOST_TEST(queue.take({}, keep) == &a);
    queue.push(make(2), 5s);
    BOOST_TEST(queue.push_again_if(a, manual_clock::now() + 5s, place, always));
    manual_clock::advance(5s);
    BOOST_TEST(poll_all() == (std::vector<int>{1, 2}), boost::test_tools::per_element());

    queue.push(a, 0s);
    BOOST_TEST(queue.take({}, keep) == &a); // its place comes before any pushed since
    for (int id = 4; id <= 6; ++id)
        queue.push(make(id), 100s); // so that the renumbering gives the next push a later one
    sched::detail::queue_access<queue_type>::leave_orders(queue, 0);
    queue.push(make(3), 5s); // renumbers
    BOOST_TEST(queue.push_again_if(a, manual_clock::now() + 5s, place, always));
    manual_clock::advance(5s);
    BOOST_TEST(poll_all() == (std::vector<int>{3, 1}), boost::test_tools::per_element());
}

// A renumbering numbers the tasks in the order they were pushed, not in the order they come out:
// two tasks that leave after it with their kept places and come back due at the same time come
// out in the order of their first pushes. Before, it numbered them by due time (a review's
// finding).
BOOST_AUTO_TEST_CASE(a_renumbering_keeps_the_order_of_the_pushes)
{
    const auto always = [] {
        return true;
    };
    auto& pushed_first = make(1);
    auto& due_first = make(2);
    queue.push(pushed_first, 20s);
    queue.push(due_first, 10s);
    sched::detail::queue_access<queue_type>::leave_orders(queue, 0);
    queue.push(make(3), 100s); // renumbers
    queue_type::kept_place first_place;
    queue_type::kept_place second_place;
    manual_clock::advance(10s);
    BOOST_TEST(queue.take({}, [&](node&, queue_type::kept_place p) noexcept {
        second_place = p;
    }) == &due_first);
    manual_clock::advance(10s);
    BOOST_TEST(queue.take({}, [&](node&, queue_type::kept_place p) noexcept { first_place = p; }) ==
               &pushed_first);
    BOOST_TEST(queue.push_again_if(due_first, manual_clock::now() + 10s, second_place, always));
    BOOST_TEST(queue.push_again_if(pushed_first, manual_clock::now() + 10s, first_place, always));
    manual_clock::advance(10s);
    BOOST_TEST(poll_all() == (std::vector<int>{1, 2}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(remove_if_removes_nothing_when_the_predicate_throws)
{
    auto& tasks = storage;
    for (int i = 0; i < 10; ++i)
        tasks.emplace_back(i);
    for (auto& t : tasks)
        queue.push(t, std::chrono::seconds(t.id));
    std::vector<node*> out;
    int calls = 0;
    BOOST_CHECK_THROW(queue.remove_if(
                          [&](node&) {
                              if (++calls == 4)
                                  throw std::runtime_error("stop");
                              return true;
                          },
                          std::back_inserter(out)),
                      std::runtime_error);
    BOOST_TEST(out.empty());
    BOOST_TEST(queue.size() == 10u);
    manual_clock::advance(10s);
    BOOST_TEST(poll_all() == (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}),
               boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(remove_if_keeps_the_tasks_not_yet_written_when_the_output_throws)
{
    auto& tasks = storage;
    for (int i = 0; i < 10; ++i)
        tasks.emplace_back(i);
    for (auto& t : tasks)
        queue.push(t, std::chrono::seconds(t.id));
    struct throwing_output
    {
        std::vector<int>* written;
        throwing_output& operator*() { return *this; }
        throwing_output& operator++() { return *this; }
        throwing_output& operator=(node* n)
        {
            if (written->size() == 3)
                throw std::runtime_error("full");
            written->push_back(id_of(n));
            return *this;
        }
    };
    std::vector<int> written;
    BOOST_CHECK_THROW(queue.remove_if([](node&) { return true; }, throwing_output{&written}),
                      std::runtime_error);
    BOOST_TEST(written == (std::vector<int>{0, 1, 2}), boost::test_tools::per_element());
    manual_clock::advance(10s);
    BOOST_TEST(poll_all() == (std::vector<int>{3, 4, 5, 6, 7, 8, 9}),
               boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(clear_unqueues_everything)
{
    auto& a = make(1);
    auto& b = make(2);
    queue.push(a, 1s);
    queue.push(b, 2s);
    BOOST_TEST(queue.clear() == 2u);
    BOOST_TEST(queue.empty());
    BOOST_TEST(queue.peek() == nullptr);
    BOOST_TEST(!queue.remove(a));
    queue.push(a, 1s); // unqueued, so it may be pushed again
    BOOST_TEST(queue.size() == 1u);
}

BOOST_AUTO_TEST_CASE(take_blocks_until_the_head_is_due, *boost::unit_test::timeout(60))
{
    auto& late = make(1);
    auto& early = make(2);
    queue.push(late, 10s);
    blocking_call first([&] { return id_of(queue.take()); });
    BOOST_TEST_REQUIRE(first.wait_until_blocked());
    const std::uint64_t sleeps = first.sleeps();
    manual_clock::advance(5s); // not due yet: the taker wakes and waits again...
    BOOST_TEST_REQUIRE(first.wait_until_blocked(sleeps));
    queue.push(early, 0s); // ...so it gets this new, due head
    BOOST_TEST(first.get() == 2);
    blocking_call second([&] { return id_of(queue.take()); });
    BOOST_TEST_REQUIRE(second.wait_until_blocked());
    manual_clock::advance(5s);
    BOOST_TEST(second.get() == 1);
}

BOOST_AUTO_TEST_CASE(take_returns_nothing_when_stop_is_requested, *boost::unit_test::timeout(60))
{
    auto& a = make(1);
    queue.push(a, 10s);
    std::stop_source stop;
    blocking_call taker([&] { return queue.take(stop.get_token()); });
    BOOST_TEST_REQUIRE(taker.wait_until_blocked());
    stop.request_stop();
    BOOST_TEST(taker.get() == nullptr);
    BOOST_TEST(queue.size() == 1u);
    BOOST_TEST(queue.take(stop.get_token()) == nullptr); // already requested: at once
}

// A manual clock advanced all the way (it saturates at end_of_time()) does not end take()'s
// wait: before, take() (whose deadline is max()) returned nothing at once, and a pool's workers
// and a timer's thread left for good (a review's probe).
BOOST_AUTO_TEST_CASE(take_waits_on_at_the_end_of_time, *boost::unit_test::timeout(60))
{
    manual_clock::advance(manual_clock::duration::max());
    blocking_call taker([&] { return id_of(queue.take()); });
    BOOST_TEST_REQUIRE(taker.wait_until_blocked());
    queue.push(make(1), at(1s)); // long overdue
    BOOST_TEST(taker.get() == 1);
}

BOOST_AUTO_TEST_CASE(take_tells_its_callback_of_each_task_it_takes_and_of_no_other)
{
    auto& a = make(1);
    auto& b = make(2);
    queue.push(a, 0s);
    queue.push(b, 10s);
    std::vector<int> told;
    const auto tell = [&](node& n) noexcept {
        told.push_back(id_of(&n));
    };
    BOOST_TEST(id_of(queue.take({}, tell)) == 1);
    BOOST_TEST(told == std::vector<int>{1}, boost::test_tools::per_element());
    std::stop_source stop;
    stop.request_stop();
    BOOST_TEST(queue.take(stop.get_token(), tell) == nullptr); // b is not due: nothing taken
    BOOST_TEST(told.size() == 1u);
    BOOST_TEST(queue.size() == 1u);
}

// What the pool's idleness rests on: a task is counted by take's callback before under_locks()
// can find the queue without it.
BOOST_AUTO_TEST_CASE(under_locks_never_sees_a_taken_task_uncounted, *boost::unit_test::timeout(60))
{
    constexpr int tasks = 2000;
    for (int i = 0; i < tasks; ++i)
        queue.push(make(i), 0s);
    std::atomic<int> counted{0};
    auto taker = std::async(std::launch::async, [&] {
        for (int i = 0; i < tasks; ++i)
            (void)queue.take({}, [&](node&) noexcept { counted.fetch_add(1); });
    });
    int seen = -1;
    while (!queue.under_locks([&](bool empty) {
        if (empty)
            seen = counted.load();
        return empty;
    }))
    {}
    taker.get();
    BOOST_TEST(seen == tasks);
}

BOOST_AUTO_TEST_CASE(under_locks_says_whether_anything_is_queued_and_returns_what_f_does)
{
    std::vector<bool> seen;
    const auto note = [&](bool empty) {
        seen.push_back(empty);
        return seen.size();
    };
    BOOST_TEST(queue.under_locks(note) == 1u);
    auto& a = make(1);
    queue.push(a, 10s);
    BOOST_TEST(queue.under_locks(note) == 2u);
    BOOST_TEST(queue.remove(a));
    BOOST_TEST(queue.under_locks(note) == 3u);
    BOOST_TEST(seen == (std::vector<bool>{true, false, true}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(poll_gives_up_when_the_clock_passes_its_deadline,
                     *boost::unit_test::timeout(60))
{
    auto& a = make(1);
    queue.push(a, 10s);
    BOOST_TEST(queue.poll_for(0s) == nullptr); // deadline now: gives up at once
    // The deadline is fixed here, not when the thread starts, so advancing cannot beat it.
    blocking_call poller([&] { return queue.poll_until(at(5s)); });
    BOOST_TEST_REQUIRE(poller.wait_until_blocked());
    manual_clock::advance(5s);
    BOOST_TEST(poller.get() == nullptr);
    BOOST_TEST(queue.size() == 1u);
}

BOOST_AUTO_TEST_CASE(poll_returns_a_task_due_before_its_deadline, *boost::unit_test::timeout(60))
{
    auto& a = make(1);
    queue.push(a, 3s);
    blocking_call poller([&] { return id_of(queue.poll_until(at(5s))); });
    BOOST_TEST_REQUIRE(poller.wait_until_blocked());
    manual_clock::advance(3s);
    BOOST_TEST(poller.get() == 1);
    BOOST_TEST(queue.poll_until(manual_clock::now()) == nullptr); // empty, deadline now
}

BOOST_AUTO_TEST_CASE(takers_hand_over_leadership_on_the_real_clock, *boost::unit_test::timeout(120))
{
    // Followers wait without a timeout; only the leader wakes at the head's due time. Each task
    // is taken only if leadership passes on after every take: otherwise a taker would hang.
    using steady_queue = sched::basic_delayed_work_queue<std::chrono::steady_clock>;
    using task = sched::test::basic_test_task<std::chrono::steady_clock>;
    constexpr int takers = 3;
    std::deque<task> tasks;
    steady_queue q;
    for (int i = 0; i < takers; ++i)
        tasks.emplace_back(i);
    std::vector<std::future<int>> taken;
    for (int i = 0; i < takers; ++i)
        taken.push_back(std::async(std::launch::async, [&] { return id_of(q.take()); }));
    for (auto& t : tasks)
        q.push(t, std::chrono::milliseconds(20 * (t.id + 1)));
    std::vector<bool> seen(takers, false);
    for (auto& f : taken)
    {
        BOOST_TEST_REQUIRE((f.wait_for(60s) == std::future_status::ready));
        const int id = f.get();
        BOOST_TEST_REQUIRE((id >= 0 && id < takers));
        BOOST_TEST(!seen[id]);
        seen[id] = true;
    }
    BOOST_TEST(q.empty());
}

BOOST_AUTO_TEST_CASE(clock_advance_wakes_every_waiting_taker, *boost::unit_test::timeout(60))
{
    constexpr int takers = 4;
    auto& tasks = storage;
    for (int i = 0; i < takers; ++i)
        tasks.emplace_back(i);
    for (auto& t : tasks)
        queue.push(t, 1s);
    std::deque<blocking_call<int>> taken;
    for (int i = 0; i < takers; ++i)
        taken.emplace_back([&] { return id_of(queue.take()); });
    for (auto& taker : taken)
        BOOST_TEST_REQUIRE(taker.wait_until_blocked());
    manual_clock::advance(1s);
    std::vector<int> ids;
    for (auto& taker : taken)
        ids.push_back(taker.get());
    std::sort(ids.begin(), ids.end());
    BOOST_TEST(ids == (std::vector<int>{0, 1, 2, 3}), boost::test_tools::per_element());
    BOOST_TEST(queue.empty());
}

BOOST_AUTO_TEST_CASE(concurrent_producers_and_takers_deliver_each_task_exactly_once,
                     *boost::unit_test::timeout(300))
{
    using steady_queue = sched::basic_delayed_work_queue<std::chrono::steady_clock>;
    using task = sched::test::basic_test_task<std::chrono::steady_clock>;
    constexpr int producers = 2;
    constexpr int takers = 3;
    constexpr int per_producer = 20000;
    std::deque<task> tasks;
    steady_queue q;
    for (int i = 0; i < producers * per_producer; ++i)
        tasks.emplace_back(i);
    std::vector<std::atomic<int>> delivered(tasks.size());
    std::atomic<int> removed{0};
    std::stop_source stop;
    std::vector<std::thread> threads;
    std::atomic<int> taken{0};
    for (int i = 0; i < takers; ++i)
    {
        threads.emplace_back([&] {
            while (auto* n = q.take(stop.get_token()))
            {
                delivered[static_cast<std::size_t>(id_of(n))].fetch_add(1);
                taken.fetch_add(1);
            }
        });
    }
    std::vector<std::thread> producer_threads;
    for (int p = 0; p < producers; ++p)
    {
        producer_threads.emplace_back([&, p] {
            for (int i = 0; i < per_producer; ++i)
            {
                task& t = tasks[static_cast<std::size_t>(p * per_producer + i)];
                q.push(t, std::chrono::microseconds(i % 500));
                if (i % 7 == 0 && q.remove(t)) // cancel some before they are due
                {
                    delivered[static_cast<std::size_t>(t.id)].fetch_add(1);
                    removed.fetch_add(1);
                }
            }
        });
    }
    for (auto& t : producer_threads)
        t.join();
    while (taken.load() + removed.load() < producers * per_producer)
        std::this_thread::yield();
    stop.request_stop();
    for (auto& t : threads)
        t.join();
    for (std::size_t i = 0; i < delivered.size(); ++i)
        BOOST_TEST_REQUIRE(delivered[i].load() == 1);
    BOOST_TEST(q.empty());
}

// ----- External leaders ------------------------------------------------------------------------

namespace {

using time_point = manual_clock::time_point;

// An external leader that records what the queue asks of it. Tasks with ids below 100 are its.
struct recording_leader final : queue_type::external_leader
{
    std::vector<std::pair<time_point, time_point>> leads; // (due, then) of each lead_until()
    int step_downs = 0;
    bool willing = true;

    bool lead_until(time_point due, time_point then) noexcept override
    {
        leads.emplace_back(due, then);
        return willing;
    }
    void step_down() noexcept override { ++step_downs; }
};

recording_leader* current_leader = nullptr;

queue_type::external_leader* leader_of(node& n) noexcept
{
    return id_of(&n) < 100 ? current_leader : nullptr;
}

// The leader outlives the queue, which tells it to step down as it goes.
struct leader_holder
{
    recording_leader leader;
};

struct led_queue_fixture : leader_holder, queue_fixture
{
    static constexpr auto grace = 1s;

    led_queue_fixture()
    {
        current_leader = &leader;
        queue.set_leader_finder(&leader_of, grace);
    }
    ~led_queue_fixture() { current_leader = nullptr; }

    static time_point at(time_point::duration since_epoch) { return time_point(since_epoch); }
};

} // namespace

BOOST_FIXTURE_TEST_CASE(an_external_leader_is_asked_to_wait_for_each_new_head_it_leads,
                        led_queue_fixture)
{
    queue.push(make(1), 10s);
    queue.push(make(2), 20s); // behind the head: nobody is asked
    queue.push(make(3), 5s);  // a new head: the leader, with the task after it
    const std::vector<std::pair<time_point, time_point>> expected{{at(10s), time_point::max()},
                                                                  {at(5s), at(10s)}};
    BOOST_TEST((leader.leads == expected));
    BOOST_TEST(leader.step_downs == 0);
}

// A head that leaves other than through a take (removed, moved later, polled, drained, removed by
// remove_if) while no thread waits and no external leader has it: the new head's leader is
// asked. Before, nobody was until a thread came to take, so with every worker busy the
// io_context's wait behind a cancelled pool task was not woken for (a review's finding).
BOOST_FIXTURE_TEST_CASE(a_head_that_leaves_hands_the_lead_to_the_next_heads_leader,
                        led_queue_fixture)
{
    queue.push(make(1), 10s); // the leader's
    auto& other = make(100);  // nobody's
    const auto make_other_head = [&](std::chrono::seconds delay) {
        const int step_downs = leader.step_downs;
        queue.push(other, delay);
        BOOST_TEST(leader.step_downs == step_downs + 1); // its head is not the head now
    };
    make_other_head(5s);
    BOOST_TEST(queue.remove(other));
    BOOST_TEST(leader.leads.size() == 2u);
    make_other_head(5s);
    BOOST_TEST(queue.reschedule(other, at(20s)));
    BOOST_TEST(leader.leads.size() == 3u);
    BOOST_TEST(queue.remove(other));
    make_other_head(0s);
    BOOST_TEST(id_of(queue.poll()) == 100);
    BOOST_TEST(leader.leads.size() == 4u);
    make_other_head(0s);
    std::vector<node*> out;
    BOOST_TEST(queue.drain(std::back_inserter(out)) == 1u);
    BOOST_TEST(leader.leads.size() == 5u);
    make_other_head(5s);
    BOOST_TEST(queue.remove_if([](node& n) { return id_of(&n) == 100; }, std::back_inserter(out)) ==
               1u);
    BOOST_TEST(leader.leads.size() == 6u);
    for (const auto& [due, then] : leader.leads)
        BOOST_TEST((due == at(10s)));
}

// The far tier's marker is due half a horizon before the earliest far task, so it may come before
// the head an external leader waits for. Only the waiting threads move it, so the leader keeps
// its head (before, it stepped down for the marker, and with every worker busy nobody woke for
// the io_context's wait behind it: a review's finding), and moves the far tasks due by then
// itself when it wakes.
BOOST_FIXTURE_TEST_CASE(the_far_tiers_marker_leaves_the_head_behind_it_to_its_external_leader,
                        led_queue_fixture)
{
    queue.set_far_tier(1s, 4);
    queue.push(make(1), 1200ms);   // the leader's
    queue.push(make(100), 1500ms); // far, nobody's: its marker is due at 1 s
    BOOST_TEST(leader.step_downs == 0);
    const std::vector<std::pair<time_point, time_point>> expected{{at(1200ms), time_point::max()}};
    BOOST_TEST((leader.leads == expected));
    // No thread waits (every worker is busy): the leader takes its head when it is due.
    manual_clock::advance(1200ms);
    BOOST_TEST(id_of(queue.take_led(leader, [](node&) noexcept {})) == 1);
    BOOST_TEST(queue.take_led(leader, [](node&) noexcept {}) == nullptr); // 100: nobody's
    BOOST_TEST(leader.step_downs == 1);
    manual_clock::advance(300ms);
    BOOST_TEST(id_of(queue.poll()) == 100);
}

// A far task due before the led head behind the marker comes out first: the leader moves it to
// the main heap as it wakes, and leaves it to the takers.
BOOST_FIXTURE_TEST_CASE(a_far_task_due_before_the_led_head_behind_the_marker_comes_out_first,
                        led_queue_fixture)
{
    queue.set_far_tier(1s, 4);
    queue.push(make(1), 1200ms);   // the leader's
    queue.push(make(100), 1100ms); // far: its marker is due at 600 ms
    manual_clock::advance(1200ms);
    BOOST_TEST(queue.take_led(leader, [](node&) noexcept {}) == nullptr);
    BOOST_TEST(id_of(queue.poll()) == 100);
    BOOST_TEST(id_of(queue.take_led(leader, [](node&) noexcept {})) == 1);
}

// Behind the marker, a new earlier head asks its leader again, and one that leaves (removed,
// moved later) is handed on as at the front: the io_context must not wait for a task that is gone.
BOOST_FIXTURE_TEST_CASE(the_leader_of_a_head_behind_the_marker_hears_of_its_changes,
                        led_queue_fixture)
{
    queue.set_far_tier(1s, 4);
    auto& one = make(1);
    auto& two = make(2);
    queue.push(one, 1200ms);
    queue.push(make(100), 1500ms);       // far: its marker is due at 1 s
    BOOST_TEST(queue.push(two, 1100ms)); // the head but for the marker: the leader is asked
    BOOST_TEST((leader.leads.back() == std::pair{at(1100ms), at(1200ms)}));
    BOOST_TEST(queue.reschedule(two, at(1300ms))); // one is the head: the leader wakes early
    BOOST_TEST(queue.remove(one));
    BOOST_TEST(leader.leads.size() == 2u);
    BOOST_TEST(leader.step_downs == 0);
    BOOST_TEST(queue.remove(two)); // nothing of the leader's is left
    BOOST_TEST(leader.step_downs == 1);
}

BOOST_FIXTURE_TEST_CASE(an_external_leader_is_asked_to_wake_the_slack_after_a_head_with_company,
                        led_queue_fixture)
{
    queue.set_slack(250ms);
    queue.push(make(1), 10s);     // alone: on time
    queue.push(make(2), 10200ms); // behind the head: nobody is asked
    queue.push(make(3), 10100ms); // behind the head too
    queue.push(make(4), 5s);      // a new head, alone within its slack; then: 1's slack after it
    queue.push(make(5), 4900ms);  // a new head with 4 in its slack: the leader wakes in time
    queue.push(make(6), 5300ms);  // behind the head
    const std::vector<std::pair<time_point, time_point>> expected{{at(10s), time_point::max()},
                                                                  {at(5s), at(10250ms)}};
    BOOST_TEST((leader.leads == expected));
    // Woken then, it takes both, in due order. 6 is alone next; 1 is not, with 3 and 2.
    manual_clock::advance(5s);
    BOOST_TEST(id_of(queue.take_led(leader, [](node&) noexcept {})) == 5);
    BOOST_TEST(id_of(queue.take_led(leader, [](node&) noexcept {})) == 4);
    BOOST_TEST(queue.take_led(leader, [](node&) noexcept {}) == nullptr);
    BOOST_TEST((leader.leads.back() == std::pair{at(5300ms), at(10250ms)}));
    manual_clock::advance(300ms);
    BOOST_TEST(id_of(queue.take_led(leader, [](node&) noexcept {})) == 6);
    BOOST_TEST(queue.take_led(leader, [](node&) noexcept {}) == nullptr);
    BOOST_TEST((leader.leads.back() == std::pair{at(10250ms), at(10350ms)}));
    manual_clock::advance(4950ms);
    BOOST_TEST(id_of(queue.take_led(leader, [](node&) noexcept {})) == 1);
    BOOST_TEST(id_of(queue.take_led(leader, [](node&) noexcept {})) == 3);
    BOOST_TEST(id_of(queue.take_led(leader, [](node&) noexcept {})) == 2);
}

BOOST_FIXTURE_TEST_CASE(the_task_after_the_head_is_woken_for_by_the_same_rule, led_queue_fixture)
{
    // What the leader may get ready for: the task after the head, as it will be led once it is
    // the head (on time alone, the slack after it with company).
    queue.set_slack(250ms);
    auto& two = make(2);
    queue.push(make(1), 10s);
    queue.push(two, 5s);          // then: 1, alone
    queue.push(make(3), 10100ms); // behind the head: nobody is asked
    queue.push(make(4), 4s);      // then: 2, alone
    queue.push(make(5), 3s);      // then: 4, with 2 too far to be its company
    queue.push(make(6), 5100ms);  // behind the head
    queue.push(make(7), 2s);      // then: 5, alone; and 2 has 6 for company, 1 has 3
    const std::vector<std::pair<time_point, time_point>> expected{{at(10s), time_point::max()},
                                                                  {at(5s), at(10s)},
                                                                  {at(4s), at(5s)},
                                                                  {at(3s), at(4s)},
                                                                  {at(2s), at(3s)}};
    BOOST_TEST((leader.leads == expected));
    manual_clock::advance(4s);
    for (int id : {7, 5, 4})
        BOOST_TEST(id_of(queue.take_led(leader, [](node&) noexcept {})) == id);
    BOOST_TEST(queue.take_led(leader, [](node&) noexcept {}) == nullptr); // asked for 2
    BOOST_TEST(queue.remove(two)); // 6 is the head, alone; then: 1, with 3
    BOOST_TEST((leader.leads.back() == std::pair{at(5100ms), at(10250ms)}));
}

BOOST_FIXTURE_TEST_CASE(take_led_takes_only_due_heads_of_its_own_leader, led_queue_fixture)
{
    recording_leader other;
    queue.push(make(1), 10s);
    queue.push(make(100), 20s);                                           // the takers'
    BOOST_TEST(queue.take_led(leader, [](node&) noexcept {}) == nullptr); // not due
    BOOST_TEST(queue.take_led(other, [](node&) noexcept {}) == nullptr);  // not other's
    manual_clock::advance(25s);
    int taken = 0;
    BOOST_TEST(id_of(queue.take_led(leader, [&](node&) noexcept { ++taken; })) == 1);
    BOOST_TEST(taken == 1);
    // The head is now the takers', due: not the leader's to take, and it steps down for it.
    BOOST_TEST(queue.take_led(leader, [](node&) noexcept {}) == nullptr);
    BOOST_TEST(leader.step_downs == 1);
    BOOST_TEST(id_of(queue.poll()) == 100);
}

// A led task stays in the main heap however far ahead it is due (a push never puts it in the far
// tier). Pushed, moved or deferred past far tasks, it brings into the main heap only those due
// within the horizon, not every far task due before it: with 200k far tasks, that took one lock
// hold of 100-170 ms (a review's measure). The far tasks still come out in due order around it.
BOOST_FIXTURE_TEST_CASE(a_led_task_past_the_horizon_moves_no_far_task_due_after_the_horizon,
                        led_queue_fixture)
{
    using access = sched::detail::queue_access<queue_type>;
    queue.set_far_tier(1s, 4);
    auto& near_far = make(100); // far now, within the horizon once the clock has moved
    auto& far = make(101);
    auto& later_far = make(102);
    auto& led = make(1);
    queue.push(near_far, 2s);
    queue.push(far, 5s);
    queue.push(later_far, 20s);
    BOOST_TEST_REQUIRE(access::in_far_tier(far));
    queue.push(led, 10s); // led: in the main heap, past far tasks
    BOOST_TEST(!access::in_far_tier(led));
    BOOST_TEST(access::in_far_tier(far));
    BOOST_TEST(access::in_far_tier(near_far));
    manual_clock::advance(1500ms);
    BOOST_TEST(queue.reschedule(led, at(15s))); // later, past them still
    BOOST_TEST(!access::in_far_tier(led));
    BOOST_TEST(!access::in_far_tier(near_far)); // due within the horizon: moved in first
    BOOST_TEST(access::in_far_tier(far));
    const auto later_due = [&](node& n) noexcept {
        return &n == &led ? std::optional(at(18s)) : std::nullopt;
    };
    manual_clock::advance(500ms);
    BOOST_TEST(id_of(queue.poll()) == 100);
    manual_clock::advance(13s); // 15 s: the led task is due, and pushed back
    BOOST_TEST(queue.defer_heads(at(15s), 1, later_due) == 1u);
    BOOST_TEST((queue.due_time(led) == at(18s)));
    BOOST_TEST(access::in_far_tier(later_far));
    manual_clock::advance(5s);
    BOOST_TEST(poll_all() == (std::vector<int>{101, 1, 102}), boost::test_tools::per_element());
}

BOOST_FIXTURE_TEST_CASE(removing_the_led_head_steps_its_leader_down_once_it_leads_nothing,
                        led_queue_fixture)
{
    auto& a = make(1);
    auto& b = make(2);
    queue.push(a, 10s);
    queue.push(b, 20s);
    BOOST_TEST(queue.remove(a));
    // b is the leader's too, and later: waking early for it is fine, nothing is asked.
    BOOST_TEST(leader.step_downs == 0);
    BOOST_TEST(leader.leads.size() == 1u);
    BOOST_TEST(queue.remove(b));
    BOOST_TEST(leader.step_downs == 1); // its io_context must not wait for it any more
}

BOOST_FIXTURE_TEST_CASE(takers_leave_a_led_head_to_its_leader_until_it_is_overdue_by_the_grace,
                        led_queue_fixture,
                        *boost::unit_test::timeout(60))
{
    queue.push(make(1), 10s);
    blocking_call taker([&] { return id_of(queue.take()); });
    BOOST_TEST_REQUIRE(taker.wait_until_blocked());
    // Due, and the taker wakes: it leaves the head to the leader, and waits again.
    std::uint64_t sleeps = taker.sleeps();
    manual_clock::advance(10s);
    BOOST_TEST_REQUIRE(taker.wait_until_blocked(sleeps));
    BOOST_TEST(id_of(queue.take_led(leader, [](node&) noexcept {})) == 1);
    queue.push(make(2), 2s); // due at 12 s
    sleeps = taker.sleeps();
    manual_clock::advance(2500ms); // 500 ms overdue: still the leader's
    BOOST_TEST_REQUIRE(taker.wait_until_blocked(sleeps));
    manual_clock::advance(500ms); // overdue by the grace: the leader is held up, the taker takes it
    BOOST_TEST(taker.get() == 2);
}

BOOST_FIXTURE_TEST_CASE(takers_leave_a_backlog_to_a_leader_that_keeps_taking,
                        led_queue_fixture,
                        *boost::unit_test::timeout(60))
{
    // Three led tasks due together; the grace is 1 s. Each is overdue by more than the grace
    // before the leader takes it, but the leader took one less than a grace before.
    for (int id = 1; id <= 3; ++id)
        queue.push(make(id), 10s);
    blocking_call taker([&] { return id_of(queue.take()); });
    BOOST_TEST_REQUIRE(taker.wait_until_blocked());
    std::uint64_t sleeps = taker.sleeps();
    manual_clock::advance(10500ms);
    BOOST_TEST_REQUIRE(taker.wait_until_blocked(sleeps));
    BOOST_TEST(id_of(queue.take_led(leader, [](node&) noexcept {})) == 1); // at 10.5 s
    sleeps = taker.sleeps();
    manual_clock::advance(900ms); // 11.4 s: the leader took one 0.9 s ago
    BOOST_TEST_REQUIRE(taker.wait_until_blocked(sleeps));
    BOOST_TEST(id_of(queue.take_led(leader, [](node&) noexcept {})) == 2); // at 11.4 s
    sleeps = taker.sleeps();
    manual_clock::advance(900ms); // 12.3 s
    BOOST_TEST_REQUIRE(taker.wait_until_blocked(sleeps));
    manual_clock::advance(100ms); // 12.4 s: the leader has taken none for the grace
    BOOST_TEST(taker.get() == 3);
}

BOOST_FIXTURE_TEST_CASE(a_leader_asked_anew_after_another_head_gets_the_grace_alone,
                        led_queue_fixture,
                        *boost::unit_test::timeout(60))
{
    // Due together: the leader's 1, nobody's 100, the leader's 2. Once 100 has come between, the
    // leader is asked anew for 2, and its take of 1 no longer holds the takers off (a review's
    // finding: heads alternating between leaders, or with pool tasks, each held the takers off
    // for another grace).
    queue.push(make(1), 10s);
    queue.push(make(100), 10s);
    queue.push(make(2), 10s);
    manual_clock::advance(10500ms);
    BOOST_TEST(id_of(queue.take_led(leader, [](node&) noexcept {})) == 1); // at 10.5 s
    blocking_call taker([&] { return id_of(queue.take()); });
    BOOST_TEST(taker.get() == 100); // nobody's: taken at once
    blocking_call second([&] { return id_of(queue.take()); });
    BOOST_TEST_REQUIRE(second.wait_until_blocked()); // the leader's until 11 s
    manual_clock::advance(500ms);                    // 11 s: overdue by the grace
    BOOST_TEST(second.get() == 2);
}

BOOST_FIXTURE_TEST_CASE(with_a_slack_takers_leave_a_led_head_for_the_slack_and_the_grace,
                        led_queue_fixture,
                        *boost::unit_test::timeout(60))
{
    queue.set_slack(500ms); // the leader is asked to wake at 10.5 s; the grace ends at 11.5 s
    queue.push(make(1), 10s);
    blocking_call taker([&] { return id_of(queue.take()); });
    BOOST_TEST_REQUIRE(taker.wait_until_blocked());
    const std::uint64_t sleeps = taker.sleeps();
    manual_clock::advance(11400ms); // overdue by more than the grace alone: still the leader's
    BOOST_TEST_REQUIRE(taker.wait_until_blocked(sleeps));
    manual_clock::advance(100ms); // overdue by the slack and the grace: the taker takes it
    BOOST_TEST(taker.get() == 1);
}

BOOST_FIXTURE_TEST_CASE(heads_moving_earlier_over_and_over_wake_the_backup_once_per_interval,
                        led_queue_fixture,
                        *boost::unit_test::timeout(60))
{
    // The grace is 1 s: the interval is 10 s. The clock stands still until the end.
    queue.push(make(99), 60s);
    blocking_call taker([&] { return id_of(queue.take()); });
    BOOST_TEST_REQUIRE(taker.wait_until_blocked()); // the backup, asleep until 61 s
    // An earlier head (a timeout armed, then cancelled): the backup wakes for it, once.
    auto& first = make(1);
    std::uint64_t sleeps = taker.sleeps();
    queue.push(first, 5s);
    BOOST_TEST_REQUIRE(taker.wait_until_blocked(sleeps));
    BOOST_TEST(queue.remove(first));
    // Within the interval, earlier heads wake nobody.
    sleeps = taker.sleeps();
    for (int k = 2; k < 12; ++k)
    {
        auto& next = make(k);
        queue.push(next, 5s);
        BOOST_TEST(queue.remove(next));
    }
    auto& last = make(20);
    queue.push(last, 2s);
    BOOST_TEST(!taker.wait_until_blocked(sleeps, 200ms));
    // Once the clock moves, the backup takes the head overdue by the grace. (On this clock any
    // move wakes it: that it sleeps no longer than the interval is tested on a silent clock, in
    // within_the_hurry_interval_the_backup_sleeps_no_longer_than_it.)
    manual_clock::advance(10s);
    BOOST_TEST(taker.get() == 20);
}

BOOST_FIXTURE_TEST_CASE(a_head_its_leader_cannot_wait_for_goes_to_the_takers_when_due,
                        led_queue_fixture,
                        *boost::unit_test::timeout(60))
{
    leader.willing = false;
    queue.push(make(1), 10s);
    blocking_call taker([&] { return id_of(queue.take()); });
    BOOST_TEST_REQUIRE(taker.wait_until_blocked());
    manual_clock::advance(10s);
    BOOST_TEST(taker.get() == 1);
}

BOOST_FIXTURE_TEST_CASE(a_dismissed_leader_leaves_its_head_to_the_takers,
                        led_queue_fixture,
                        *boost::unit_test::timeout(60))
{
    queue.push(make(1), 10s);
    blocking_call taker([&] { return id_of(queue.take()); });
    BOOST_TEST_REQUIRE(taker.wait_until_blocked());
    int called = 0;
    queue.dismiss(leader, [&] {
        ++called;
        leader.willing = false;
    });
    BOOST_TEST(called == 1);
    BOOST_TEST(leader.step_downs == 1);
    manual_clock::advance(10s); // due: the taker takes it at once, no grace
    BOOST_TEST(taker.get() == 1);
}

BOOST_TEST_DECORATOR(*boost::unit_test::precondition(maps_large_arrays) *
                     boost::unit_test::precondition(sched::test::resident_size_readable))
BOOST_AUTO_TEST_CASE(the_heaps_arrays_go_back_to_the_system_as_it_outgrows_them_and_empties)
{
    constexpr std::size_t count = std::size_t(1) << 20;
    constexpr std::size_t entries = count * 16; // 16 MB: a due time and a pointer each
    // Nothing that earlier tests freed may go back to the system meanwhile, and be counted off
    // this test's growth (spans of the recycler's that age and go back a second after they
    // emptied: a full run read 15.9 MB for the 16 MB array).
    sched::detail::release_idle_spans();
    BOOST_TEST_REQUIRE(sched::test::eventually(sched::detail::unmapping_thread_idle));
    // What that many bytes of mapped memory add to the resident size when written: more than
    // their size under ThreadSanitizer, whose shadow memory grows with them.
    const std::int64_t cost = [] {
        const std::int64_t before = sched::test::resident_bytes();
        void* block = sched::detail::map_memory(entries, 4096);
        std::memset(block, 1, entries);
        const std::int64_t written = sched::test::resident_bytes();
        sched::detail::unmap_memory(block, entries, 4096);
        return written - before;
    }();
    std::vector<test_task> tasks(count);
    raise_mallocs_mmap_threshold();
    queue_type big_queue;
    const std::int64_t before = sched::test::resident_bytes();
    for (test_task& t : tasks)
        big_queue.push(t, manual_clock::now() + 1h);
    const std::int64_t full = sched::test::resident_bytes();
    BOOST_TEST_REQUIRE(full - before >= static_cast<std::int64_t>(entries));
    // The arrays it outgrew on the way (8 MB, 4 MB, ...) would add about as much again.
    BOOST_TEST(full - before < cost * 3 / 2, "grew by " << full - before << " for " << cost);
    BOOST_TEST(big_queue.clear() == count);
    const std::int64_t after = sched::test::resident_bytes();
    BOOST_TEST(after - before < cost / 4, "still " << after - before << " bytes above");
}

// A negative spin made every wait poll the clock from the moment a head was queued (its wake time
// overflowed to the dawn of time: a review's probe spent 2 s of CPU on a head due in 2 s).
BOOST_FIXTURE_TEST_CASE(negative_settings_are_refused, sched::test::queue_fixture)
{
    BOOST_CHECK_THROW(queue.set_spin(-1ns), std::invalid_argument);
    BOOST_CHECK_THROW(queue.set_slack(-1ns), std::invalid_argument);
    BOOST_CHECK_THROW(queue.set_leader_finder(nullptr, -1ns), std::invalid_argument);
    BOOST_CHECK_THROW(queue.set_far_tier(-1ns, 1), std::invalid_argument);
    queue.set_spin(0ns); // zero is each one's default
    queue.set_slack(0ns);
    queue.set_leader_finder(nullptr, 0ns);
    queue.set_far_tier(0ns, 0);
}

// What skip() forgives a periodic task (see periodic_schedule): the slack, unless the queue polls
// for its head. A queue on the manual clock never polls, so its slack stays.
BOOST_FIXTURE_TEST_CASE(deliberate_lateness_is_the_slack_unless_the_queue_polls,
                        sched::test::queue_fixture)
{
    BOOST_TEST((queue.deliberate_lateness() == 0ns));
    queue.set_slack(250ms);
    BOOST_TEST((queue.deliberate_lateness() == 250ms));
    queue.set_spin(1ms);
    BOOST_TEST((queue.deliberate_lateness() == 250ms));
    sched::basic_delayed_work_queue<std::chrono::steady_clock> polling;
    polling.set_slack(250ms);
    BOOST_TEST((polling.deliberate_lateness() == 250ms));
    polling.set_spin(1ms);
    BOOST_TEST((polling.deliberate_lateness() == 0ns));
}

// ----- Polling for the head (set_spin) ----------------------------------------------------------

namespace {

using silent_queue = sched::basic_delayed_work_queue<sched::test::silent_clock>;
using silent_task = sched::test::basic_test_task<sched::test::silent_clock>;
using silent_time = sched::test::silent_clock::time_point;

int id_of(silent_queue::node* n)
{
    return n == nullptr ? -1 : static_cast<silent_task*>(n)->id;
}

// An external leader of the tasks with ids below 100, recording the wake times the queue asks of
// it.
struct silent_leader final : silent_queue::external_leader
{
    std::vector<silent_time> wakes;

    bool lead_until(silent_time due, silent_time) noexcept override
    {
        wakes.push_back(due);
        return true;
    }
    void step_down() noexcept override {}
};

silent_leader* current_silent_leader = nullptr;

silent_queue::external_leader* silent_leader_of(silent_queue::node& n) noexcept
{
    return id_of(&n) < 100 ? current_silent_leader : nullptr;
}

// A queue on a clock that moves without telling it: a taker that sleeps does not see the clock
// move (it sleeps for the real time left), one that polls does.
struct silent_queue_fixture : sched::test::manual_clock_fixture
{
    std::deque<silent_task> storage;
    silent_queue queue;

    silent_task& make(int id) { return storage.emplace_back(id); }

    static silent_time at(std::chrono::nanoseconds since_epoch) { return silent_time(since_epoch); }
};

// The leader outlives the queue, which tells it to step down as it goes.
struct silent_leader_holder
{
    silent_leader leader;
};

struct silent_led_queue_fixture : silent_leader_holder, silent_queue_fixture
{
    silent_led_queue_fixture()
    {
        current_silent_leader = &leader;
        queue.set_leader_finder(&silent_leader_of, 1s);
    }
    ~silent_led_queue_fixture() { current_silent_leader = nullptr; }

    std::optional<blocking_call<int>> backup; // goes before the queue

    silent_queue::node* take(silent_queue::led_poll& poll)
    {
        return queue.take_led(
            leader, [](silent_queue::node&) noexcept {}, &poll);
    }

    // A grace of 50 ms (real time on this clock, and a hurry interval of 500 ms), task 99 due at
    // 10 s, led by a leader that never takes it, and a taker asleep as its backup until 10.05 s.
    blocking_call<int>& backup_for_a_head_due_at_10s()
    {
        queue.set_leader_finder(&silent_leader_of, 50ms);
        queue.push(make(99), at(10s));
        blocking_call<int>& taker = backup.emplace([this] { return id_of(queue.take()); });
        BOOST_TEST_REQUIRE(taker.wait_until_blocked());
        return taker;
    }

    // A grace of 30 s (a hurry interval of 300 s), a far tier of 1 s, task 1 due at `due`, led by
    // a leader that never takes it, and a taker asleep as its backup.
    blocking_call<int>& backup_for_a_led_head_beside_a_far_tier(silent_time due)
    {
        queue.set_leader_finder(&silent_leader_of, 30s);
        queue.set_far_tier(1s, 2);
        queue.push(make(1), due);
        blocking_call<int>& taker = backup.emplace([this] { return id_of(queue.take()); });
        BOOST_TEST_REQUIRE(taker.wait_until_blocked());
        return taker;
    }

    // Pushes task 100, far and nobody's, due at 1.3 s: its marker, due at 800 ms, comes in front
    // of the led head (its leader is asked nothing), and the backup wakes to sleep until it.
    // Then moves the clock to 1.3 s, which the backup sees 800 ms of real time on: it must take
    // task 100 then, not once the led head is overdue by the grace (10 s leaves room for a loaded
    // machine).
    void expect_the_backup_to_take_a_far_task_due_first(blocking_call<int>& taker)
    {
        const std::uint64_t sleeps = taker.sleeps();
        const std::size_t leads = leader.wakes.size();
        queue.push(make(100), at(1300ms));
        BOOST_TEST_REQUIRE(taker.wait_until_blocked(sleeps));
        BOOST_TEST(leader.wakes.size() == leads);
        manual_clock::advance(1300ms);
        BOOST_TEST_REQUIRE((taker.result().wait_for(10s) == std::future_status::ready));
        BOOST_TEST(taker.get() == 100);
    }

    // A spin of 500 ms, task 1 due at 10 s, and the clock at 9.6 s: within the spin.
    void head_within_the_spin()
    {
        queue.set_spin(500ms);
        queue.push(make(1), at(10s));
        manual_clock::advance(9600ms);
    }
};

} // namespace

BOOST_FIXTURE_TEST_CASE(with_a_spin_a_taker_polls_for_the_head_and_takes_it_when_due_not_before,
                        silent_queue_fixture,
                        *boost::unit_test::timeout(60))
{
    queue.set_spin(20s);
    queue.push(make(1), at(10s)); // within the spin: the taker polls from the start
    const long reads = sched::test::silent_clock::reads();
    auto taker = std::async(std::launch::async, [&] { return id_of(queue.take()); });
    // It polls (a taker asleep would read the clock a few times), 10 s of real time ahead.
    BOOST_TEST_REQUIRE(
        sched::test::eventually([&] { return sched::test::silent_clock::reads() > reads + 1000; }));
    manual_clock::advance(10s - 1ns);
    BOOST_TEST((taker.wait_for(100ms) != std::future_status::ready)); // not before it is due
    manual_clock::advance(1ns);
    // A taker asleep would sleep for the 10 s of real time it saw left; a poller sees the clock.
    BOOST_TEST_REQUIRE((taker.wait_for(5s) == std::future_status::ready));
    BOOST_TEST(taker.get() == 1);
}

BOOST_FIXTURE_TEST_CASE(with_a_spin_a_follower_polls_for_the_next_head_once_the_poller_leaves,
                        silent_queue_fixture,
                        *boost::unit_test::timeout(120))
{
    queue.set_spin(20s);
    queue.push(make(1), at(10s));
    queue.push(make(2), at(10s) + 1ms);
    std::stop_source stop;
    auto take = [&] {
        return id_of(queue.take(stop.get_token()));
    };
    std::array<blocking_call<int>, 2> takers{blocking_call<int>(take), blocking_call<int>(take)};
    struct stop_on_exit // a failed check leaves a taker waiting: it stops before it is joined
    {
        std::stop_source& stop;
        ~stop_on_exit() { stop.request_stop(); }
    } stopping{stop};
    // One polls for the head (it never blocks), the other follows: asleep until woken, since a
    // clock that moves silently wakes nobody.
    bool follows = false;
    for (int turn = 0; turn < 3000 && !follows; ++turn)
        follows = takers[turn % 2].wait_until_blocked(0, 10ms);
    BOOST_TEST_REQUIRE(follows);
    manual_clock::advance(10s);
    auto first_done = [&]() -> blocking_call<int>* {
        for (int turn = 0; turn < 500; ++turn)
        {
            for (blocking_call<int>& t : takers)
            {
                if (t.result().wait_for(5ms) == std::future_status::ready)
                    return &t;
            }
        }
        return nullptr;
    };
    blocking_call<int>* const poller = first_done();
    BOOST_TEST_REQUIRE(poller != nullptr);
    BOOST_TEST(poller->get() == 1);
    // The poller has left with its task: the follower must take over and poll for the next head,
    // or it sleeps on, and task 2 waits for whatever next wakes it.
    blocking_call<int>& follower = poller == &takers[0] ? takers[1] : takers[0];
    manual_clock::advance(1ms);
    BOOST_TEST_REQUIRE((follower.result().wait_for(5s) == std::future_status::ready));
    BOOST_TEST(follower.get() == 2);
}

BOOST_FIXTURE_TEST_CASE(with_a_spin_a_taker_sleeps_until_the_far_tiers_move_is_due,
                        silent_queue_fixture,
                        *boost::unit_test::timeout(120))
{
    queue.set_spin(20s);
    queue.set_far_tier(50ms, 2);
    queue.push(make(1), at(10s)); // far: the main heap holds only the far tier's marker
    std::stop_source stop;
    blocking_call taker([&] { return id_of(queue.take(stop.get_token())); });
    // Moving far tasks keeps no task waiting: no thread polls for it (it would never sleep).
    BOOST_TEST(taker.wait_until_blocked());
    stop.request_stop();
    BOOST_TEST(taker.get() == -1);
}

// With a spin, the far tier's marker is woken for when it is due, not the slack after it: the task
// due right behind it is polled for from there, and taken on time. Before, the marker took the
// slack, as a task with company does without a spin (a review's finding).
BOOST_FIXTURE_TEST_CASE(with_a_spin_the_far_tiers_marker_is_woken_for_when_due,
                        silent_queue_fixture,
                        *boost::unit_test::timeout(60))
{
    queue.set_slack(10s);
    queue.set_spin(1ms);
    queue.set_far_tier(1s, 1);
    queue.push(make(100), at(2s)); // far: its marker is due at 1.5 s
    manual_clock::advance(600ms);
    queue.push(make(1), at(1501ms)); // near, right behind the marker
    blocking_call<int> taker([this] { return id_of(queue.take()); });
    BOOST_TEST_REQUIRE(taker.wait_until_blocked()); // asleep for the marker, 0.9 s of real time
    manual_clock::advance(901ms);                   // to 1.501 s
    // Not once the slack has passed too, 10.9 s of real time on (5 s leaves room for a loaded
    // machine).
    BOOST_TEST_REQUIRE((taker.result().wait_for(5s) == std::future_status::ready));
    BOOST_TEST(taker.get() == 1);
}

BOOST_FIXTURE_TEST_CASE(a_backup_asleep_for_a_led_head_wakes_for_a_new_earlier_one,
                        silent_led_queue_fixture,
                        *boost::unit_test::timeout(60))
{
    blocking_call<int>& taker = backup_for_a_head_due_at_10s();
    // A new head, due now, led by the same (held up) leader: the backup must take it 50 ms on,
    // not once the first is overdue, 10 s on.
    queue.push(make(2), at(0s));
    manual_clock::advance(50ms);
    BOOST_TEST_REQUIRE((taker.result().wait_for(5s) == std::future_status::ready));
    BOOST_TEST(taker.get() == 2);
}

// An external leader that takes its head hands the lead on at once when the next head is not its
// own: before, it kept the lead until it next asked, so with its thread busy running what it took
// (an io_context's handlers), the pool's task due behind its wait waited until that wait would
// have been overdue by the grace (a review's finding).
BOOST_FIXTURE_TEST_CASE(a_head_after_the_one_its_leader_took_is_woken_for_at_once,
                        silent_led_queue_fixture,
                        *boost::unit_test::timeout(60))
{
    blocking_call<int>& taker = backup_for_a_head_due_at_10s();
    queue.push(make(100), at(10s)); // nobody's, behind the head: the backup sleeps on
    manual_clock::advance(10s);
    BOOST_TEST(id_of(queue.take_led(leader, [](silent_queue::node&) noexcept {})) == 99);
    // The backup must take it now, not 10 s of real time on (5 s leaves room for a loaded
    // machine).
    BOOST_TEST_REQUIRE((taker.result().wait_for(5s) == std::future_status::ready));
    BOOST_TEST(taker.get() == 100);
}

BOOST_FIXTURE_TEST_CASE(within_the_hurry_interval_the_backup_sleeps_no_longer_than_it,
                        silent_led_queue_fixture,
                        *boost::unit_test::timeout(60))
{
    blocking_call<int>& taker = backup_for_a_head_due_at_10s();
    auto& first = make(1);
    const std::uint64_t sleeps = taker.sleeps();
    queue.push(first, at(5s)); // an earlier head: the backup wakes for it
    BOOST_TEST_REQUIRE(taker.wait_until_blocked(sleeps));
    BOOST_TEST(queue.remove(first));
    // Within the interval nobody wakes for a new head, due now: the backup, asleep until 500 ms
    // at most, takes it then, not when the first would have been overdue, 5.05 s after it went
    // to sleep (2 s leaves room for a loaded machine on both sides).
    queue.push(make(2), at(0s));
    manual_clock::advance(500ms);
    BOOST_TEST_REQUIRE((taker.result().wait_for(2s) == std::future_status::ready));
    BOOST_TEST(taker.get() == 2);
}

// While an external leader waits for a head behind the far tier's marker, the backup sleeps until
// the marker is due, not until that head is overdue by the grace, and moves the far tasks: one due
// before the led head comes out on time.
BOOST_FIXTURE_TEST_CASE(the_backup_wakes_for_the_far_tiers_marker_in_front_of_a_led_head,
                        silent_led_queue_fixture,
                        *boost::unit_test::timeout(60))
{
    blocking_call<int>& taker = backup_for_a_led_head_beside_a_far_tier(at(30s));
    expect_the_backup_to_take_a_far_task_due_first(taker);
}

// The hurry interval does not hold the backup back from the marker: it moves earlier only for a
// new earliest far task, which would otherwise wait for the interval.
BOOST_FIXTURE_TEST_CASE(the_backup_wakes_for_the_far_tiers_marker_within_the_hurry_interval,
                        silent_led_queue_fixture,
                        *boost::unit_test::timeout(60))
{
    blocking_call<int>& taker = backup_for_a_led_head_beside_a_far_tier(at(60s));
    const std::uint64_t sleeps = taker.sleeps();
    queue.push(make(2), at(50s)); // an earlier led head: the backup wakes, and the interval starts
    BOOST_TEST_REQUIRE(taker.wait_until_blocked(sleeps));
    expect_the_backup_to_take_a_far_task_due_first(taker);
}

BOOST_FIXTURE_TEST_CASE(with_a_spin_an_external_leader_is_asked_to_wake_the_spin_before_the_head,
                        silent_led_queue_fixture)
{
    queue.set_spin(500ms);
    queue.set_slack(250ms); // not used with a spin
    queue.push(make(1), at(10s));
    BOOST_TEST((leader.wakes == std::vector<silent_time>{at(9500ms)}));
    // Woken too early for the spin: nothing to poll for, and it is asked again.
    manual_clock::advance(9s);
    silent_queue::led_poll poll;
    BOOST_TEST(take(poll) == nullptr);
    BOOST_TEST(!poll.polling);
    BOOST_TEST(leader.wakes.size() == 2u);
}

BOOST_FIXTURE_TEST_CASE(with_a_spin_one_thread_of_the_external_leader_polls_for_its_head,
                        silent_led_queue_fixture)
{
    head_within_the_spin();
    queue.push(make(2), at(10s) + 1ms); // behind the head: nobody is asked
    silent_queue::led_poll first;
    BOOST_TEST(take(first) == nullptr);
    BOOST_TEST(first.polling);
    BOOST_TEST(first.until == at(10s));
    silent_queue::led_poll second; // another thread of the leader's, woken meanwhile
    BOOST_TEST(take(second) == nullptr);
    BOOST_TEST(!second.polling);
    BOOST_TEST(leader.wakes.size() == 1u); // the poller has the head: nobody is asked again
    // Due: the poller takes it, and polls on for the next head.
    manual_clock::advance(400ms);
    BOOST_TEST(id_of(take(first)) == 1);
    BOOST_TEST(take(first) == nullptr);
    BOOST_TEST(first.polling);
    BOOST_TEST(first.until == at(10s) + 1ms);
    manual_clock::advance(1ms);
    BOOST_TEST(id_of(take(first)) == 2);
    // Nothing left: it stops polling, and the next head's poller may be another thread.
    BOOST_TEST(take(first) == nullptr);
    BOOST_TEST(!first.polling);
    queue.push(make(3), at(10200ms));
    silent_queue::led_poll third;
    BOOST_TEST(take(third) == nullptr);
    BOOST_TEST(third.polling);
    BOOST_TEST(third.until == at(10200ms));
}

BOOST_FIXTURE_TEST_CASE(dismissing_a_leader_whose_thread_polls_asks_it_again_and_frees_the_poll,
                        silent_led_queue_fixture)
{
    head_within_the_spin();
    silent_queue::led_poll first;
    BOOST_TEST(take(first) == nullptr);
    BOOST_TEST_REQUIRE(first.polling);
    // Its polling thread cannot go on (out of memory): the leader is asked to wake again, and
    // the thread that then wakes polls.
    queue.dismiss(leader, [] {});
    BOOST_TEST(leader.wakes.size() == 2u);
    silent_queue::led_poll next;
    BOOST_TEST(take(next) == nullptr);
    BOOST_TEST(next.polling);
    BOOST_TEST(next.until == at(10s));
}

BOOST_FIXTURE_TEST_CASE(without_a_poll_an_external_leader_is_asked_again_within_the_spin,
                        silent_led_queue_fixture)
{
    head_within_the_spin();
    BOOST_TEST(queue.take_led(leader, [](silent_queue::node&) noexcept {}) == nullptr);
    BOOST_TEST(leader.wakes.size() == 2u);
}

// ----- Clocks of the user's --------------------------------------------------------------------

// On a clock coarser than nanoseconds, a head a thousand years ahead is representable, so not
// "never": the standard library's wait on such a clock adds the time left to the steady clock in
// nanoseconds, which overflowed, so each wait ended at once and the taker spun without sleeping.
BOOST_AUTO_TEST_CASE(a_taker_sleeps_for_a_head_due_centuries_ahead_on_a_coarse_clock,
                     *boost::unit_test::timeout(60))
{
    using clock = sched::test::millisecond_clock;
    sched::basic_delayed_work_queue<clock> coarse_queue;
    sched::test::basic_test_task<clock> task(1);
    coarse_queue.push(task, clock::now() + sched::test::millennium);
    std::stop_source stop;
    blocking_call<bool> taker([&] { return coarse_queue.take(stop.get_token()) != nullptr; });
    BOOST_TEST(taker.wait_until_blocked(0, 10s));
    stop.request_stop();
    BOOST_TEST(!taker.get()); // stopped, not given the task
}

BOOST_AUTO_TEST_SUITE_END()
