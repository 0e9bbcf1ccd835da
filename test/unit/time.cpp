#include <sched/detail/time.hpp>

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdint>
#include <limits>
#include <ratio>
#include <stdexcept>

#include "support/millisecond_clock.hpp"

using namespace std::chrono_literals;
using ns = std::chrono::nanoseconds;
using steady_point = std::chrono::steady_clock::time_point;

BOOST_AUTO_TEST_SUITE(test_time)

BOOST_AUTO_TEST_CASE(saturating_cast_converts_values_in_range_exactly)
{
    using sched::detail::saturating_cast;
    BOOST_TEST(saturating_cast<ns>(3s).count() == 3'000'000'000);
    BOOST_TEST(saturating_cast<ns>(-2ms).count() == -2'000'000);
    BOOST_TEST(saturating_cast<ns>(std::chrono::duration<double>(1.5)).count() == 1'500'000'000);
    BOOST_TEST(saturating_cast<std::chrono::milliseconds>(1999us).count() == 1); // truncates
}

BOOST_AUTO_TEST_CASE(saturating_cast_clamps_instead_of_overflowing)
{
    using sched::detail::saturating_cast;
    BOOST_TEST((saturating_cast<ns>(std::chrono::hours::max()) == ns::max()));
    BOOST_TEST((saturating_cast<ns>(std::chrono::hours::min()) == ns::min()));
    BOOST_TEST((saturating_cast<ns>(
                    std::chrono::seconds(std::numeric_limits<long long>::max() / 2)) == ns::max()));
    BOOST_TEST((saturating_cast<ns>(std::chrono::duration<double>(1e300)) == ns::max()));
    BOOST_TEST((saturating_cast<ns>(std::chrono::duration<double>(-1e300)) == ns::min()));
    const double nan = std::numeric_limits<double>::quiet_NaN();
    BOOST_TEST((saturating_cast<ns>(std::chrono::duration<double>(nan)) == ns::zero()));
}

BOOST_AUTO_TEST_CASE(saturating_cast_handles_unsigned_representations)
{
    using sched::detail::saturating_cast;
    using unsigned_ms = std::chrono::duration<std::uint64_t, std::milli>;
    using unsigned_ns = std::chrono::duration<std::uint64_t, std::nano>;
    BOOST_TEST(saturating_cast<ns>(unsigned_ms(5)).count() == 5'000'000);
    BOOST_TEST(
        (saturating_cast<ns>(unsigned_ms(std::numeric_limits<std::uint64_t>::max())) == ns::max()));
    BOOST_TEST(
        (saturating_cast<ns>(unsigned_ns(std::numeric_limits<std::uint64_t>::max())) == ns::max()));
    BOOST_TEST(saturating_cast<ns>(unsigned_ns(7)).count() == 7);
}

// A unit that is not a whole number of the target's: duration_cast multiplies before it
// divides, which overflowed 64 bits (undefined behaviour, and a limit three times too small).
BOOST_AUTO_TEST_CASE(saturating_cast_converts_units_that_are_not_whole_nanoseconds)
{
    using sched::detail::saturating_cast;
    using thirds = std::chrono::duration<std::int64_t, std::ratio<1, 3>>;
    using halves = std::chrono::duration<std::int64_t, std::ratio<1, 2>>;
    using frames = std::chrono::duration<int, std::ratio<1, 60>>;
    BOOST_TEST(saturating_cast<ns>(frames(1)).count() == 16'666'666);
    // 2e10 thirds of a second, 211 years, fit in nanoseconds.
    BOOST_TEST(saturating_cast<ns>(thirds(20'000'000'000)).count() == 6'666'666'666'666'666'666);
    BOOST_TEST(saturating_cast<ns>(thirds(-20'000'000'000)).count() == -6'666'666'666'666'666'666);
    BOOST_TEST((saturating_cast<ns>(thirds(30'000'000'000)) == ns::max()));
    BOOST_TEST((saturating_cast<ns>(thirds::min()) == ns::min()));
    BOOST_TEST(saturating_cast<thirds>(ns::max()).count() == 27'670'116'110);
    BOOST_TEST(saturating_cast<halves>(thirds::max()).count() == 6'148'914'691'236'517'204);
}

BOOST_AUTO_TEST_CASE(due_after_rejects_a_nan_delay)
{
    const double nan = std::numeric_limits<double>::quiet_NaN();
    BOOST_CHECK_THROW(
        sched::detail::due_after<std::chrono::steady_clock>(std::chrono::duration<double>(nan)),
        std::invalid_argument);
}

// A delay in a finer unit than the clock's rounds up: 1.5 ms on a clock of whole milliseconds is
// due 2 ms from now. Before, it was due 1 ms from now: half a millisecond early (a review's
// finding).
BOOST_AUTO_TEST_CASE(due_after_rounds_a_finer_delay_up_to_the_clocks_unit)
{
    using clock = sched::test::millisecond_clock;
    const clock::time_point before = clock::now();
    const clock::time_point due = sched::detail::due_after<clock>(1500us);
    const clock::time_point after = clock::now();
    BOOST_TEST((due >= before + 2ms && due <= after + 2ms));
}

BOOST_AUTO_TEST_CASE(saturating_add_treats_negative_as_zero_and_caps_at_max)
{
    using sched::detail::saturating_add;
    const steady_point t(100s);
    BOOST_TEST((saturating_add(t, ns(-5)) == t));
    BOOST_TEST((saturating_add(t, ns(5)) == t + ns(5)));
    BOOST_TEST((saturating_add(t, ns::max()) == steady_point::max()));
    BOOST_TEST((saturating_add(steady_point::max(), ns(1)) == steady_point::max()));
}

BOOST_AUTO_TEST_CASE(saturating_subtract_treats_negative_as_zero_and_caps_at_min)
{
    using sched::detail::saturating_subtract;
    const steady_point t(100s);
    BOOST_TEST((saturating_subtract(t, ns(-5)) == t));
    BOOST_TEST((saturating_subtract(t, ns(5)) == t - ns(5)));
    BOOST_TEST((saturating_subtract(steady_point(-1s), ns::max()) == steady_point::min()));
    BOOST_TEST((saturating_subtract(steady_point::min(), ns(1)) == steady_point::min()));
    BOOST_TEST((saturating_subtract(steady_point(0s), ns::max()) == steady_point(-ns::max())));
}

BOOST_AUTO_TEST_CASE(saturating_ceil_rounds_up_to_any_unit_and_clamps)
{
    using sched::detail::saturating_ceil;
    using ms = std::chrono::milliseconds;
    // A unit that is not a whole number of the target's, and a fraction in floating point, round
    // up whether the target is coarser or finer. Before, a finer target truncated: a third of a
    // second was 333,333,333 ns, and 1.0015 µs as a double 1,001 ns (a review's probe).
    using third = std::chrono::duration<std::int64_t, std::ratio<1, 3>>;
    BOOST_TEST((saturating_ceil<ms>(third(1)) == ms(334)));
    BOOST_TEST((saturating_ceil<ns>(third(1)) == ns(333'333'334)));
    BOOST_TEST((saturating_ceil<ns>(third(-1)) == ns(-333'333'333)));
    BOOST_TEST((saturating_ceil<ns>(third(3)) == ns(1'000'000'000))); // exact: nothing to round
    BOOST_TEST(
        (saturating_ceil<ns>(std::chrono::duration<double, std::micro>(1.0015)) == ns(1002)));
    BOOST_TEST((saturating_ceil<ns>(std::chrono::duration<double, std::micro>(0.0005)) == ns(1)));
    BOOST_TEST((saturating_ceil<ns>(std::chrono::duration<double, std::micro>(-0.0015)) == ns(-1)));
    BOOST_TEST((saturating_ceil<ns>(std::chrono::duration<double, std::micro>(2.0)) == ns(2000)));
    BOOST_TEST((saturating_ceil<ms>(ns(1'000'001)) == ms(2))); // a deadline is not reached early
    BOOST_TEST((saturating_ceil<ms>(ns(2'000'000)) == ms(2)));
    BOOST_TEST((saturating_ceil<ms>(ns(-1'500'000)) == ms(-1)));
    BOOST_TEST((saturating_ceil<ms>(ns::max()) == ms(ns::max().count() / 1'000'000 + 1)));
    BOOST_TEST((saturating_ceil<ns>(std::chrono::hours::max()) == ns::max()));
    BOOST_TEST((saturating_ceil<ns>(std::chrono::hours::min()) == ns::min()));
    BOOST_TEST((saturating_ceil<ns>(std::chrono::duration<double>(1e30)) == ns::max()));
    using float_ms = std::chrono::duration<double, std::milli>;
    BOOST_TEST((saturating_ceil<float_ms>(ns(1'500'000)) == float_ms(1.5))); // nothing to round
}

BOOST_AUTO_TEST_CASE(saturating_difference_is_exact_in_range_and_clamps_beyond)
{
    using sched::detail::saturating_difference;
    const steady_point t(100s);
    BOOST_TEST((saturating_difference(t, steady_point(40s)) == 60s));
    BOOST_TEST((saturating_difference(steady_point(40s), t) == -60s));
    BOOST_TEST((saturating_difference(t, steady_point::min()) == ns::max()));
    BOOST_TEST((saturating_difference(steady_point::min(), t) == ns::min()));
    BOOST_TEST((saturating_difference(steady_point::max(), steady_point(-1s)) == ns::max()));
    // The extremes that still fit.
    BOOST_TEST((saturating_difference(steady_point(-1ns), steady_point::min()) == ns::max()));
    BOOST_TEST((saturating_difference(steady_point::min(), steady_point(0s)) == ns::min()));
}

BOOST_AUTO_TEST_SUITE_END()
