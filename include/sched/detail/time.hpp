#ifndef SCHED_DETAIL_TIME_HPP
#define SCHED_DETAIL_TIME_HPP

#include <sched/detail/visibility.hpp>

#include <chrono>
#include <ratio>
#include <stdexcept>
#include <type_traits>

SCHED_VISIBILITY_BEGIN

namespace sched::detail {

// Whether `d` is NaN, the one duration that means nothing.
template <class Rep, class Period>
constexpr bool is_nan(std::chrono::duration<Rep, Period> d) noexcept
{
    if constexpr (std::is_floating_point_v<Rep>)
        return d != d;
    else
        return false;
}

// `d` in To's unit, rounded towards zero or (RoundUp, where To counts whole ticks) up, and
// clamped to To's range instead of overflowing: hours::max() becomes nanoseconds::max() (which
// sched reads as "never"), not a negative number.
template <class To, bool RoundUp, class Rep, class Period>
constexpr To convert_saturating(std::chrono::duration<Rep, Period> d) noexcept
{
    using rep = typename To::rep;
    constexpr bool round_up = RoundUp && !std::is_floating_point_v<rep>;
    if constexpr (std::is_floating_point_v<Rep>)
    {
        if (is_nan(d)) // callers reject it first (see due_after); zero is the safe answer
            return To::zero();
        // Compare in To's units with long double, which holds To's integral limits exactly.
        using wide = std::chrono::duration<long double, typename To::period>;
        const long double count = std::chrono::duration_cast<wide>(d).count();
        if (count >= static_cast<long double>(To::max().count()))
            return To::max();
        if (count <= static_cast<long double>(To::min().count()))
            return To::min();
        const rep truncated = static_cast<rep>(count); // below To::max(), so + 1 fits
        return To(round_up && truncated < count ? truncated + 1 : truncated);
    }
    else if constexpr (std::is_floating_point_v<rep>)
        return std::chrono::duration_cast<To>(d); // an integer's range fits in any float's
    else
    {
        // Integer to integer, exactly in 128 bits: duration_cast's 64-bit arithmetic overflows
        // for hours::max() in nanoseconds, and for any count of a unit that is not a whole
        // number of To's (a third of a second: it multiplies before it divides). A 64-bit count
        // times a 64-bit factor fits.
        __extension__ typedef __int128 wide;
        using factor = std::ratio_divide<Period, typename To::period>;
        const wide scaled = static_cast<wide>(d.count()) * factor::num;
        wide count = scaled / factor::den; // towards zero
        if (round_up && count * factor::den < scaled)
            ++count;
        if (count >= static_cast<wide>(To::max().count()))
            return To::max();
        if (count <= static_cast<wide>(To::min().count()))
            return To::min();
        return To(static_cast<rep>(count));
    }
}

// `d` in To's unit, truncated towards zero (as duration_cast), clamped to To's range.
template <class To, class Rep, class Period>
constexpr To saturating_cast(std::chrono::duration<Rep, Period> d) noexcept
{
    return convert_saturating<To, false>(d);
}

// `d` in To's unit, rounded up (a deadline converted so is not reached before it: a third of a
// second is 334 ms, 1.5 ns as a double is 2 ns), clamped to To's range. A floating-point To
// keeps the fraction.
template <class To, class Rep, class Period>
constexpr To saturating_ceil(std::chrono::duration<Rep, Period> d) noexcept
{
    return convert_saturating<To, true>(d);
}

// t + d, where a negative d counts as zero (a negative delay means "now", as in Java) and the
// sum saturates at time_point::max(), which means "never".
template <class TimePoint>
constexpr TimePoint saturating_add(TimePoint t, typename TimePoint::duration d) noexcept
{
    using duration = typename TimePoint::duration;
    if (d <= duration::zero())
        return t;
    if (t.time_since_epoch() > duration::max() - d)
        return TimePoint::max();
    return t + d;
}

// t - d, where a negative d counts as zero and the difference saturates at time_point::min().
template <class TimePoint>
constexpr TimePoint saturating_subtract(TimePoint t, typename TimePoint::duration d) noexcept
{
    using duration = typename TimePoint::duration;
    if (d <= duration::zero())
        return t;
    if (t.time_since_epoch() < duration::min() + d)
        return TimePoint::min();
    return t - d;
}

// a - b, saturating at the duration's limits instead of overflowing (for a time point far in the
// past or future, such as time_point::min()).
template <class TimePoint>
constexpr typename TimePoint::duration saturating_difference(TimePoint a, TimePoint b) noexcept
{
    using duration = typename TimePoint::duration;
    const duration x = a.time_since_epoch();
    const duration y = b.time_since_epoch();
    if (y < duration::zero() && x > y + duration::max())
        return duration::max();
    if (y > duration::zero() && x < y + duration::min())
        return duration::min();
    return x - y;
}

// Throws std::invalid_argument if `delay` is NaN.
template <class Rep, class Period>
void check_not_nan(std::chrono::duration<Rep, Period> delay)
{
    if (is_nan(delay))
        throw std::invalid_argument("sched: a delay is NaN");
}

// A due time given as a time point, or as a delay from when it is resolved: when an operation
// is initiated, which a deferred completion token may put off.
template <class Clock>
struct due_spec
{
    typename Clock::time_point at{};
    typename Clock::duration after{};
    bool relative = false;

    // `delay` (not NaN) from when it is resolved, in the clock's unit: a finer one rounds up, so
    // that nothing is due before its delay has passed. A negative delay means "at once".
    template <class Rep, class Period>
    static due_spec in(std::chrono::duration<Rep, Period> delay) noexcept
    {
        return {.after = saturating_ceil<typename Clock::duration>(delay), .relative = true};
    }

    typename Clock::time_point resolve() const noexcept
    {
        return relative ? saturating_add(Clock::now(), after) : at;
    }
};

// When a task scheduled with `delay` from now is due on Clock (see due_spec::in()). Throws
// std::invalid_argument for a NaN delay.
template <class Clock, class Rep, class Period>
typename Clock::time_point due_after(std::chrono::duration<Rep, Period> delay)
{
    check_not_nan(delay);
    return due_spec<Clock>::in(delay).resolve();
}

} // namespace sched::detail

SCHED_VISIBILITY_END

#endif // SCHED_DETAIL_TIME_HPP
