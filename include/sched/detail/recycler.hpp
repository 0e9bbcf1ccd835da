#ifndef SCHED_DETAIL_RECYCLER_HPP
#define SCHED_DETAIL_RECYCLER_HPP

#include <sched/detail/sanitizers.hpp>
#include <sched/detail/visibility.hpp>

#include <cstddef>
#include <limits>
#include <memory>
#include <new>

SCHED_VISIBILITY_BEGIN

namespace sched::detail {

// Memory for task nodes. Blocks of each size class (up to max_recycled_size) are carved from 64 KB
// spans with no header per block, so a 56-byte task takes 56 bytes where malloc would take 64.
// Each thread caches up to 288 blocks of each class (256, and room for a refill of up to 32),
// freed ones and what is left of its refills alike, and hands them out again before going to the
// spans: arming and cancelling timeouts in a loop then takes no lock, with a small handler or a
// coroutine's. A block may be freed on any thread; it joins that thread's cache, whose older half
// goes back to the spans once it is full (a thread found to only free blocks of a class, by its
// 433rd free at the latest, keeps no more than 16 of them from then on). A span whose blocks are
// all back stays mapped, and resident, for about a second (up to 4 MB of such spans per class),
// for the next refill of its class; then, or at once beyond those 4 MB, it goes back to the system
// (one empty span per class is kept, not resident), unmapped by a background thread rather than
// the freeing one, unless that thread is behind (see background_unmap.hpp).
// Blocks above max_recycled_size, and every block under AddressSanitizer (so that it sees each
// use), go straight to operator new and delete. A block is aligned to 16 bytes if its size is a
// multiple of 16, else to 8. A thread's cache goes back to the spans as the thread exits (the
// main thread's is left to the process's end), even when the thread first frees a block in a
// pthread key's destructor; a process forked from a threaded one may use the recycler (the fork
// waits for the spans' locks).
inline constexpr std::size_t max_recycled_size = 1024;
inline constexpr bool recycles_blocks = !under_address_sanitizer;

void* recycled_allocate(std::size_t size);
void recycled_deallocate(void* block, std::size_t size) noexcept;

// Empty spans kept mapped for reuse (span decay, see recycler.cpp) all go back to the system now,
// on the calling thread: for tests and benchmarks that read the resident size.
void release_idle_spans() noexcept;

// For the unmapping thread: whether any class has an idle span, and a tick of its clock (the
// spans idle for decay_ticks go back; classes whose lock is busy wait for the next tick). Returns
// how many spans it unmapped.
bool idle_spans_exist() noexcept;
std::size_t decay_idle_spans(unsigned epoch) noexcept;

// The recycler as an allocator: what task nodes are allocated with unless their submitter brings
// its own allocator. Over-aligned types bypass it (its blocks are aligned as their size allows, up
// to 16 bytes).
template <class T>
class recycling_allocator
{
public:
    using value_type = T;

    recycling_allocator() noexcept = default;

    template <class U>
    recycling_allocator(const recycling_allocator<U>&) noexcept
    {}

    T* allocate(std::size_t n)
    {
        if (n > std::numeric_limits<std::size_t>::max() / sizeof(T))
            throw std::bad_array_new_length();
        if constexpr (alignof(T) > __STDCPP_DEFAULT_NEW_ALIGNMENT__)
            return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(alignof(T))));
        else
            return static_cast<T*>(recycled_allocate(n * sizeof(T)));
    }

    void deallocate(T* p, std::size_t n) noexcept
    {
        if constexpr (alignof(T) > __STDCPP_DEFAULT_NEW_ALIGNMENT__)
            ::operator delete(p, n * sizeof(T), std::align_val_t(alignof(T)));
        else
            recycled_deallocate(p, n * sizeof(T));
    }

    friend bool operator==(const recycling_allocator&, const recycling_allocator&) noexcept
    {
        return true;
    }
};

// The allocator for the nodes of a submitter that brings `a`: std::allocator, the default, means
// the recycler.
template <class Allocator>
Allocator node_allocator(const Allocator& a) noexcept
{
    return a;
}

template <class T>
recycling_allocator<T> node_allocator(const std::allocator<T>&) noexcept
{
    return {};
}

} // namespace sched::detail

SCHED_VISIBILITY_END

#endif // SCHED_DETAIL_RECYCLER_HPP
