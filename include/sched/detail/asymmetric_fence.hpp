#ifndef SCHED_DETAIL_ASYMMETRIC_FENCE_HPP
#define SCHED_DETAIL_ASYMMETRIC_FENCE_HPP

#include <sched/detail/visibility.hpp>

#include <atomic>

SCHED_VISIBILITY_BEGIN

namespace sched::detail {

// A fence split in two, for Dekker's pattern (each side writes a variable of its own, then reads
// the other's) where one side runs often and the other rarely. The frequent side's light_fence()
// orders only the compiler's code; the rare side's heavy_fence() has every other running thread
// of the process run a full fence (Linux's membarrier(2)). Between the two, either the frequent
// side's read sees the rare side's write, or the rare side's later reads see the frequent side's.
enum class asymmetric_fence_support : unsigned char
{
    unknown,     // the library has not asked yet: it asks as it loads
    available,   // registered with the kernel, for the whole process and its forked children
    unavailable, // the system does not offer it: the frequent side needs a full fence
};

// Set once, as the library loads: before the program's static objects of default priority are
// made, so before a pool of the program's can start its threads.
extern std::atomic<asymmetric_fence_support> asymmetric_fences;

inline void light_fence() noexcept
{
    std::atomic_signal_fence(std::memory_order_seq_cst);
}

#if defined(__linux__)
// Whether every running thread of the process has run a full fence since the call began (false
// if the kernel refused). Only once asymmetric_fences is available.
bool heavy_fence() noexcept;
#endif

} // namespace sched::detail

SCHED_VISIBILITY_END

#endif // SCHED_DETAIL_ASYMMETRIC_FENCE_HPP
