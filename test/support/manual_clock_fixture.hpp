#ifndef SCHED_TEST_SUPPORT_MANUAL_CLOCK_FIXTURE_HPP
#define SCHED_TEST_SUPPORT_MANUAL_CLOCK_FIXTURE_HPP

#include <sched/manual_clock.hpp>

#include <ostream>

namespace sched::test {

// Every test on the manual clock starts at its epoch and leaves it there.
struct manual_clock_fixture
{
    manual_clock_fixture() { manual_clock::reset(); }
    ~manual_clock_fixture() { manual_clock::reset(); }

    static manual_clock::time_point at(manual_clock::duration since_epoch)
    {
        return manual_clock::time_point(since_epoch);
    }
};

} // namespace sched::test

namespace sched {

// Lets Boost.Test print manual time in failure messages (found by argument-dependent lookup).
inline std::ostream& boost_test_print_type(std::ostream& os, const manual_clock::time_point& t)
{
    return os << std::chrono::duration<double>(t.time_since_epoch()).count() << " s";
}

} // namespace sched

#endif
