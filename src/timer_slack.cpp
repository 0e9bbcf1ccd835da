#include <sched/detail/timer_slack.hpp>

#if defined(__linux__)
#include <sys/prctl.h>
#endif

namespace sched::detail {

void wake_on_time() noexcept
{
#if defined(__linux__)
    // 1 ns: 0 would mean "back to the default".
    (void)::prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
#endif
}

} // namespace sched::detail
