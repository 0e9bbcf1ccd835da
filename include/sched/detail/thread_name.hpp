#ifndef SCHED_DETAIL_THREAD_NAME_HPP
#define SCHED_DETAIL_THREAD_NAME_HPP

#include <sched/detail/visibility.hpp>

#include <cstddef>
#include <string>

SCHED_VISIBILITY_BEGIN

namespace sched::detail {

// Names the calling thread `base-index` where the platform allows (Linux: at most 15 characters,
// so the base is cut to keep the index). Failure is ignored: a name is a debugging aid.
void name_this_thread(const std::string& base, std::size_t index) noexcept;

// Names the calling thread `name` where the platform allows (Linux: cut to 15 characters).
void name_this_thread(const std::string& name) noexcept;

} // namespace sched::detail

SCHED_VISIBILITY_END

#endif // SCHED_DETAIL_THREAD_NAME_HPP
