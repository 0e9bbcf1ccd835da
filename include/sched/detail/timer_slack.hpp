#ifndef SCHED_DETAIL_TIMER_SLACK_HPP
#define SCHED_DETAIL_TIMER_SLACK_HPP

#include <sched/detail/visibility.hpp>

SCHED_VISIBILITY_BEGIN

namespace sched::detail {

// Asks the kernel to wake the calling thread from its timed waits on time rather than up to its
// default slack later (Linux: 50 µs, which a worker waiting for a due task would add to every
// task's lateness). Failure is ignored; elsewhere it does nothing.
void wake_on_time() noexcept;

} // namespace sched::detail

SCHED_VISIBILITY_END

#endif // SCHED_DETAIL_TIMER_SLACK_HPP
