#ifndef SCHED_FUTURE_STATE_HPP
#define SCHED_FUTURE_STATE_HPP

#include <sched/detail/visibility.hpp>

#include <cstdint>

SCHED_VISIBILITY_BEGIN

namespace sched {

/// The life of a scheduled task, as in Java's FutureTask.
/**
 * Possible transitions:
 * - pending → completing → normal (the task returned)
 * - pending → completing → exceptional (the task threw)
 * - pending → cancelling → cancelled (cancel(false))
 * - pending → interrupting → interrupted (cancel(true))
 *
 * A periodic task stays pending between runs. A task that is running is still pending. The
 * transient states last while the call that made them finishes its work (a cancel, while it
 * tells the pool); a task in one is done (is_done()), and cancelling and interrupting ones are
 * cancelled (is_cancelled()). Waiters return in cancelling and interrupting, whose outcome is
 * fixed; in completing, they wait for the outcome to be stored. cancel(true) requests stop once the
 * task is interrupted.
 */
enum class future_state : std::uint8_t
{
    pending,      ///< Not completed yet (Java's NEW); it may be queued or running.
    completing,   ///< Its result is being stored; transient.
    normal,       ///< It returned; get() gives the value.
    exceptional,  ///< It threw; get() rethrows the exception.
    cancelling,   ///< Being cancelled without interruption; transient.
    cancelled,    ///< Cancelled without interruption.
    interrupting, ///< Being cancelled with interruption; transient.
    interrupted,  ///< Cancelled with interruption: a task taking a std::stop_token sees it stop.
};

} // namespace sched

SCHED_VISIBILITY_END

#endif // SCHED_FUTURE_STATE_HPP
