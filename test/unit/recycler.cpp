#include <sched/detail/recycler.hpp>

#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <new>
#include <thread>
#include <utility>
#include <vector>

#include "support/recycler_probe.hpp"

using sched::detail::max_recycled_size;
using sched::detail::recycled_allocate;
using sched::detail::recycled_deallocate;
using sched::test::address;
using sched::test::recycling;

namespace {

// Runs `f` on a thread of its own, whose cache starts empty (the test runner's thread has freed
// blocks of its own in earlier tests), and returns what it returned.
template <class F>
auto on_new_thread(F f)
{
    decltype(f()) result{};
    std::thread([&] { result = f(); }).join();
    return result;
}

// What a test saw on its thread, checked on the test runner's.
struct addresses
{
    std::uintptr_t block = 0;
    std::uintptr_t other = 0;
    std::uintptr_t again = 0;
};

// Allocates `size` bytes from the recycler and writes all of them.
void* allocate_and_fill(std::size_t size)
{
    void* block = recycled_allocate(size);
    std::memset(block, 0xab, size);
    return block;
}

const std::vector<std::size_t> recycled_sizes{8, 56, 232, 256, 257, 296, 700, max_recycled_size};

} // namespace

BOOST_AUTO_TEST_SUITE(test_recycler)

BOOST_TEST_DECORATOR(*boost::unit_test::precondition(recycling))
BOOST_DATA_TEST_CASE(a_freed_block_is_handed_out_again_for_the_same_size,
                     boost::unit_test::data::make(recycled_sizes),
                     size)
{
    const addresses seen = on_new_thread([size] {
        addresses seen;
        void* block = allocate_and_fill(size);
        seen.block = address(block);
        recycled_deallocate(block, size);
        // Had the block gone back to operator delete, malloc would hand it out here.
        void* other = ::operator new(size);
        seen.other = address(other);
        void* again = allocate_and_fill(size);
        seen.again = address(again);
        recycled_deallocate(again, size);
        ::operator delete(other);
        return seen;
    });
    BOOST_TEST(seen.other != seen.block);
    BOOST_TEST(seen.again == seen.block);
}

BOOST_TEST_DECORATOR(*boost::unit_test::precondition(recycling))
BOOST_AUTO_TEST_CASE(sizes_of_one_class_share_its_blocks_and_other_classes_do_not)
{
    const addresses seen = on_new_thread([] {
        // 290 and 320 are both in the class of 320-byte blocks; 321 is in the next one.
        addresses seen;
        void* block = allocate_and_fill(290);
        seen.block = address(block);
        recycled_deallocate(block, 290);
        void* larger = allocate_and_fill(321);
        seen.other = address(larger);
        void* same_class = allocate_and_fill(320);
        seen.again = address(same_class);
        recycled_deallocate(same_class, 320);
        recycled_deallocate(larger, 321);
        return seen;
    });
    BOOST_TEST(seen.other != seen.block);
    BOOST_TEST(seen.again == seen.block);
}

BOOST_TEST_DECORATOR(*boost::unit_test::precondition(recycling))
BOOST_AUTO_TEST_CASE(a_batch_of_256_blocks_freed_together_all_comes_back)
{
    // A handler's worth of completions frees its operations' blocks together: keeping only some
    // of them was measured to cost more than keeping none.
    constexpr std::size_t batch = 256;
    for (const std::size_t size : {std::size_t(232), std::size_t(296), max_recycled_size})
    {
        // The blocks of the first round of allocations, then of the second.
        using rounds = std::pair<std::vector<std::uintptr_t>, std::vector<std::uintptr_t>>;
        auto [first, second] = on_new_thread([size] {
            rounds seen;
            std::vector<void*> blocks(batch);
            for (void*& block : blocks)
                block = allocate_and_fill(size);
            std::transform(blocks.begin(), blocks.end(), std::back_inserter(seen.first), address);
            for (void* block : blocks)
                recycled_deallocate(block, size);
            for (void*& block : blocks)
                block = allocate_and_fill(size);
            std::transform(blocks.begin(), blocks.end(), std::back_inserter(seen.second), address);
            for (void* block : blocks)
                recycled_deallocate(block, size);
            return seen;
        });
        std::sort(first.begin(), first.end());
        std::sort(second.begin(), second.end());
        BOOST_TEST(second == first, "size " << size);
    }
}

BOOST_AUTO_TEST_CASE(blocks_are_aligned_for_any_object)
{
    const std::size_t misaligned = on_new_thread([] {
        std::size_t count = 0;
        for (std::size_t size = 1; size <= max_recycled_size + 64; size += 7)
        {
            void* block = allocate_and_fill(size);
            count += address(block) % __STDCPP_DEFAULT_NEW_ALIGNMENT__ != 0;
            recycled_deallocate(block, size);
        }
        return count;
    });
    BOOST_TEST(misaligned == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
