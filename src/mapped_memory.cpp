#include <sched/detail/mapped_memory.hpp>

#include <cstdint>
#include <new>

#if defined(__unix__)
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace sched::detail {
namespace {

#if defined(__unix__)
// Asked each time (a span's mapping, not a task's): a static caught in its first initialization
// by a fork would leave the child waiting for it for ever.
std::size_t page_size() noexcept
{
    return static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
}

void* map_pages(std::size_t bytes, std::size_t alignment)
{
    // Maps enough to find an aligned start, then unmaps what is before and after the block.
    const std::size_t page = page_size();
    const std::size_t extra = alignment > page ? alignment - page : 0;
    void* mapping =
        ::mmap(nullptr, bytes + extra, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapping == MAP_FAILED)
        throw std::bad_alloc();
    const auto begin = reinterpret_cast<std::uintptr_t>(mapping);
    const std::uintptr_t block = (begin + alignment - 1) & ~(alignment - 1);
    const std::uintptr_t end = begin + bytes + extra;
    // Whole pages either side: the block's end is rounded up to a page, as mmap rounds bytes.
    const std::uintptr_t block_end = whole_pages(block + bytes);
    if (block != begin)
        ::munmap(mapping, block - begin);
    if (block_end < end)
        ::munmap(reinterpret_cast<void*>(block_end), end - block_end);
    return reinterpret_cast<void*>(block);
}

// madvise(advice) on the whole pages within `bytes` from `block`: whether it took (or there was
// no whole page).
bool advise_whole_pages(void* block, std::size_t bytes, int advice) noexcept
{
    const std::size_t page = page_size();
    const auto begin = reinterpret_cast<std::uintptr_t>(block);
    const std::uintptr_t first = whole_pages(begin);
    const std::uintptr_t last = (begin + bytes) & ~(page - 1);
    return first >= last || ::madvise(reinterpret_cast<void*>(first), last - first, advice) == 0;
}

void discard(void* block, std::size_t bytes) noexcept
{
    (void)advise_whole_pages(block, bytes, MADV_DONTNEED);
}

bool populate(void* block, std::size_t bytes) noexcept
{
#if defined(MADV_POPULATE_WRITE)
    // Fails before Linux 5.14: then the pages fault in as they are touched.
    return advise_whole_pages(block, bytes, MADV_POPULATE_WRITE);
#else
    (void)block;
    (void)bytes;
    return false;
#endif
}

void unmap_pages(void* block, std::size_t bytes) noexcept
{
    if (::munmap(block, bytes) !=
        0) // too many mappings to split one: keep the range, not its memory
        discard(block, bytes);
}
#if defined(__linux__)
void* remap(void* block,
            std::size_t old_bytes,
            std::size_t new_bytes,
            std::size_t alignment) noexcept
{
    if (alignment > page_size()) // a moved block starts on a page boundary only
        return nullptr;
    void* const moved =
        ::mremap(block, whole_pages(old_bytes), whole_pages(new_bytes), MREMAP_MAYMOVE);
    return moved == MAP_FAILED ? nullptr : moved;
}
#endif
#else
// Never called: maps_memory is false.
void* map_pages(std::size_t, std::size_t)
{
    throw std::bad_alloc();
}

void discard(void*, std::size_t) noexcept {}

bool populate(void*, std::size_t) noexcept
{
    return false;
}

void unmap_pages(void*, std::size_t) noexcept {}
#endif

} // namespace

#if defined(__unix__)
std::uintptr_t whole_pages(std::uintptr_t n) noexcept
{
    const std::size_t page = page_size();
    return (n + page - 1) & ~(page - 1);
}
#else
std::uintptr_t whole_pages(std::uintptr_t n) noexcept
{
    return n;
}
#endif

void* map_memory(std::size_t bytes, std::size_t alignment)
{
    if constexpr (maps_memory)
        return map_pages(bytes, alignment);
    else
        return ::operator new(bytes, std::align_val_t(alignment));
}

void unmap_memory(void* block, std::size_t bytes, std::size_t alignment) noexcept
{
    if constexpr (maps_memory)
        unmap_pages(block, bytes);
    else
        ::operator delete(block, bytes, std::align_val_t(alignment));
}

void* remap_memory(void* block,
                   std::size_t old_bytes,
                   std::size_t new_bytes,
                   std::size_t alignment) noexcept
{
#if defined(__linux__)
    if constexpr (remaps_memory)
        return remap(block, old_bytes, new_bytes, alignment);
#endif
    (void)block;
    (void)old_bytes;
    (void)new_bytes;
    (void)alignment;
    return nullptr;
}

void discard_pages(void* block, std::size_t bytes) noexcept
{
    if constexpr (maps_memory)
        discard(block, bytes);
}

bool populate_pages(void* block, std::size_t bytes) noexcept
{
    if constexpr (maps_memory)
        return populate(block, bytes);
    else
        return false;
}

} // namespace sched::detail
