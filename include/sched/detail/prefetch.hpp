#ifndef SCHED_DETAIL_PREFETCH_HPP
#define SCHED_DETAIL_PREFETCH_HPP

#include <sched/detail/visibility.hpp>

SCHED_VISIBILITY_BEGIN

namespace sched::detail {

// Asks for the cache line holding `p`, about to be written. Only a hint: it never faults, and
// does nothing where the compiler offers no prefetch.
//
// Worth it before reading the clock: the read is ordered after every earlier load (the vDSO's
// `lfence; rdtsc`), but not after a prefetch, so a cache miss asked for first overlaps the read
// instead of following it.
inline void prefetch_for_write(const void* p) noexcept
{
#if defined(__GNUC__) || defined(__clang__)
    __builtin_prefetch(p, 1);
#else
    (void)p;
#endif
}

} // namespace sched::detail

SCHED_VISIBILITY_END

#endif // SCHED_DETAIL_PREFETCH_HPP
