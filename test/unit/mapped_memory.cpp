// Memory mapped from the system, and resized there without copying where it can be.

#include <sched/detail/mapped_memory.hpp>

#include <boost/test/unit_test.hpp>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include <sys/mman.h>
#include <unistd.h>

namespace {

constexpr std::size_t page = 4096;

bool filled_with(const void* block, std::size_t bytes, unsigned char value)
{
    const auto* p = static_cast<const unsigned char*>(block);
    for (std::size_t i = 0; i < bytes; ++i)
    {
        if (p[i] != value)
            return false;
    }
    return true;
}

} // namespace

BOOST_AUTO_TEST_SUITE(test_mapped_memory)

BOOST_AUTO_TEST_CASE(a_mapped_block_has_its_alignment_and_is_writable)
{
    for (std::size_t alignment : {std::size_t(64), page, 16 * page})
    {
        void* block = sched::detail::map_memory(8 * page, alignment);
        BOOST_TEST(reinterpret_cast<std::uintptr_t>(block) % alignment == 0u);
        std::memset(block, 0x5a, 8 * page);
        BOOST_TEST(filled_with(block, 8 * page, 0x5a));
        sched::detail::unmap_memory(block, 8 * page, alignment);
    }
}

BOOST_AUTO_TEST_CASE(a_remapped_block_keeps_its_contents_as_it_grows_and_shrinks)
{
    constexpr std::size_t small = 40 * page + 100; // not whole pages
    constexpr std::size_t large = 1000 * page + 100;
    void* block = sched::detail::map_memory(small, 128);
    std::memset(block, 0x33, small);
    void* grown = sched::detail::remap_memory(block, small, large, 128);
    if constexpr (!sched::detail::remaps_memory)
    {
        BOOST_TEST(grown == nullptr); // and the block is as it was
        BOOST_TEST(filled_with(block, small, 0x33));
        sched::detail::unmap_memory(block, small, 128);
        return;
    }
    BOOST_TEST_REQUIRE(grown != nullptr);
    BOOST_TEST(reinterpret_cast<std::uintptr_t>(grown) % 128 == 0u);
    BOOST_TEST(filled_with(grown, small, 0x33));
    std::memset(static_cast<std::byte*>(grown) + small, 0x44, large - small); // all writable
    void* shrunk = sched::detail::remap_memory(grown, large, small, 128);
    BOOST_TEST_REQUIRE(shrunk == grown); // shrinking is in place
    BOOST_TEST(filled_with(shrunk, small, 0x33));
    // The pages past the new end went back to the system: they are no longer mapped.
    unsigned char resident = 0;
    void* const past = static_cast<std::byte*>(shrunk) + 41 * page;
    BOOST_TEST(::mincore(past, page, &resident) == -1);
    BOOST_TEST(errno == ENOMEM);
    sched::detail::unmap_memory(shrunk, small, 128);
}

BOOST_AUTO_TEST_CASE(an_alignment_beyond_a_page_is_not_remapped)
{
    void* block = sched::detail::map_memory(4 * page, 16 * page);
    std::memset(block, 0x21, 4 * page);
    BOOST_TEST(sched::detail::remap_memory(block, 4 * page, 64 * page, 16 * page) == nullptr);
    BOOST_TEST(filled_with(block, 4 * page, 0x21));
    sched::detail::unmap_memory(block, 4 * page, 16 * page);
}

// A block whose pages past old_bytes are still mapped (handed to the unmapping thread, which has
// not unmapped them yet) cannot grow in place: it moves, with its contents, and the pages past it
// stay as they were until they are unmapped.
BOOST_AUTO_TEST_CASE(a_block_grown_with_its_old_tail_still_mapped_moves)
{
    if constexpr (!sched::detail::remaps_memory)
        return;
    void* block = sched::detail::map_memory(64 * page, page);
    std::memset(block, 0x44, 10 * page);
    auto* tail = static_cast<std::byte*>(block) + 10 * page;
    std::memset(tail, 0x55, 54 * page);
    void* grown = sched::detail::remap_memory(block, 10 * page, 40 * page, page);
    BOOST_TEST_REQUIRE(grown != nullptr);
    BOOST_TEST(grown != block);
    BOOST_TEST(filled_with(grown, 10 * page, 0x44));
    BOOST_TEST(filled_with(tail, 54 * page, 0x55));
    sched::detail::unmap_memory(tail, 54 * page, page);
    sched::detail::unmap_memory(grown, 40 * page, page);
}

BOOST_AUTO_TEST_CASE(populated_pages_are_resident_before_they_are_touched)
{
    if constexpr (!sched::detail::maps_memory)
        return;
    // The system's pages here (the other tests' 4 KB would hold no whole page where they are
    // larger).
    const auto system_page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    void* block = sched::detail::map_memory(16 * system_page, system_page);
    auto* from = static_cast<std::byte*>(block) + 100; // the whole pages within: 1 to 7
    unsigned char resident[16] = {};
    BOOST_TEST_REQUIRE(::mincore(block, 16 * system_page, resident) == 0);
    for (std::size_t i = 1; i < 8; ++i)
        BOOST_TEST((resident[i] & 1) == 0, "page " << i << ", untouched, is not resident");
    if (!sched::detail::populate_pages(from, 8 * system_page))
        BOOST_TEST_MESSAGE("this system cannot populate pages: they fault in as touched");
    else
    {
        BOOST_TEST_REQUIRE(::mincore(block, 16 * system_page, resident) == 0);
        for (std::size_t i = 1; i < 8; ++i)
            BOOST_TEST((resident[i] & 1) == 1, "page " << i << ", populated, is resident");
        // As fresh as the pages not populated.
        BOOST_TEST(filled_with(block, 16 * system_page, 0));
    }
    sched::detail::unmap_memory(block, 16 * system_page, system_page);
}

BOOST_AUTO_TEST_SUITE_END()
