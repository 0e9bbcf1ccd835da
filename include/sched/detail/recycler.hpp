#ifndef SCHED_DETAIL_RECYCLER_HPP
#define SCHED_DETAIL_RECYCLER_HPP

#include <cstddef>

namespace sched::detail {

// Memory for task nodes. Each thread keeps a few freed blocks of each small size class and hands
// them out again before asking operator new: arming and cancelling a timeout in a loop then costs
// no trip through malloc. A block may be freed on any thread; it joins that thread's cache, or
// goes back to operator delete once the cache is full (so idle memory stays bounded).
void* recycled_allocate(std::size_t size);
void recycled_deallocate(void* block, std::size_t size) noexcept;

} // namespace sched::detail

#endif // SCHED_DETAIL_RECYCLER_HPP
