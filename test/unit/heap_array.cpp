// The array under a queue's heap: it keeps its entries through every resize, grows with
// push_back, and gives memory back as it empties - in bounded steps where the system resizes it
// in place (remaps_memory: Linux without a sanitizer), by halving where a resize copies (the
// sanitizer builds).

#include <sched/detail/heap_array.hpp>

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <new>
#include <utility>

#include "support/failing_allocation.hpp"

namespace {

struct entry // as the queue's: a due time and a pointer, 16 bytes
{
    std::int64_t due;
    const void* task;
};

using array_type = sched::detail::heap_array<entry, 8>;

entry make(std::size_t i)
{
    return entry{static_cast<std::int64_t>(i) * 3, reinterpret_cast<const void*>(i)};
}

bool holds_first(const array_type& a, std::size_t n)
{
    if (a.size() != n)
        return false;
    for (std::size_t i = 0; i < n; ++i)
    {
        if (a[i].due != make(i).due || a[i].task != make(i).task)
            return false;
    }
    return true;
}

// More entries than fit below the size that is mapped (128 KB), and several steps of release.
constexpr std::size_t many = 200'000;

// An array holding make(0) ... make(n - 1).
array_type filled(std::size_t n)
{
    array_type a;
    for (std::size_t i = 0; i < n; ++i)
        a.push_back(make(i));
    return a;
}

// Takes out the last entry as the queue's heap does: then gives back what is spare.
void remove_last(array_type& a)
{
    a.pop_back();
    a.release_spare();
}

} // namespace

BOOST_AUTO_TEST_SUITE(test_heap_array)

BOOST_AUTO_TEST_CASE(entries_survive_every_growth_and_every_shrink)
{
    array_type a = filled(many);
    BOOST_TEST(holds_first(a, many));
    BOOST_TEST(a.capacity() >= many);
    while (a.size() > 10)
        remove_last(a);
    BOOST_TEST(holds_first(a, 10));
    for (std::size_t i = 10; i < many; ++i) // grows again from a small array
        a.push_back(make(i));
    BOOST_TEST(holds_first(a, many));
}

BOOST_AUTO_TEST_CASE(the_groups_of_children_start_on_their_own_boundary)
{
    array_type a;
    for (std::size_t i = 0; i < many; ++i)
    {
        a.push_back(make(i));
        // Entry 1, the first child of the front, starts a group of eight: 128 bytes.
        BOOST_TEST_REQUIRE(reinterpret_cast<std::uintptr_t>(&a[0] + 1) % 128 == 0);
    }
    while (a.size() > 1)
    {
        remove_last(a);
        BOOST_TEST_REQUIRE(reinterpret_cast<std::uintptr_t>(&a[0] + 1) % 128 == 0);
    }
}

BOOST_AUTO_TEST_CASE(an_emptying_array_keeps_room_for_as_many_again_and_gives_the_rest_back)
{
    array_type a = filled(many);
    const std::size_t full = a.capacity();
    const std::size_t step_entries = array_type::release_step / sizeof(entry);
    std::size_t largest_step = 0; // entries given back at once
    std::size_t capacity = full;
    while (!a.empty())
    {
        remove_last(a);
        BOOST_TEST_REQUIRE(a.capacity() <= capacity); // it never grows on the way down
        if (a.capacity() != capacity)
            BOOST_TEST_REQUIRE(a.capacity() >= 2 * a.size());
        // What it keeps: at most four times what it holds, or twice that and a step.
        BOOST_TEST_REQUIRE(a.capacity() <=
                           std::max({4 * a.size() + 4, 2 * a.size() + step_entries + 2,
                                     2 * array_type::min_capacity}));
        largest_step = std::max(largest_step, capacity - a.capacity());
        capacity = a.capacity();
    }
    BOOST_TEST(a.capacity() <= 2 * array_type::min_capacity);
    if constexpr (sched::detail::remaps_memory)
        BOOST_TEST(largest_step <= step_entries + 2, "gave back " << largest_step << " at once");
    else // halving: the first shrink gives back half the full array
        BOOST_TEST(largest_step >= full / 2);
}

BOOST_AUTO_TEST_CASE(pushing_back_one_of_its_own_entries_copies_it_before_growing)
{
    array_type a;
    for (std::size_t i = 0; i < many; ++i)
    {
        if (a.size() == a.capacity() && a.size() > 5)
        {
            a.push_back(a[5]); // from the block the growth leaves
            BOOST_TEST_REQUIRE(a.back().due == make(5).due);
            a.pop_back();
        }
        a.push_back(make(i));
    }
    BOOST_TEST(holds_first(a, many));
}

BOOST_AUTO_TEST_CASE(release_spare_keeps_an_array_that_is_not_emptier_than_its_threshold)
{
    array_type a = filled(many);
    const std::size_t capacity = a.capacity();
    BOOST_TEST(!a.has_spare());
    a.release_spare();
    BOOST_TEST(a.capacity() == capacity);
    BOOST_TEST(holds_first(a, many));
}

BOOST_AUTO_TEST_CASE(a_failed_growth_changes_nothing)
{
    array_type a = filled(array_type::min_capacity); // full, below the mapped size
    BOOST_TEST_REQUIRE(a.size() == a.capacity());
    sched::test::fail_next_aligned_allocation();
    BOOST_CHECK_THROW(a.push_back(make(a.size())), std::bad_alloc);
    sched::test::fail_next_aligned_allocation(false);
    BOOST_TEST(holds_first(a, array_type::min_capacity));
    BOOST_TEST(a.capacity() == array_type::min_capacity);
    a.push_back(make(a.size()));
    BOOST_TEST(holds_first(a, array_type::min_capacity + 1));
}

BOOST_AUTO_TEST_CASE(a_failed_shrink_keeps_the_larger_array_and_its_entries)
{
    array_type a = filled(1024); // below the mapped size: shrinking copies
    while (!a.has_spare())
        a.pop_back();
    const std::size_t capacity = a.capacity();
    const std::size_t size = a.size();
    sched::test::fail_next_aligned_allocation();
    a.release_spare();
    sched::test::fail_next_aligned_allocation(false);
    BOOST_TEST(a.capacity() == capacity);
    BOOST_TEST(holds_first(a, size));
    BOOST_TEST(!a.has_spare()); // it does not try again at once
}

BOOST_AUTO_TEST_CASE(erase_and_truncate_keep_the_order_of_what_remains)
{
    array_type a = filled(10);
    a.erase(a.begin() + 2, a.begin() + 5);
    BOOST_TEST_REQUIRE(a.size() == 7u);
    const std::size_t expected[] = {0, 1, 5, 6, 7, 8, 9};
    for (std::size_t i = 0; i < 7; ++i)
        BOOST_TEST(a[i].due == make(expected[i]).due);
    a.truncate(3);
    BOOST_TEST(a.size() == 3u);
    BOOST_TEST(a.back().due == make(5).due);
}

BOOST_AUTO_TEST_CASE(a_moved_array_takes_the_entries_and_leaves_an_empty_one)
{
    array_type a = filled(many);
    array_type b = std::exchange(a, {});
    BOOST_TEST(a.empty());
    BOOST_TEST(a.capacity() == 0u);
    BOOST_TEST(holds_first(b, many));
    a.push_back(make(0));
    BOOST_TEST(holds_first(a, 1));
}

BOOST_AUTO_TEST_SUITE_END()
