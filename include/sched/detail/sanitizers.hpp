#ifndef SCHED_DETAIL_SANITIZERS_HPP
#define SCHED_DETAIL_SANITIZERS_HPP

#include <sched/detail/visibility.hpp>

SCHED_VISIBILITY_BEGIN

namespace sched::detail {

// Whether this is built with AddressSanitizer (GCC defines the macro; Clang has the feature
// test): memory of our own carving would hide uses that it checks, so every block then comes
// from operator new.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool under_address_sanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool under_address_sanitizer = true;
#else
inline constexpr bool under_address_sanitizer = false;
#endif
#else
inline constexpr bool under_address_sanitizer = false;
#endif

// Whether this is built with ThreadSanitizer, which does not follow memory that the system moves
// (mremap): such memory is then copied instead.
#if defined(__SANITIZE_THREAD__)
inline constexpr bool under_thread_sanitizer = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
inline constexpr bool under_thread_sanitizer = true;
#else
inline constexpr bool under_thread_sanitizer = false;
#endif
#else
inline constexpr bool under_thread_sanitizer = false;
#endif

} // namespace sched::detail

SCHED_VISIBILITY_END

#endif // SCHED_DETAIL_SANITIZERS_HPP
