#ifndef SCHED_DETAIL_HEAP_ALLOCATOR_HPP
#define SCHED_DETAIL_HEAP_ALLOCATOR_HPP

#include <cstddef>
#include <new>

namespace sched::detail {

// Storage for a 4-ary heap of 16-byte entries, laid out so that the four children of entry i
// (4i+1 .. 4i+4) always share one 64-byte cache line: the block is line-aligned and the array
// starts one entry short of the first line boundary. A sift-down then touches one line per level.
template <class T>
struct heap_allocator
{
    static constexpr std::size_t line = 64;
    static_assert(sizeof(T) * 4 == line, "four entries must fill one cache line");

    using value_type = T;

    template <class U>
    struct rebind
    {
        using other = heap_allocator<U>;
    };

    heap_allocator() = default;
    template <class U>
    heap_allocator(const heap_allocator<U>&) noexcept
    {}

    T* allocate(std::size_t n)
    {
        auto* block = static_cast<std::byte*>(
            ::operator new(n * sizeof(T) + line - sizeof(T), std::align_val_t(line)));
        return reinterpret_cast<T*>(block + line - sizeof(T));
    }

    void deallocate(T* p, std::size_t) noexcept
    {
        ::operator delete(reinterpret_cast<std::byte*>(p) - (line - sizeof(T)),
                          std::align_val_t(line));
    }

    friend bool operator==(const heap_allocator&, const heap_allocator&) noexcept { return true; }
};

} // namespace sched::detail

#endif // SCHED_DETAIL_HEAP_ALLOCATOR_HPP
