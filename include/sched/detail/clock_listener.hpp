#ifndef SCHED_DETAIL_CLOCK_LISTENER_HPP
#define SCHED_DETAIL_CLOCK_LISTENER_HPP

#include <sched/detail/visibility.hpp>

SCHED_VISIBILITY_BEGIN

namespace sched::detail {

// Something that blocks on a clock that moves only when told (manual_clock) and must be woken
// when it moves. Queues register one listener for their lifetime, never while holding their own
// lock, so the clock's registry lock is always taken before a queue's lock.
class clock_listener
{
public:
    virtual void on_clock_advanced() noexcept = 0;

protected:
    ~clock_listener() = default;
};

// A clock whose waiters are woken through listeners instead of by timed waits.
template <class Clock>
concept notifying_clock = requires(clock_listener& listener)
{
    Clock::add_listener(listener);
    Clock::remove_listener(listener);
};

// A clock whose time passes by itself, so that a timed wait on it ends.
template <class Clock>
concept real_time_clock = !notifying_clock<Clock>;

} // namespace sched::detail

SCHED_VISIBILITY_END

#endif // SCHED_DETAIL_CLOCK_LISTENER_HPP
