#include <sched/detail/time.hpp>

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <limits>

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

BOOST_AUTO_TEST_CASE(saturating_add_treats_negative_as_zero_and_caps_at_max)
{
    using sched::detail::saturating_add;
    const steady_point t(100s);
    BOOST_TEST((saturating_add(t, ns(-5)) == t));
    BOOST_TEST((saturating_add(t, ns(5)) == t + ns(5)));
    BOOST_TEST((saturating_add(t, ns::max()) == steady_point::max()));
    BOOST_TEST((saturating_add(steady_point::max(), ns(1)) == steady_point::max()));
}

BOOST_AUTO_TEST_SUITE_END()
