#ifndef SCHED_DETAIL_HEAP_ALLOCATOR_HPP
#define SCHED_DETAIL_HEAP_ALLOCATOR_HPP

#include <sched/detail/mapped_memory.hpp>

#include <cstddef>
#include <new>

namespace sched::detail {

// Storage for an Arity-ary heap, laid out so that the children of entry i (Arity*i+1 ..
// Arity*i+Arity) always start on a boundary of their own size: the block is aligned to that size
// and the array starts one entry short of the first boundary. A sift-down then touches the fewest
// cache lines per level (one pair of adjacent lines for eight 16-byte entries).
template <class T, std::size_t Arity>
struct heap_allocator
{
    static constexpr std::size_t line = Arity * sizeof(T); // one group of children
    static_assert((line & (line - 1)) == 0, "a group of children must be a power of two bytes");

    using value_type = T;

    template <class U>
    struct rebind
    {
        using other = heap_allocator<U, Arity>;
    };

    heap_allocator() = default;
    template <class U>
    heap_allocator(const heap_allocator<U, Arity>&) noexcept
    {}

    T* allocate(std::size_t n)
    {
        const std::size_t bytes = block_bytes(n);
        void* block = bytes >= mapped_bytes ? map_memory(bytes, line)
                                            : ::operator new(bytes, std::align_val_t(line));
        return reinterpret_cast<T*>(static_cast<std::byte*>(block) + line - sizeof(T));
    }

    void deallocate(T* p, std::size_t n) noexcept
    {
        std::byte* block = reinterpret_cast<std::byte*>(p) - (line - sizeof(T));
        const std::size_t bytes = block_bytes(n);
        if (bytes >= mapped_bytes)
            unmap_memory(block, bytes, line);
        else
            ::operator delete(block, std::align_val_t(line));
    }

    friend bool operator==(const heap_allocator&, const heap_allocator&) noexcept { return true; }

private:
    // Arrays this large are mapped where the system allows (see mapped_memory.hpp), so that an
    // outgrown one goes back to it as the heap moves to a larger one, and the last one as the
    // heap empties.
    static constexpr std::size_t mapped_bytes = std::size_t(128) * 1024;

    static std::size_t block_bytes(std::size_t n) noexcept
    {
        return n * sizeof(T) + line - sizeof(T);
    }
};

} // namespace sched::detail

#endif // SCHED_DETAIL_HEAP_ALLOCATOR_HPP
