#ifndef SCHED_DETAIL_FUTEX_HPP
#define SCHED_DETAIL_FUTEX_HPP

#include <sched/detail/visibility.hpp>

#include <atomic>
#include <cstdint>

SCHED_VISIBILITY_BEGIN

namespace sched::detail {

// Sleeping on a word until another thread changes it and wakes the sleeper: Linux's futex,
// elsewhere std::atomic's wait and notify. On Linux a wake always makes the system call
// (libstdc++'s notify_one() skips it unless a sleeper registered with it), and never reads the
// word, which may be gone by then.

// Sleeps while `word` holds `value`, until woken, spuriously, or (on Linux, if not 0) once
// `timeout_ns` has passed.
void futex_wait(std::atomic<std::uint32_t>& word,
                std::uint32_t value,
                std::uint64_t timeout_ns) noexcept;

// Wakes one thread asleep on `word`, if any.
void futex_wake_one(std::atomic<std::uint32_t>* word) noexcept;

} // namespace sched::detail

SCHED_VISIBILITY_END

#endif // SCHED_DETAIL_FUTEX_HPP
