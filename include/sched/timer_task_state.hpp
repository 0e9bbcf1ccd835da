#ifndef SCHED_TIMER_TASK_STATE_HPP
#define SCHED_TIMER_TASK_STATE_HPP

#include <sched/detail/visibility.hpp>

SCHED_VISIBILITY_BEGIN

namespace sched {

/// What a sched::basic_timer_task has been through: java.util.TimerTask's states.
enum class timer_task_state
{
    virgin,    ///< Not scheduled yet.
    scheduled, ///< Scheduled; a one-shot task has not run yet, a periodic task may have.
    executed,  ///< A one-shot task ran (or is running); a periodic task ended (its failure policy,
               ///< or no memory to queue its next run).
    cancelled, ///< Cancelled: by cancel(), or by the timer's cancel() or destruction before a
               ///< one-shot task ran or while a periodic task was still scheduled.
};

} // namespace sched

SCHED_VISIBILITY_END

#endif // SCHED_TIMER_TASK_STATE_HPP
