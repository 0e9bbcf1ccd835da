#include <sched/detail/mapped_memory.hpp>

#include <cstdint>
#include <new>

#if defined(__unix__)
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace sched::detail {

#if defined(__unix__) && !defined(__SANITIZE_ADDRESS__)
void* map_memory(std::size_t bytes, std::size_t alignment)
{
    // Maps enough to find an aligned start, then unmaps what is before and after the block.
    static const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    const std::size_t extra = alignment > page ? alignment - page : 0;
    void* mapping =
        ::mmap(nullptr, bytes + extra, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapping == MAP_FAILED)
        throw std::bad_alloc();
    const auto begin = reinterpret_cast<std::uintptr_t>(mapping);
    const std::uintptr_t block = (begin + alignment - 1) & ~(alignment - 1);
    const std::uintptr_t end = begin + bytes + extra;
    // Whole pages either side: the block's end is rounded up to a page, as mmap rounds bytes.
    const std::uintptr_t block_end = (block + bytes + page - 1) & ~(page - 1);
    if (block != begin)
        ::munmap(mapping, block - begin);
    if (block_end < end)
        ::munmap(reinterpret_cast<void*>(block_end), end - block_end);
    return reinterpret_cast<void*>(block);
}

void unmap_memory(void* block, std::size_t bytes, std::size_t) noexcept
{
    ::munmap(block, bytes);
}
#else
void* map_memory(std::size_t bytes, std::size_t alignment)
{
    return ::operator new(bytes, std::align_val_t(alignment));
}

void unmap_memory(void* block, std::size_t bytes, std::size_t alignment) noexcept
{
    ::operator delete(block, bytes, std::align_val_t(alignment));
}
#endif

} // namespace sched::detail
