#ifndef SCHED_DETAIL_SPIN_WAIT_HPP
#define SCHED_DETAIL_SPIN_WAIT_HPP

#include <sched/detail/visibility.hpp>

#include <chrono>

SCHED_VISIBILITY_BEGIN

namespace sched::detail {

// Tells the core that this thread is polling (x86's `pause`, Arm's `yield`), so that it spends
// less power and leaves more of itself to a sibling hyper-thread.
inline void cpu_relax() noexcept
{
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    __builtin_ia32_pause();
#elif defined(__GNUC__) && defined(__aarch64__)
    asm volatile("yield");
#endif
}

// How long one turn of polling lasts at most, in real time, before the poller looks at what it
// waits for again.
inline constexpr auto spin_turn = std::chrono::microseconds(10);

// Polls Clock until it reads `until` or later, for one spin_turn at most; returns the last
// reading. Holds nothing: the caller looks again at what it waits for afterwards.
template <class Clock>
typename Clock::time_point spin_until(typename Clock::time_point until) noexcept
{
    using real = std::chrono::steady_clock;
    const real::time_point turn_end = real::now() + spin_turn;
    typename Clock::time_point now = Clock::now();
    while (now < until && real::now() < turn_end)
    {
        cpu_relax();
        now = Clock::now();
    }
    return now;
}

} // namespace sched::detail

SCHED_VISIBILITY_END

#endif // SCHED_DETAIL_SPIN_WAIT_HPP
