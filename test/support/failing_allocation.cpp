#include "support/failing_allocation.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <new>
#include <thread>
#include <utility>

#include <malloc.h>

namespace {

// Process-wide: the number of allocations still to succeed before one fails; negative: none.
std::atomic<long> countdown{-1};

thread_local bool fail_next = false;
thread_local const std::atomic<bool>* fail_next_after = nullptr;
thread_local std::size_t fail_from_bytes = 0; // 0: no plain allocation fails
thread_local int fail_skip = 0;
thread_local const std::atomic<bool>* fail_after = nullptr;
thread_local std::size_t plain_allocations = 0;

// Until *after is true, if there is an `after`.
void wait_for(const std::atomic<bool>* after) noexcept
{
    if (after != nullptr)
    {
        while (!after->load())
            std::this_thread::yield();
    }
}

// Whether this plain allocation of `size` bytes is the one to fail (once `fail_after` is true).
bool fails(std::size_t size) noexcept
{
    if (fail_from_bytes == 0 || size < fail_from_bytes)
        return false;
    if (fail_skip-- > 0)
        return false;
    fail_from_bytes = 0;
    wait_for(fail_after);
    return true;
}

// Whether this allocation, on any thread, is the one the countdown fails.
bool counted_down() noexcept
{
    return countdown.load(std::memory_order_relaxed) >= 0 && countdown.fetch_sub(1) == 0;
}

} // namespace

namespace sched::test {

void fail_next_aligned_allocation(bool fail, const std::atomic<bool>* after) noexcept
{
    fail_next = fail;
    fail_next_after = after;
}

bool aligned_allocation_failure_armed() noexcept
{
    return fail_next;
}

void fail_allocation_of_at_least(std::size_t bytes,
                                 int skip,
                                 const std::atomic<bool>* after) noexcept
{
    fail_from_bytes = bytes;
    fail_skip = skip;
    fail_after = after;
}

std::size_t allocations_on_this_thread() noexcept
{
    return plain_allocations;
}

bool large_allocation_failure_armed() noexcept
{
    return fail_from_bytes != 0;
}

void fail_allocation_after(long allocations) noexcept
{
    countdown.store(allocations);
}

bool allocation_failure_pending() noexcept
{
    return countdown.load() >= 0;
}

} // namespace sched::test

// The replaceable forms (the array and nothrow forms call these).
void* operator new(std::size_t size)
{
    ++plain_allocations;
    if (fails(size) || counted_down())
        throw std::bad_alloc();
    if (void* p = std::malloc(std::max<std::size_t>(size, 1)))
        return p;
    throw std::bad_alloc();
}

void operator delete(void* p) noexcept
{
    std::free(p);
}

void operator delete(void* p, std::size_t) noexcept
{
    std::free(p);
}

void* operator new(std::size_t size, std::align_val_t alignment)
{
    if (std::exchange(fail_next, false)) // the countdown is aligned_alloc's below
    {
        wait_for(std::exchange(fail_next_after, nullptr));
        throw std::bad_alloc();
    }
    const auto align = static_cast<std::size_t>(alignment);
    // aligned_alloc wants a size that is a non-zero multiple of the alignment.
    const std::size_t rounded = (std::max<std::size_t>(size, 1) + align - 1) / align * align;
    if (void* p = std::aligned_alloc(align, rounded))
        return p;
    throw std::bad_alloc();
}

void operator delete(void* p, std::align_val_t) noexcept
{
    std::free(p);
}

void operator delete(void* p, std::size_t, std::align_val_t) noexcept
{
    std::free(p);
}

// Asio takes its operations' memory from aligned_alloc (through its recycling allocator), so the
// countdown fails that too; memalign is the same allocator.
extern "C" void* aligned_alloc(std::size_t alignment, std::size_t size) noexcept
{
    if (counted_down())
    {
        errno = ENOMEM;
        return nullptr;
    }
    return memalign(alignment, size);
}
