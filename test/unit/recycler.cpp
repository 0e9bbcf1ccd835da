#include <sched/detail/background_unmap.hpp>
#include <sched/detail/recycler.hpp>

#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <new>
#include <numeric>
#include <random>
#include <stop_token>
#include <thread>
#include <utility>
#include <vector>

#include "support/recycler_probe.hpp"
#include "support/resident_memory.hpp"
#include "support/wait.hpp"
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

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

// Set while a test forks: this program's own fork handler then allocates from the recycler.
std::atomic<bool> prepare_allocates{false};

void allocate_in_prepare() noexcept
{
    if (prepare_allocates.load())
        recycled_deallocate(recycled_allocate(max_recycled_size), max_recycled_size);
}

// Registered as this file's static objects are made: before the library's handlers, unless the
// library's are registered first.
const int prepare_registered = pthread_atfork(&allocate_in_prepare, nullptr, nullptr);

// Allocates `size` bytes from the recycler and writes all of them.
void* allocate_and_fill(std::size_t size)
{
    void* block = recycled_allocate(size);
    std::memset(block, 0xab, size);
    return block;
}

// `count` blocks of `size` bytes, allocated (and filled) on a thread that then ends, so that none
// is left in its cache.
std::vector<void*> allocate_on_new_thread(std::size_t size, std::size_t count)
{
    return on_new_thread([=] {
        std::vector<void*> allocated(count);
        for (void*& block : allocated)
            block = allocate_and_fill(size);
        return allocated;
    });
}

// Frees `blocks` on a thread that then ends, so that none is left in its cache.
void free_on_new_thread(const std::vector<void*>& blocks, std::size_t size)
{
    on_new_thread([&] {
        for (void* block : blocks)
            recycled_deallocate(block, size);
        return 0;
    });
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

BOOST_AUTO_TEST_CASE(blocks_are_aligned_for_any_object_of_their_size)
{
    // An object's alignment divides its size and, unless it is over-aligned (which the recycling
    // allocator sends to operator new), __STDCPP_DEFAULT_NEW_ALIGNMENT__. Many blocks of each
    // size, so that blocks deep into a span are checked too.
    const std::size_t misaligned = on_new_thread([] {
        std::size_t count = 0;
        std::vector<void*> blocks(100);
        for (std::size_t size = 1; size <= max_recycled_size + 64; size += 7)
        {
            const std::size_t alignment = std::gcd(size, __STDCPP_DEFAULT_NEW_ALIGNMENT__);
            for (void*& block : blocks)
            {
                block = allocate_and_fill(size);
                count += address(block) % alignment != 0;
            }
            for (void* block : blocks)
                recycled_deallocate(block, size);
        }
        return count;
    });
    BOOST_TEST(misaligned == 0u);
}

BOOST_TEST_DECORATOR(*boost::unit_test::precondition(recycling))
BOOST_AUTO_TEST_CASE(blocks_of_a_size_class_lie_side_by_side_with_no_header)
{
    // A pool's one-shot task with a one-pointer capture is 56 bytes: malloc would put its own
    // header in front of each and take 64.
    constexpr std::size_t size = 56;
    std::vector<std::uintptr_t> seen = on_new_thread([] {
        std::vector<void*> blocks(1'000);
        for (void*& block : blocks)
            block = allocate_and_fill(size);
        std::vector<std::uintptr_t> addresses;
        std::transform(blocks.begin(), blocks.end(), std::back_inserter(addresses), address);
        for (void* block : blocks)
            recycled_deallocate(block, size);
        return addresses;
    });
    std::sort(seen.begin(), seen.end());
    std::size_t adjacent = 0;
    for (std::size_t i = 1; i < seen.size(); ++i)
        adjacent += seen[i] - seen[i - 1] == size;
    // All but the steps from one span to the next (a 64 KB span holds over a thousand, but run
    // in one process with other suites, the thread may start on spans they left part-used);
    // malloc's blocks, each with a header, would have none adjacent.
    BOOST_TEST(adjacent >= seen.size() * 95 / 100);
}

BOOST_TEST_DECORATOR(*boost::unit_test::precondition(recycling) *
                     boost::unit_test::precondition(sched::test::resident_size_readable))
BOOST_AUTO_TEST_CASE(memory_freed_on_another_thread_goes_back_to_the_system)
{
    // 64 MB of 56-byte blocks, allocated on one thread and freed on another; both threads end,
    // so nothing is left in their caches. The resident size then falls back by most of it.
    constexpr std::size_t size = 56;
    constexpr std::size_t count = (std::size_t(64) << 20) / size;
    sched::detail::release_idle_spans(); // see below
    const std::int64_t before = sched::test::resident_bytes();
    std::vector<void*> blocks = allocate_on_new_thread(size, count);
    const std::int64_t peak = sched::test::resident_bytes();
    free_on_new_thread(blocks, size);
    blocks = std::vector<void*>();
    BOOST_TEST_REQUIRE(peak - before >= std::int64_t(count * size));
    // The spans are unmapped on the unmapping thread, soon after.
    std::int64_t after = 0;
    BOOST_TEST(sched::test::eventually([&] {
                   after = sched::test::resident_bytes();
                   return after - before < (peak - before) / 4;
               }),
               "before " << before << ", with the blocks " << peak << ", after " << after);
}

// A thread that only frees blocks of a class (it cancels a million timeouts, in no particular
// order) keeps few of them, though it lives on: the last 288 it freed would each keep a different
// span mapped, 18 MB.
BOOST_TEST_DECORATOR(*boost::unit_test::precondition(recycling) *
                     boost::unit_test::precondition(sched::test::resident_size_readable))
BOOST_AUTO_TEST_CASE(a_thread_that_only_frees_blocks_keeps_few_spans_mapped)
{
    constexpr std::size_t size = 56;
    constexpr std::size_t count = (std::size_t(64) << 20) / size;
    std::vector<void*> blocks(count); // resident before the first reading
    // Spans that earlier tests left idle (resident) would be reused, and not counted in the peak.
    sched::detail::release_idle_spans();
    const std::int64_t before = sched::test::resident_bytes();
    on_new_thread([&] {
        std::generate(blocks.begin(), blocks.end(), [] { return allocate_and_fill(size); });
        return 0;
    });
    const std::int64_t peak = sched::test::resident_bytes();
    BOOST_TEST_REQUIRE(peak - before >= std::int64_t(count * size));
    std::shuffle(blocks.begin(), blocks.end(), std::mt19937(1));
    // Read while the freeing thread still runs: as it ends, it gives its cache back.
    std::int64_t after = 0;
    const bool fell = on_new_thread([&] {
        for (void* block : blocks)
            recycled_deallocate(block, size);
        return sched::test::eventually([&] {
            after = sched::test::resident_bytes();
            return after - before < 4 << 20;
        });
    });
    BOOST_TEST(fell, "before " << before << ", with the blocks " << peak << ", after " << after);
}

// Spans emptied by a thread's frees go back to the system on the unmapping thread, not on the
// freeing one (kept idle for a while first, or, beyond what may be kept idle, at once: a burst of
// them, fewer than the 1 MB that may wait for that thread).
BOOST_TEST_DECORATOR(*boost::unit_test::precondition(recycling))
BOOST_AUTO_TEST_CASE(spans_a_thread_empties_are_unmapped_by_the_unmapping_thread)
{
    constexpr std::size_t size = 56;
    constexpr std::size_t spans = 8;                                 // 512 KB
    constexpr std::size_t count = spans * ((64 * 1024 - 64) / size); // a span's blocks
    // What the thread had before is counted (it is idle), so the count below is this test's.
    BOOST_TEST_REQUIRE(sched::test::eventually(sched::detail::unmapping_thread_idle));
    const std::size_t before = sched::detail::blocks_unmapped_in_background();
    std::vector<void*> blocks = allocate_on_new_thread(size, count);
    free_on_new_thread(blocks, size);
    // All but the class's spare, and two that blocks of other tests may share.
    BOOST_TEST(sched::test::eventually(
        [&] { return sched::detail::blocks_unmapped_in_background() - before >= spans - 3; }));
}

// A span that empties is kept mapped for a while (span decay): blocks freed by one thread and
// allocated again by another soon after come from the same spans, not new ones; spans idle for
// about a second go back to the system on the unmapping thread.
BOOST_TEST_DECORATOR(*boost::unit_test::precondition(recycling))
BOOST_AUTO_TEST_CASE(emptied_spans_are_reused_first_and_unmapped_after_a_while)
{
    constexpr std::size_t size = 152; // a class no other test uses
    constexpr std::size_t spans = 6;
    constexpr std::size_t count = spans * ((64 * 1024 - 64) / size);
    sched::detail::release_idle_spans();
    std::vector<void*> blocks = allocate_on_new_thread(size, count);
    auto span_of = [](const void* block) {
        return address(block) >> 16;
    };
    std::vector<std::uintptr_t> first(count);
    std::transform(blocks.begin(), blocks.end(), first.begin(), span_of);
    std::sort(first.begin(), first.end());
    free_on_new_thread(blocks, size);
    BOOST_TEST(sched::detail::idle_spans_exist());
    std::vector<void*> again = allocate_on_new_thread(size, count);
    // From the same spans (one more at most: what the first thread's last refill left).
    std::vector<std::uintptr_t> second(count);
    std::transform(again.begin(), again.end(), second.begin(), span_of);
    std::sort(second.begin(), second.end());
    second.erase(std::unique(second.begin(), second.end()), second.end());
    const auto new_spans = std::count_if(second.begin(), second.end(), [&](std::uintptr_t s) {
        return !std::binary_search(first.begin(), first.end(), s);
    });
    BOOST_TEST(new_spans <= 1);
    free_on_new_thread(again, size);
    BOOST_TEST(sched::test::eventually([] { return !sched::detail::idle_spans_exist(); }));
}

// A block that a thread first frees in a pthread key's destructor (the thread exit's last phase,
// after its thread_local objects are gone) goes back to its span all the same: a thread_local
// that would give it back, if made that late, would never be destroyed. The thread that
// allocated each block gave back its cache as it ended; whatever stayed in the freeing threads'
// caches would keep the memory resident.
BOOST_TEST_DECORATOR(*boost::unit_test::precondition(recycling) *
                     boost::unit_test::precondition(sched::test::resident_size_readable))
BOOST_AUTO_TEST_CASE(a_block_first_freed_in_a_pthread_key_destructor_goes_back_to_its_span)
{
    constexpr std::size_t size = max_recycled_size;
    constexpr int rounds = 5'000;
    struct freeing_key
    {
        pthread_key_t key{};
        freeing_key()
        {
            BOOST_TEST_REQUIRE(pthread_key_create(&key, [](void* block) {
                                   recycled_deallocate(block, size);
                               }) == 0);
        }
        ~freeing_key() { pthread_key_delete(key); }
    } freeing;
    // A round first, so that the spans it needs are there before the resident size is read.
    auto round = [&] {
        void* block = on_new_thread([] { return allocate_and_fill(size); });
        on_new_thread([&] { return pthread_setspecific(freeing.key, block); });
    };
    round();
    const std::int64_t before = sched::test::resident_bytes();
    for (int i = 0; i < rounds; ++i)
        round();
    // Kept, the blocks would hold about 5 MB. (Their spans are unmapped on the unmapping thread,
    // soon after.)
    std::int64_t after = 0;
    BOOST_TEST(sched::test::eventually([&] {
                   after = sched::test::resident_bytes();
                   return after - before < std::int64_t(rounds * size / 4);
               }),
               "before " << before << ", after " << after);
}

// A process forked while another thread holds a lock of the spans would find it locked for good:
// the fork waits for the locks, so the child can allocate and free (more than its cache holds:
// it takes the locks).
BOOST_TEST_DECORATOR(*boost::unit_test::precondition(recycling))
BOOST_AUTO_TEST_CASE(a_process_forked_while_another_thread_uses_the_recycler_can_use_it,
                     *boost::unit_test::timeout(120))
{
    constexpr std::size_t size = 56;
    constexpr std::size_t count = 2'000; // more than a thread's cache keeps of a class
    // Stopped and joined as the test ends, even by a failed requirement.
    std::jthread churn([&](const std::stop_token& stop) {
        std::vector<void*> blocks(count);
        while (!stop.stop_requested())
        {
            for (void*& block : blocks)
                block = recycled_allocate(size);
            for (void* block : blocks)
                recycled_deallocate(block, size);
        }
    });
    std::vector<void*> blocks(count); // the child's, so that it needs no other memory
    int stuck = 0;
    for (int i = 0; i < 50 && stuck == 0; ++i)
    {
        const pid_t child = fork();
        BOOST_TEST_REQUIRE(child >= 0);
        if (child == 0)
        {
            std::signal(SIGALRM, SIG_DFL); // not the test runner's handler: the child ends
            alarm(5);                      // stuck on a lock, it is killed
            for (void*& block : blocks)
                block = recycled_allocate(size);
            for (void* block : blocks)
                recycled_deallocate(block, size);
            _exit(0);
        }
        int status = 0;
        BOOST_TEST_REQUIRE(waitpid(child, &status, 0) == child);
        stuck += !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    }
    BOOST_TEST(stuck == 0);
}

// A prepare handler that the program registers as it starts runs before the library's, which
// take the spans' locks: it may allocate (it waited for a lock the forking thread held itself).
BOOST_TEST_DECORATOR(*boost::unit_test::precondition(recycling))
BOOST_AUTO_TEST_CASE(a_fork_handler_the_program_registers_may_use_the_recycler,
                     *boost::unit_test::timeout(60))
{
    BOOST_TEST_REQUIRE(prepare_registered == 0);
    const int status = on_new_thread([] { // a cache that starts empty: the refill takes a lock
        prepare_allocates = true;
        const pid_t child = fork();
        prepare_allocates = false;
        if (child == 0)
            _exit(0);
        int waited = -1;
        if (child > 0 && waitpid(child, &waited, 0) != child)
            waited = -1;
        return waited;
    });
    BOOST_TEST((WIFEXITED(status) && WEXITSTATUS(status) == 0));
}

BOOST_AUTO_TEST_SUITE_END()
