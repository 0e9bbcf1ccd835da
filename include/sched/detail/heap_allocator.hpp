#ifndef SCHED_DETAIL_HEAP_ALLOCATOR_HPP
#define SCHED_DETAIL_HEAP_ALLOCATOR_HPP

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
