#ifndef SCHED_TEST_SUPPORT_MILLISECOND_CLOCK_HPP
#define SCHED_TEST_SUPPORT_MILLISECOND_CLOCK_HPP

#include <chrono>

namespace sched::test {

// The steady clock in whole milliseconds: a user's clock, coarser than the standard clocks, on
// which a time point centuries ahead is representable (not "never"), as on no nanosecond clock.
struct millisecond_clock
{
    using duration = std::chrono::milliseconds;
    using rep = duration::rep;
    using period = duration::period;
    using time_point = std::chrono::time_point<millisecond_clock>;
    static constexpr bool is_steady = true;

    static time_point now() noexcept
    {
        return time_point(std::chrono::duration_cast<duration>(
            std::chrono::steady_clock::now().time_since_epoch()));
    }
};

// A thousand years on it.
inline constexpr std::chrono::milliseconds millennium = std::chrono::hours(24 * 365'250);

} // namespace sched::test

#endif
