// The delayed_work_queue's far tier (set_far_tier()): tasks due far ahead wait in shards and move
// to the main heap before they are due, without changing what comes out when.

#include <sched/delayed_work_queue.hpp>

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <iterator>
#include <memory>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <thread>
#include <vector>

#include "support/blocking_call.hpp"
#include "support/failing_allocation.hpp"
#include "support/queue_access.hpp"
#include "support/queue_fixture.hpp"

using namespace std::chrono_literals;
using sched::manual_clock;
using sched::test::id_of;
using sched::test::test_task;

namespace {

using queue_type = sched::basic_delayed_work_queue<manual_clock>;
using node = queue_type::node;

// A queue whose far tier takes tasks due 1 s or more ahead; they move half a second or more before
// they are due.
struct far_fixture : sched::test::queue_fixture
{
    far_fixture() { queue.set_far_tier(1s, 4); }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(test_far_tier, far_fixture)

BOOST_AUTO_TEST_CASE(far_and_near_tasks_come_out_in_due_order)
{
    queue.push(make(1), 10s); // far
    queue.push(make(2), 500ms);
    queue.push(make(3), 5s); // far
    queue.push(make(4), 900ms);
    queue.push(make(5), 30s); // far
    BOOST_TEST(queue.size() == 5u);
    BOOST_TEST(id_of(queue.peek()) == 2);
    manual_clock::advance(1s);
    BOOST_TEST(poll_all() == (std::vector<int>{2, 4}), boost::test_tools::per_element());
    manual_clock::advance(4s);
    BOOST_TEST(poll_all() == (std::vector<int>{3}), boost::test_tools::per_element());
    manual_clock::advance(1h);
    BOOST_TEST(poll_all() == (std::vector<int>{1, 5}), boost::test_tools::per_element());
    BOOST_TEST(queue.empty());
}

// A task pushed far, then one due at the same time pushed once that time is near: the far one was
// pushed first, so it comes out first, though it is still in its shard when the second comes.
BOOST_AUTO_TEST_CASE(a_far_task_comes_before_a_later_near_one_due_at_the_same_time)
{
    const auto due = at(10s);
    queue.push(make(1), due); // far: 10 s ahead
    manual_clock::advance(9400ms);
    BOOST_TEST(queue.poll() == nullptr); // reads the clock: 0.6 s ahead is near now
    queue.push(make(2), due);
    queue.push(make(3), at(9900ms));
    manual_clock::advance(600ms);
    BOOST_TEST(poll_all() == (std::vector<int>{3, 1, 2}), boost::test_tools::per_element());
}

// A task taken with its kept place and pushed again (a periodic task's next run) after the far
// tier has closed (a pool's shutdown that lets periodic tasks go on) goes after a far task pushed
// before it and due at the same time: that one took a new place as the tier closed. Before, the
// kept place put it first (a review's finding).
BOOST_AUTO_TEST_CASE(a_kept_place_does_not_jump_a_far_task_pushed_before_it_once_the_tier_closes)
{
    auto& periodic = make(2);
    queue.push(make(1), 10s);    // far, pushed first
    queue.push(periodic, 100ms); // near
    manual_clock::advance(100ms);
    queue_type::kept_place place;
    BOOST_TEST(queue.take({}, [&](node&, queue_type::kept_place p) noexcept { place = p; }) ==
               &periodic);
    queue.close_far_tier();
    BOOST_TEST(queue.push_again_if(periodic, at(10s), place, [] { return true; }));
    manual_clock::advance_to(at(10s));
    BOOST_TEST(poll_all() == (std::vector<int>{1, 2}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(far_tasks_due_at_the_same_time_from_one_thread_come_out_first_in_first_out)
{
    for (int i = 0; i < 50; ++i)
        queue.push(make(i), i % 2 == 0 ? 20s : 10s);
    manual_clock::advance(20s);
    std::vector<int> expected;
    for (int i = 1; i < 50; i += 2)
        expected.push_back(i);
    for (int i = 0; i < 50; i += 2)
        expected.push_back(i);
    BOOST_TEST(poll_all() == expected, boost::test_tools::per_element());
}

// Far tasks move to the main heap a batch at a time; every batch comes out before the marker
// that moves the next, so poll(), drain() and take() find all of them due at once.
BOOST_AUTO_TEST_CASE(more_far_tasks_than_a_batch_come_out_at_once, *boost::unit_test::timeout(60))
{
    constexpr int n = 300; // several batches
    for (int i = 0; i < n; ++i)
        queue.push(make(i), 2s);
    manual_clock::advance(3s);
    std::vector<node*> out;
    BOOST_TEST(queue.drain(std::back_inserter(out), 100) == 100u);
    BOOST_TEST(id_of(out.front()) == 0);
    BOOST_TEST(id_of(out.back()) == 99);
    BOOST_TEST(id_of(queue.poll()) == 100);
    for (int i = 101; i < n; ++i) // the clock stays put: a taker that waited would never return
        BOOST_TEST(id_of(queue.take()) == i);
    BOOST_TEST(queue.empty());
}

BOOST_AUTO_TEST_CASE(a_waiting_taker_gets_a_far_task_when_it_is_due, *boost::unit_test::timeout(60))
{
    sched::test::blocking_call taker([&] { return id_of(queue.take()); });
    BOOST_TEST_REQUIRE(taker.wait_until_blocked()); // on an empty queue
    queue.push(make(1), 10s);
    const std::uint64_t sleeps = taker.sleeps();
    manual_clock::advance(9s); // not due: it wakes and waits again
    BOOST_TEST_REQUIRE(taker.wait_until_blocked(sleeps));
    manual_clock::advance(1s);
    BOOST_TEST(taker.get() == 1);
    BOOST_TEST(queue.empty());
}

// A task pushed behind the marker is the head (peek() shows it), but the taker asleep until the
// marker is due wakes in time for it: nobody is woken (a review found that such a push woke a
// thread for nothing).
BOOST_AUTO_TEST_CASE(a_task_pushed_just_behind_the_marker_wakes_no_taker,
                     *boost::unit_test::timeout(60))
{
    queue.push(make(1), 10s); // far: the marker is due at 9.5 s
    sched::test::blocking_call taker([&] { return id_of(queue.take()); });
    BOOST_TEST_REQUIRE(taker.wait_until_blocked());
    std::uint64_t sleeps = taker.sleeps();
    manual_clock::advance(9s); // the taker wakes and sleeps again, until 9.5 s
    BOOST_TEST_REQUIRE(taker.wait_until_blocked(sleeps));
    sleeps = taker.sleeps();
    BOOST_TEST(queue.push(make(2), at(9800ms))); // near, behind the marker
    BOOST_TEST(id_of(queue.peek()) == 2);
    BOOST_TEST(!taker.wait_until_blocked(sleeps, 200ms));
    manual_clock::advance(800ms);
    BOOST_TEST(taker.get() == 2);
    manual_clock::advance(200ms);
    BOOST_TEST(id_of(queue.poll()) == 1);
}

BOOST_AUTO_TEST_CASE(a_far_task_can_be_removed_and_rescheduled)
{
    auto& a = make(1);
    auto& b = make(2);
    auto& c = make(3);
    queue.push(a, 10s);
    queue.push(b, 20s);
    queue.push(c, 30s);
    BOOST_TEST(queue.remove(b));
    BOOST_TEST(!queue.remove(b));
    BOOST_TEST(queue.size() == 2u);
    BOOST_TEST(queue.reschedule(c, at(200ms))); // from the far tier to near: it moves when due
    BOOST_TEST(queue.reschedule(a, at(40s)));   // later, within the far tier
    BOOST_TEST(!queue.reschedule(b, at(1s)));   // not queued
    BOOST_TEST(id_of(queue.peek()) == 3);
    manual_clock::advance(200ms);
    BOOST_TEST(poll_all() == (std::vector<int>{3}), boost::test_tools::per_element());
    manual_clock::advance(39s);
    BOOST_TEST(queue.poll() == nullptr);
    manual_clock::advance(1s);
    BOOST_TEST(poll_all() == (std::vector<int>{1}), boost::test_tools::per_element());
}

// A remove() that comes while a push to the far tier is between its check (push_if()'s predicate)
// and the push waits for the push, and finds the task: such a push holds its shard's lock only.
// Before, a remove that found the task in no heap, and no shard recorded in it yet, gave up; so a
// cancel that the pusher's check had missed left the task queued until it fell due (a pool's
// deadline test hung, its cancelled wait queued an hour ahead on the manual clock).
BOOST_AUTO_TEST_CASE(a_remove_during_a_push_to_the_far_tier_waits_for_it_and_finds_the_task,
                     *boost::unit_test::timeout(60))
{
    auto& task = make(1);
    queue.push(make(2), 5s); // far: later far pushes take their shard's lock only
    std::future<bool> removed;
    const bool pushed = queue.push_if(task, at(10s), [&] {
        removed = std::async(std::launch::async, [&] { return queue.remove(task); });
        // Still waiting once this check has had time to let it through (it returned at once).
        return removed.wait_for(100ms) == std::future_status::timeout;
    });
    BOOST_TEST(pushed);
    BOOST_TEST(removed.get());
    BOOST_TEST(queue.size() == 1u);
}

// defer_heads() (the waits of deadlines pushed back) moves a head past a far task to the far tier,
// as a push would put it: in the main heap, every far task due before it would move there first,
// in one lock hold (a review measured 60 ms with 200k far tasks). Before a far task, it moves in
// the main heap.
BOOST_AUTO_TEST_CASE(defer_heads_moves_a_head_past_a_far_task_to_the_far_tier)
{
    using access = sched::detail::queue_access<queue_type>;
    auto& near = make(1);
    auto& pushed_back = make(2);
    queue.push(near, 100ms);
    queue.push(pushed_back, 200ms);
    queue.push(make(3), 2s); // far
    const auto later_due = [&](node& n) noexcept {
        return std::optional(&n == &near ? at(1500ms) : at(5s));
    };
    BOOST_TEST(queue.defer_heads(at(1s), 1, later_due) == 1u);
    BOOST_TEST((queue.due_time(near) == at(1500ms)));
    BOOST_TEST(!access::in_far_tier(near));
    BOOST_TEST(queue.defer_heads(at(1s), 1, later_due) == 1u);
    BOOST_TEST((queue.due_time(pushed_back) == at(5s)));
    BOOST_TEST(access::in_far_tier(pushed_back));
    manual_clock::advance(5s);
    BOOST_TEST(poll_all() == (std::vector<int>{1, 3, 2}), boost::test_tools::per_element());
}

// When the far tier's marker is in front of peek()'s head, defer_heads() looks behind it too.
BOOST_AUTO_TEST_CASE(defer_heads_looks_behind_the_marker)
{
    auto& near = make(1);
    queue.push(make(2), 1200ms); // far: its marker comes due 700 ms or sooner
    queue.push(near, 900ms);     // behind the marker
    BOOST_TEST(id_of(queue.peek()) == 1);
    const auto later_due = [&](node& n) noexcept {
        return &n == &near ? std::optional(at(1100ms)) : std::nullopt;
    };
    BOOST_TEST(queue.defer_heads(at(1s), 4, later_due) == 1u);
    BOOST_TEST((queue.due_time(near) == at(1100ms)));
    manual_clock::advance(1100ms);
    BOOST_TEST(poll_all() == (std::vector<int>{1}), boost::test_tools::per_element());
    manual_clock::advance(100ms);
    BOOST_TEST(poll_all() == (std::vector<int>{2}), boost::test_tools::per_element());
}

// The marker stays behind a removed far task; when it comes due it finds nothing to move and
// leaves the main heap empty.
BOOST_AUTO_TEST_CASE(a_marker_left_by_a_removed_far_task_goes_quietly)
{
    auto& a = make(1);
    queue.push(a, 10s);
    BOOST_TEST(queue.remove(a));
    manual_clock::advance(9600ms);
    BOOST_TEST(queue.poll() == nullptr);
    BOOST_TEST(queue.empty());
    queue.push(make(2), 10s); // far again: 10 s from now
    manual_clock::advance(10s);
    BOOST_TEST(poll_all() == (std::vector<int>{2}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_task_due_never_beside_far_tasks_never_comes_out)
{
    auto& never = make(1);
    queue.push(make(2), 10s);
    queue.push(never, sched::manual_clock::time_point::max());
    queue.push(make(3), 20s);
    BOOST_TEST(queue.size() == 3u);
    manual_clock::advance(1h);
    BOOST_TEST(poll_all() == (std::vector<int>{2, 3}), boost::test_tools::per_element());
    BOOST_TEST(queue.reschedule(never, at(2h)));
    manual_clock::advance(1h);
    BOOST_TEST(poll_all() == (std::vector<int>{1}), boost::test_tools::per_element());
}

// A far task rescheduled to "never" keeps the marker in the main heap (at "never"), so that
// pulling the task in again needs no memory: a deadline's reset cannot fail (before, with the
// main heap full, it could not move the task while memory was short).
BOOST_AUTO_TEST_CASE(a_far_task_due_never_is_pulled_in_without_memory)
{
    auto& far = make(1);
    queue.push(far, 10s);
    BOOST_TEST(queue.reschedule(far, manual_clock::time_point::max()));
    manual_clock::advance(9600ms); // the marker falls due and finds nothing that can come out
    BOOST_TEST(queue.poll() == nullptr);
    for (int id = 2; id < 66; ++id) // the main heap's first array full
        queue.push(make(id), 100ms);
    sched::test::fail_next_aligned_allocation();
    BOOST_TEST(queue.reschedule(far, at(2h)));
    BOOST_TEST(sched::test::aligned_allocation_failure_armed()); // nothing allocated
    sched::test::fail_next_aligned_allocation(false);
    manual_clock::advance(100ms);
    BOOST_TEST(poll_all().size() == 64u);
    BOOST_TEST(queue.size() == 1u);
    manual_clock::advance(2h);
    BOOST_TEST(poll_all() == (std::vector<int>{1}), boost::test_tools::per_element());
    BOOST_TEST(queue.empty());
}

// A far push earlier than every far task only moves the marker, which is in the main heap
// already: it needs no room there, and succeeds while the main heap cannot grow (a review found
// that it reserved room all the same, and threw std::bad_alloc).
BOOST_AUTO_TEST_CASE(a_far_push_that_moves_the_marker_needs_no_room_in_the_main_heap)
{
    queue.push(make(1), 20s);       // far: the marker is in the main heap
    for (int id = 2; id < 65; ++id) // with the marker, the main heap's first array full
        queue.push(make(id), 100ms);
    sched::test::fail_next_aligned_allocation();
    BOOST_TEST(!queue.push(make(65), 10s));                      // far, and earlier than 1
    BOOST_TEST(sched::test::aligned_allocation_failure_armed()); // nothing allocated
    sched::test::fail_next_aligned_allocation(false);
    manual_clock::advance(100ms);
    BOOST_TEST(poll_all().size() == 63u);
    manual_clock::advance(20s);
    BOOST_TEST(poll_all() == (std::vector<int>{65, 1}), boost::test_tools::per_element());
}

// A task rescheduled past the horizon while its shard cannot grow stays in the main heap, and may
// come out before far tasks pushed before it and due at the same time, as set_far_tier() says;
// it still comes out once, when due.
BOOST_AUTO_TEST_CASE(a_task_the_far_tier_has_no_memory_for_stays_in_the_main_heap)
{
    for (int id = 0; id < 64; ++id) // this thread's shard: its first array full
        queue.push(make(id), 10s);
    auto& near = make(100);
    queue.push(near, 500ms);
    sched::test::fail_next_aligned_allocation();
    BOOST_TEST(queue.reschedule(near, at(10s)));
    BOOST_TEST(!sched::test::aligned_allocation_failure_armed());
    sched::test::fail_next_aligned_allocation(false);
    BOOST_TEST(!sched::detail::queue_access<queue_type>::in_far_tier(near));
    manual_clock::advance(9999ms);
    BOOST_TEST(queue.poll() == nullptr);
    manual_clock::advance(1ms);
    std::vector<int> out = poll_all();
    BOOST_TEST(out.size() == 65u);
    std::sort(out.begin(), out.end());
    std::vector<int> expected(64);
    std::iota(expected.begin(), expected.end(), 0);
    expected.push_back(100);
    BOOST_TEST(out == expected, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_task_already_queued_far_cannot_be_pushed_again)
{
    auto& a = make(1);
    queue.push(a, 10s);
    BOOST_CHECK_THROW(queue.push(a, 10s), std::invalid_argument);
    BOOST_CHECK_THROW(queue.push(a, 1ms), std::invalid_argument);
    BOOST_TEST(queue.size() == 1u);
}

BOOST_AUTO_TEST_CASE(remove_if_takes_far_and_near_tasks_in_due_order)
{
    for (int i = 0; i < 10; ++i)
        queue.push(make(i), std::chrono::milliseconds(250 * (10 - i))); // 2.5 s down to 0.25 s
    std::vector<node*> out;
    BOOST_TEST(
        queue.remove_if([](node& n) { return id_of(&n) % 3 != 0; }, std::back_inserter(out)) == 6u);
    std::vector<int> ids;
    for (node* n : out)
        ids.push_back(id_of(n));
    BOOST_TEST(ids == (std::vector<int>{8, 7, 5, 4, 2, 1}), boost::test_tools::per_element());
    BOOST_TEST(queue.size() == 4u);
    manual_clock::advance(3s);
    BOOST_TEST(poll_all() == (std::vector<int>{9, 6, 3, 0}), boost::test_tools::per_element());
}

// remove_if() moves every far task to the main heap first; out of memory, it removes nothing
// and throws, also when the far tasks left are due "never" (before, it removed the main heap's
// tasks, left those queued and returned normally: found by a review's probe).
BOOST_AUTO_TEST_CASE(remove_if_out_of_memory_removes_nothing_even_beside_far_tasks_due_never)
{
    auto& a = make(1);
    auto& b = make(2);
    queue.push(a, 10s);
    queue.push(b, 10s);
    BOOST_TEST(queue.reschedule(a, manual_clock::time_point::max()));
    BOOST_TEST(queue.reschedule(b, manual_clock::time_point::max()));
    auto& later = make(3);
    queue.push(later, 500ms);
    BOOST_TEST(queue.reschedule(later, at(3h))); // looks for far tasks to move first: none can
    for (int id = 4; id < 130; ++id) // the main heap's array (128 entries) full, or one short
        queue.push(make(id), 500ms);
    std::vector<node*> out;
    out.reserve(200);
    const auto all = [](node&) {
        return true;
    };
    sched::test::fail_next_aligned_allocation(); // the main heap's growth as the far tasks move
    BOOST_CHECK_THROW(queue.remove_if(all, std::back_inserter(out)), std::bad_alloc);
    sched::test::fail_next_aligned_allocation(false);
    BOOST_TEST(out.empty());
    BOOST_TEST(queue.size() == 129u);
    BOOST_TEST(queue.remove_if(all, std::back_inserter(out)) == 129u);
    BOOST_TEST(queue.empty());
}

// A far task that cannot move to the main heap for want of memory holds up no task due before
// it: its marker comes due again a millisecond later. Before, the marker stayed at the head, due,
// so a taker woke for it over and over, holding up the tasks behind it until memory came back (a
// helper's probe: a worker at 80-95% of a core for as long).
BOOST_AUTO_TEST_CASE(out_of_memory_a_far_task_holds_up_no_task_due_before_it)
{
    queue.push(make(1), 10s); // far: its marker comes due at 9.5 s
    manual_clock::advance(9s);
    queue.push(make(2), 800ms);
    for (int id = 3; id < 65; ++id) // with the marker, the main heap's first array full
        queue.push(make(id), 990ms);
    manual_clock::advance(900ms);
    sched::test::fail_next_aligned_allocation(); // the main heap's growth as the far task moves
    BOOST_TEST(id_of(queue.poll()) == 2);
    BOOST_TEST(!sched::test::aligned_allocation_failure_armed()); // the move was tried
    sched::test::fail_next_aligned_allocation(false);
    BOOST_TEST(queue.poll() == nullptr);
    manual_clock::advance(100ms);
    const std::vector<int> rest = poll_all();
    BOOST_TEST(rest.size() == 63u);
    BOOST_TEST(rest.back() == 1);
    BOOST_TEST(queue.empty());
}

// A far task that a taker could not move for want of memory, moved later by a push in front of
// the marker (the head until then), is the new head: the taker asleep is woken for it. Before,
// the check for a new head read the head after the move, found no marker there, and woke nobody
// (a review's finding).
BOOST_AUTO_TEST_CASE(a_far_task_moved_in_front_of_the_marker_wakes_the_taker,
                     *boost::unit_test::timeout(60))
{
    queue.push(make(1), 10s);       // far: the marker is due at 9.5 s
    for (int id = 2; id < 65; ++id) // with the marker, the main heap's first array full
        queue.push(make(id), manual_clock::time_point::max());
    manual_clock::advance(10200ms);
    sched::test::blocking_call taker([&] {
        sched::test::fail_next_aligned_allocation(); // its move of 1 fails: the marker waits
        return id_of(queue.take());
    });
    BOOST_TEST_REQUIRE(taker.wait_until_blocked());
    queue.push(make(65), 300ms);  // moves 1 first, which it would pass: overdue, the head
    BOOST_TEST(taker.get() == 1); // before, it slept until the clock next moved
}

BOOST_AUTO_TEST_CASE(drain_and_clear_see_the_far_tier)
{
    for (int i = 0; i < 6; ++i)
        queue.push(make(i), std::chrono::seconds(i + 1));
    manual_clock::advance(3s);
    std::vector<node*> out;
    BOOST_TEST(queue.drain(std::back_inserter(out)) == 3u);
    BOOST_TEST(id_of(out.back()) == 2);
    BOOST_TEST(queue.clear() == 3u);
    BOOST_TEST(queue.empty());
    BOOST_TEST(queue.peek() == nullptr);
    BOOST_TEST(!queue.remove(storage[5]));
}

BOOST_AUTO_TEST_CASE(clear_hands_over_every_task_once_near_and_far_and_each_can_be_pushed_again)
{
    for (int i = 0; i < 6; ++i)
        queue.push(make(i), i % 2 == 0 ? 100ms : 10s); // three near, three far
    std::vector<int> cleared;
    BOOST_TEST(queue.clear([&](node& n) noexcept {
        cleared.push_back(id_of(&n));
        BOOST_TEST(queue.size() == 0u); // called outside the lock, once all are out
    }) == 6u);
    std::sort(cleared.begin(), cleared.end());
    BOOST_TEST(cleared == (std::vector<int>{0, 1, 2, 3, 4, 5}), boost::test_tools::per_element());
    BOOST_TEST(queue.empty());
    queue.push(storage[1], 1s); // no longer queued anywhere
    manual_clock::advance(1s);
    BOOST_TEST(poll_all() == (std::vector<int>{1}), boost::test_tools::per_element());
}

// While the far tier is open, a removal cannot tell that the queue became empty (that would take
// every shard's lock); once it is closed, it can.
BOOST_AUTO_TEST_CASE(a_removal_tells_the_queue_is_empty_once_the_far_tier_is_closed)
{
    auto& a = make(1);
    auto& b = make(2);
    auto& c = make(3);
    queue.push(a, 10s);
    queue.push(b, 10s);
    queue.push(c, 100ms);
    std::vector<bool> emptied;
    const auto note = [&](bool e) noexcept {
        emptied.push_back(e);
    };
    BOOST_TEST(queue.remove(a, note));
    BOOST_TEST(queue.remove(c, note)); // the main heap is empty, the far tier is not
    queue.close_far_tier();
    queue.push(make(4), 10s);          // the main heap now
    BOOST_TEST(queue.remove(b, note)); // from its shard, which still holds it
    BOOST_TEST(queue.remove(storage[3], note));
    BOOST_TEST(emptied == (std::vector<bool>{false, false, false, true}),
               boost::test_tools::per_element());
    BOOST_TEST(queue.under_locks([](bool empty) { return empty; }));
}

BOOST_AUTO_TEST_CASE(bad_far_tier_settings_are_refused)
{
    queue_type other;
    BOOST_CHECK_THROW(other.set_far_tier(-1s, 4), std::invalid_argument);
    BOOST_CHECK_THROW(other.set_far_tier(1s, queue_type::max_far_shards + 1),
                      std::invalid_argument);
    other.set_far_tier(0s, 4); // none
    test_task t(1);
    other.push(t, 1h);
    BOOST_TEST(other.remove(t));
}

// Threads that push and remove far tasks at once, and a taker: every task comes out exactly once
// or is removed exactly once, never both.
BOOST_AUTO_TEST_CASE(producers_on_their_own_shards_lose_no_task, *boost::unit_test::timeout(120))
{
    constexpr int producers = 3;
    constexpr int per_producer = 4000;
    std::vector<std::unique_ptr<test_task>> tasks;
    for (int i = 0; i < producers * per_producer; ++i)
        tasks.push_back(std::make_unique<test_task>(i));
    std::vector<std::atomic<int>> outcomes(tasks.size()); // 1: taken, 2: removed
    std::atomic<int> taken{0};
    std::stop_source stop;
    auto taker = std::async(std::launch::async, [&] {
        while (node* n = queue.take(stop.get_token()))
        {
            outcomes[static_cast<std::size_t>(id_of(n))].fetch_add(1);
            taken.fetch_add(1);
        }
    });
    std::vector<std::future<int>> threads;
    for (int p = 0; p < producers; ++p)
    {
        threads.push_back(std::async(std::launch::async, [&, p] {
            int removed = 0;
            for (int i = 0; i < per_producer; ++i)
            {
                test_task& t = *tasks[static_cast<std::size_t>(p * per_producer + i)];
                queue.push(t, std::chrono::milliseconds(500 + (i * 37) % 3000));
                if (i % 2 == 1 &&
                    queue.remove(*tasks[static_cast<std::size_t>(p * per_producer + i - 1)]))
                {
                    outcomes[static_cast<std::size_t>(p * per_producer + i - 1)].fetch_add(2);
                    ++removed;
                }
                if (i % 100 == 0)
                    manual_clock::advance(10ms); // some fall due and move while others push
            }
            return removed;
        }));
    }
    int removed = 0;
    for (auto& f : threads)
        removed += f.get();
    manual_clock::advance(1h);
    while (taken + removed < producers * per_producer) // the test's timeout bounds this
        std::this_thread::yield();
    stop.request_stop();
    taker.get();
    BOOST_TEST(taken + removed == producers * per_producer);
    BOOST_TEST(removed > 0);
    for (const auto& o : outcomes)
        BOOST_TEST_REQUIRE((o == 1 || o == 2));
    BOOST_TEST(queue.empty());
}

BOOST_AUTO_TEST_SUITE_END()
