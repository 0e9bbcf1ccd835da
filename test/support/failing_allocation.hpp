#ifndef SCHED_TEST_SUPPORT_FAILING_ALLOCATION_HPP
#define SCHED_TEST_SUPPORT_FAILING_ALLOCATION_HPP

#include <atomic>
#include <cstddef>

namespace sched::test {

// Makes the next over-aligned operator new on this thread throw std::bad_alloc (or, with false,
// no longer): the one that grows a queue's heap (its array is aligned to a group of children), so
// a test can see what a push does when memory runs out. With `after`, that allocation first waits
// until *after is true (for what another thread is to do before it fails). The test binary
// replaces the aligned operator new and delete for this (support/failing_allocation.cpp).
void fail_next_aligned_allocation(bool fail = true,
                                  const std::atomic<bool>* after = nullptr) noexcept;

// Whether that failure is still armed (nothing on this thread has allocated since).
bool aligned_allocation_failure_armed() noexcept;

// Makes an operator new on this thread of at least `bytes` throw std::bad_alloc: the one after
// `skip` others of that size. For a test to fail a container's reservation (say, of room for
// every queued task) and no smaller allocation; `bytes` 0 disarms it. With `after`, that
// allocation first waits until *after is true (for what another thread is to do before it fails).
// The test binary replaces the plain operator new and delete for this too.
void fail_allocation_of_at_least(std::size_t bytes,
                                 int skip = 0,
                                 const std::atomic<bool>* after = nullptr) noexcept;

// How many plain operator new calls this thread has made: for a test to count a call's own.
std::size_t allocations_on_this_thread() noexcept;

// Whether that failure is still armed on this thread.
bool large_allocation_failure_armed() noexcept;

// Makes an operator new on any thread throw std::bad_alloc: the one after `allocations` others
// (negative disarms it). For a test that fails each allocation of a scenario in turn.
void fail_allocation_after(long allocations) noexcept;

// Whether that failure is still to come.
bool allocation_failure_pending() noexcept;

} // namespace sched::test

#endif // SCHED_TEST_SUPPORT_FAILING_ALLOCATION_HPP
