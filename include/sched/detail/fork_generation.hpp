#ifndef SCHED_DETAIL_FORK_GENERATION_HPP
#define SCHED_DETAIL_FORK_GENERATION_HPP

#include <sched/detail/visibility.hpp>

#include <atomic>
#include <cstdint>

SCHED_VISIBILITY_BEGIN

namespace sched::detail {

// How many times this process's line has forked since the library was loaded: a forked child's
// is one more than its parent's at the fork. Thread-local state that the child's thread inherits
// from the forking thread of the parent (a thread's sequence of jitter seeds) tells by it that it
// must start again.
extern std::atomic<std::uint32_t> forks;

inline std::uint32_t fork_generation() noexcept
{
    return forks.load(std::memory_order_relaxed); // a child's one thread counts it, alone
}

} // namespace sched::detail

SCHED_VISIBILITY_END

#endif // SCHED_DETAIL_FORK_GENERATION_HPP
