// Memory handed to the unmapping thread goes back to the system, unmapped by that thread rather
// than the caller. A block is checked unmapped with mincore(), which fails with ENOMEM on an
// unmapped range; so each test maps nothing between handing blocks over and checking them (a new
// mapping could take their place).

#include <sched/delayed_work_queue.hpp>

#include <sched/detail/background_unmap.hpp>
#include <sched/detail/mapped_memory.hpp>
#include <sched/detail/recycler.hpp>
#include <sched/detail/sanitizers.hpp>

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <latch>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "support/child_process.hpp"
#include "support/wait.hpp"
#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

using sched::detail::blocks_unmapped_in_background;
using sched::detail::map_memory;
using sched::detail::unmap_in_background;

namespace {

constexpr std::size_t page = 4096;

boost::test_tools::assertion_result mapping(boost::unit_test::test_unit_id)
{
    boost::test_tools::assertion_result result(sched::detail::maps_memory);
    result.message() << "memory comes from operator new here (no mmap, or AddressSanitizer)";
    return result;
}

void* map_and_fill(std::size_t bytes)
{
    void* block = map_memory(bytes, page);
    std::memset(block, 0x5a, bytes);
    return block;
}

bool unmapped(void* block, std::size_t bytes)
{
    // mincore() fails with ENOMEM if any page of the range is unmapped; so a block is wholly
    // unmapped if its first and last pages are (it is unmapped in one call).
    unsigned char resident = 0;
    auto* last = static_cast<std::byte*>(block) + bytes - page;
    return ::mincore(block, page, &resident) == -1 && errno == ENOMEM &&
           ::mincore(last, page, &resident) == -1 && errno == ENOMEM;
}

bool all_unmapped(const std::vector<void*>& blocks, std::size_t bytes)
{
    for (void* block : blocks)
    {
        if (!unmapped(block, bytes))
            return false;
    }
    return true;
}

// The id of this process's thread named `name` (Linux's /proc/self/task/*/comm), if any.
std::optional<pid_t> thread_named(const std::string& name)
{
    std::error_code error;
    for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", error))
    {
        std::ifstream comm(task.path() / "comm");
        std::string line;
        if (std::getline(comm, line) && line == name)
            return std::stoi(task.path().filename().string());
    }
    return std::nullopt;
}

bool has_thread_named(const std::string& name)
{
    return thread_named(name).has_value();
}

} // namespace

BOOST_AUTO_TEST_SUITE(test_background_unmap)

BOOST_TEST_DECORATOR(*boost::unit_test::precondition(mapping))
BOOST_AUTO_TEST_CASE(a_block_handed_over_is_unmapped_soon_after)
{
    constexpr std::size_t bytes = 16 * page;
    void* block = map_and_fill(bytes);
    // What the thread had before is counted (it is idle), so the count below is this test's.
    BOOST_TEST_REQUIRE(sched::test::eventually(sched::detail::unmapping_thread_idle));
    const std::size_t before = blocks_unmapped_in_background();
    unmap_in_background(block, bytes, page);
    BOOST_TEST(sched::test::eventually([&] { return unmapped(block, bytes); }));
    // By the thread: it counts what it unmaps (after unmapping it).
    BOOST_TEST(
        sched::test::eventually([&] { return blocks_unmapped_in_background() >= before + 1; }));
}

#if defined(__linux__)
BOOST_TEST_DECORATOR(*boost::unit_test::precondition(mapping))
BOOST_AUTO_TEST_CASE(the_unmapping_is_done_by_a_thread_named_sched_unmap)
{
    void* block = map_and_fill(page);
    sched::detail::release_idle_spans(); // none ages meanwhile: the count below is this block's
    BOOST_TEST_REQUIRE(sched::test::eventually(sched::detail::unmapping_thread_idle));
    const std::size_t before = blocks_unmapped_in_background();
    unmap_in_background(block, page, page);
    // The thread names itself before it unmaps anything, and counts what it unmapped.
    BOOST_TEST(sched::test::eventually([&] { return unmapped(block, page); }));
    BOOST_TEST(sched::test::eventually([&] {
        return sched::detail::unmapping_thread_idle() &&
               blocks_unmapped_in_background() == before + 1;
    }));
    BOOST_TEST(has_thread_named("sched-unmap"));
}
#endif

// At most 1 MB waits for the thread: memory freed faster than it gives it back goes back as it is
// freed. A block larger than that is unmapped before the call returns.
BOOST_TEST_DECORATOR(*boost::unit_test::precondition(mapping))
BOOST_AUTO_TEST_CASE(a_block_larger_than_what_may_wait_is_unmapped_at_once)
{
    constexpr std::size_t bytes = (std::size_t(1) << 20) + page;
    void* block = map_and_fill(bytes);
    unmap_in_background(block, bytes, page);
    BOOST_TEST(unmapped(block, bytes));
}

// A block shrunk in place keeps its contents up to the new size; the whole pages past it are
// unmapped by the thread; and it can be resized again as a block of the new size.
BOOST_TEST_DECORATOR(*boost::unit_test::precondition(mapping))
BOOST_AUTO_TEST_CASE(a_block_shrunk_in_place_keeps_its_start_and_loses_its_tail)
{
    constexpr std::size_t old_bytes = 64 * page;
    constexpr std::size_t new_bytes = 10 * page + 100; // its last page is kept whole
    void* block = map_and_fill(old_bytes);
    // What the thread had before is counted (it is idle), so the count below is this test's.
    BOOST_TEST_REQUIRE(sched::test::eventually(sched::detail::unmapping_thread_idle));
    const std::size_t before = blocks_unmapped_in_background();
    sched::detail::unmap_tail_in_background(block, old_bytes, new_bytes, page);
    auto* tail = static_cast<std::byte*>(block) + 11 * page;
    BOOST_TEST(sched::test::eventually([&] { return unmapped(tail, 53 * page); }));
    BOOST_TEST(
        sched::test::eventually([&] { return blocks_unmapped_in_background() >= before + 1; }));
    BOOST_TEST(!unmapped(block, 11 * page));
    auto filled = [](const void* start, std::size_t bytes) {
        const auto* p = static_cast<const unsigned char*>(start);
        return std::all_of(p, p + bytes, [](unsigned char c) { return c == 0x5a; });
    };
    BOOST_TEST(filled(block, 11 * page));
    std::size_t bytes = new_bytes;
    if constexpr (sched::detail::remaps_memory)
    {
        void* grown = sched::detail::remap_memory(block, new_bytes, 40 * page, page);
        BOOST_TEST_REQUIRE(grown != nullptr);
        BOOST_TEST(filled(grown, new_bytes));
        block = grown;
        bytes = 40 * page;
    }
    sched::detail::unmap_memory(block, bytes, page);
}

// Blocks handed over by several threads at once, while the unmapping thread takes them, are all
// unmapped, and by that thread (they are fewer than the 1 MB that may wait for it). (That each is
// unmapped only once is not seen: munmap() of a range no longer mapped succeeds.)
BOOST_TEST_DECORATOR(*boost::unit_test::precondition(mapping))
BOOST_AUTO_TEST_CASE(blocks_handed_over_by_several_threads_at_once_are_all_unmapped)
{
    constexpr int threads = 4;
    constexpr std::size_t per_thread = 30; // 960 KB in all
    constexpr std::size_t bytes = 2 * page;
    std::vector<std::vector<void*>> blocks(threads);
    for (auto& mine : blocks)
    {
        for (std::size_t i = 0; i < per_thread; ++i)
            mine.push_back(map_and_fill(bytes));
    }
    // What the thread had before is counted (it is idle), so the count below is this test's.
    BOOST_TEST_REQUIRE(sched::test::eventually(sched::detail::unmapping_thread_idle));
    const std::size_t before = blocks_unmapped_in_background();
    {
        // The threads (and their stacks) first: nothing is mapped once blocks are handed over.
        std::latch go(threads + 1);
        std::vector<std::jthread> handing_over;
        for (auto& mine : blocks)
            handing_over.emplace_back([&mine, &go] {
                go.arrive_and_wait();
                for (void* block : mine)
                    unmap_in_background(block, bytes, page);
            });
        go.arrive_and_wait();
    }
    for (const auto& mine : blocks)
        BOOST_TEST(sched::test::eventually([&] { return all_unmapped(mine, bytes); }));
    BOOST_TEST(sched::test::eventually(
        [&] { return blocks_unmapped_in_background() >= before + threads * per_thread; }));
}

#if defined(__linux__)
// A child forked while the unmapping thread runs has no such thread: it starts its own, which
// unmaps what the child hands over. (Under ThreadSanitizer, which cannot start threads in such a
// child, the child unmaps at once.)
BOOST_TEST_DECORATOR(*boost::unit_test::precondition(mapping))
BOOST_AUTO_TEST_CASE(a_forked_child_unmaps_in_its_own_thread, *boost::unit_test::timeout(120))
{
    void* first = map_and_fill(page);
    unmap_in_background(first, page, page); // the thread runs from here
    BOOST_TEST_REQUIRE(sched::test::eventually([&] { return unmapped(first, page); }));
    BOOST_TEST_REQUIRE(has_thread_named("sched-unmap"));
    void* block = map_and_fill(4 * page); // the child's, mapped before the fork
    BOOST_TEST(sched::test::in_child([&] {
        const bool had_thread = has_thread_named("sched-unmap");
        unmap_in_background(block, 4 * page, page);
        while (!unmapped(block, 4 * page))
            std::this_thread::yield();
        const bool has_thread = has_thread_named("sched-unmap");
        return !had_thread && has_thread != sched::detail::under_thread_sanitizer ? 0 : 1;
    }));
    unmap_in_background(block, 4 * page, page); // the parent's copy
    BOOST_TEST(sched::test::eventually([&] { return unmapped(block, 4 * page); }));
}

// A queue (so a pool) starts the thread as it is constructed, so that the first memory its heap
// array hands over (under the queue's lock) does not pay for starting it.
BOOST_TEST_DECORATOR(*boost::unit_test::precondition(mapping) *
                     boost::unit_test::precondition(sched::test::child_starts_threads))
BOOST_AUTO_TEST_CASE(a_queue_starts_the_thread_as_it_is_constructed,
                     *boost::unit_test::timeout(120))
{
    BOOST_TEST(sched::test::in_child([] {
        if (has_thread_named("sched-unmap"))
            return 2;
        sched::delayed_work_queue queue;
        // The thread names itself as it starts.
        return sched::test::eventually([] { return has_thread_named("sched-unmap"); }) ? 0 : 1;
    }));
}

// The thread runs on the CPUs the program started with, not on those of the thread that starts
// it: a thread that runs timers may be pinned to a core of its own.
boost::test_tools::assertion_result several_cpus(boost::unit_test::test_unit_id)
{
    cpu_set_t cpus;
    boost::test_tools::assertion_result result(sched_getaffinity(0, sizeof cpus, &cpus) == 0 &&
                                               CPU_COUNT(&cpus) > 1);
    result.message() << "needs two CPUs";
    return result;
}

// The thread named `name`'s CPUs, if it is found.
bool cpus_of_thread_named(const std::string& name, cpu_set_t& cpus)
{
    const std::optional<pid_t> thread = thread_named(name);
    return thread && sched_getaffinity(*thread, sizeof cpus, &cpus) == 0;
}

BOOST_TEST_DECORATOR(*boost::unit_test::precondition(mapping) *
                     boost::unit_test::precondition(sched::test::child_starts_threads) *
                     boost::unit_test::precondition(several_cpus))
BOOST_AUTO_TEST_CASE(the_thread_does_not_keep_the_cpus_of_the_thread_that_starts_it,
                     *boost::unit_test::timeout(120))
{
    cpu_set_t all;
    BOOST_TEST_REQUIRE(sched_getaffinity(0, sizeof all, &all) == 0);
    void* block = map_and_fill(page); // the child's, mapped before the fork
    BOOST_TEST(sched::test::in_child([&] {
        cpu_set_t one;
        CPU_ZERO(&one);
        for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
        {
            if (CPU_ISSET(cpu, &all))
            {
                CPU_SET(cpu, &one);
                break;
            }
        }
        if (sched_setaffinity(0, sizeof one, &one) != 0)
            return 2;
        unmap_in_background(block, page, page);
        while (!unmapped(block, page))
            std::this_thread::yield();
        cpu_set_t its;
        return cpus_of_thread_named("sched-unmap", its) && CPU_EQUAL(&its, &all) ? 0 : 1;
    }));
    unmap_in_background(block, page, page); // the parent's copy
}
#endif

BOOST_AUTO_TEST_SUITE_END()
