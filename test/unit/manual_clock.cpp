#include <sched/delayed_work_queue.hpp>
#include <sched/manual_clock.hpp>

#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <cmath>
#include <future>
#include <limits>
#include <stdexcept>

#include "support/blocking_call.hpp"
#include "support/child_process.hpp"
#include "support/manual_clock_fixture.hpp"
#include "support/test_task.hpp"

using namespace std::chrono_literals;
using sched::manual_clock;

BOOST_FIXTURE_TEST_SUITE(test_manual_clock, sched::test::manual_clock_fixture)

BOOST_AUTO_TEST_CASE(starts_at_the_epoch_and_moves_only_when_told)
{
    BOOST_TEST(manual_clock::now().time_since_epoch().count() == 0);
    manual_clock::advance(1500ms);
    BOOST_TEST((manual_clock::now() == at(1500ms)));
    manual_clock::advance_to(at(3s));
    BOOST_TEST((manual_clock::now() == at(3s)));
    manual_clock::advance_to(at(3s)); // already there: no-op
    BOOST_TEST((manual_clock::now() == at(3s)));
}

BOOST_AUTO_TEST_CASE(going_back_throws_invalid_argument)
{
    manual_clock::advance(5s);
    BOOST_CHECK_THROW(manual_clock::advance(-1ns), std::invalid_argument);
    BOOST_CHECK_THROW(manual_clock::advance_to(at(4s)), std::invalid_argument);
    BOOST_TEST((manual_clock::now() == at(5s)));
}

BOOST_AUTO_TEST_CASE(advance_saturates_at_the_end_of_time)
{
    manual_clock::advance(1s);
    manual_clock::advance(manual_clock::duration::max());
    BOOST_TEST((manual_clock::now() == manual_clock::end_of_time()));
    manual_clock::advance(1s);
    BOOST_TEST((manual_clock::now() == manual_clock::end_of_time()));
}

// A duration or time point in a coarser unit than the clock's saturates too, and a finer one
// rounds up. Before, the conversion to nanoseconds overflowed (undefined behaviour): hours::max()
// read as a negative duration (a review's probe).
BOOST_AUTO_TEST_CASE(advance_takes_any_unit_and_saturates)
{
    manual_clock::advance(std::chrono::duration<double, std::nano>(1.5));
    BOOST_TEST((manual_clock::now() == at(2ns)));
    // A finer unit's fraction counts as a nanosecond too (it was dropped: a review's probe).
    manual_clock::advance(std::chrono::duration<double, std::micro>(0.0005));
    BOOST_TEST((manual_clock::now() == at(3ns)));
    using double_us = std::chrono::duration<double, std::micro>;
    manual_clock::advance_to(std::chrono::time_point<manual_clock, double_us>(double_us(0.0035)));
    BOOST_TEST((manual_clock::now() == at(4ns)));
    manual_clock::advance(std::chrono::hours(3'000'000)); // 1.08e22 ns: beyond the clock's range
    BOOST_TEST((manual_clock::now() == manual_clock::end_of_time()));
    manual_clock::reset();
    manual_clock::advance(std::chrono::hours::max());
    BOOST_TEST((manual_clock::now() == manual_clock::end_of_time()));
    manual_clock::reset();
    manual_clock::advance_to(
        std::chrono::time_point<manual_clock, std::chrono::hours>(std::chrono::hours(3'000'000)));
    BOOST_TEST((manual_clock::now() == manual_clock::end_of_time()));
    BOOST_CHECK_THROW(manual_clock::advance(std::chrono::duration<double>(std::nan(""))),
                      std::invalid_argument);
    BOOST_CHECK_THROW(manual_clock::advance(-std::chrono::hours::max()), std::invalid_argument);
    // At the epoch too, where NaN read as 0 and time stayed (a review's probe).
    manual_clock::reset();
    using double_s = std::chrono::duration<double>;
    BOOST_CHECK_THROW(manual_clock::advance_to(std::chrono::time_point<manual_clock, double_s>(
                          double_s(std::numeric_limits<double>::quiet_NaN()))),
                      std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(reset_returns_to_the_epoch)
{
    manual_clock::advance(1h);
    manual_clock::reset();
    BOOST_TEST(manual_clock::now().time_since_epoch().count() == 0);
}

BOOST_AUTO_TEST_CASE(advance_wakes_a_thread_waiting_on_a_queue, *boost::unit_test::timeout(60))
{
    sched::basic_delayed_work_queue<manual_clock> queue;
    sched::test::test_task task(7);
    queue.push(task, 1h);
    sched::test::blocking_call taker([&] { return sched::test::id_of(queue.take()); });
    BOOST_TEST_REQUIRE(taker.wait_until_blocked());
    manual_clock::advance(1h); // no real hour passes
    BOOST_TEST(taker.get() == 7);
}

#if defined(__linux__)
namespace {

struct counting_listener final : sched::detail::clock_listener
{
    void on_clock_advanced() noexcept override { ++told; }

    std::atomic<int> told{0};
};

} // namespace

// A forked child's clock tells its own listeners, and none of the parent's: the child has none of
// their workers, and a queue's lock that a thread of the parent held as it forked stays locked in
// the child (a child advancing its own pool's clock hung on the parent's pool's queue).
BOOST_AUTO_TEST_CASE(a_forked_childs_clock_tells_only_the_childs_listeners,
                     *boost::unit_test::timeout(60))
{
    counting_listener parents;
    manual_clock::add_listener(parents);
    const bool child_passed = sched::test::in_child([&parents] {
        counting_listener childs;
        manual_clock::add_listener(childs);
        manual_clock::advance(1s);
        manual_clock::remove_listener(childs);
        return parents.told.load() == 0 && childs.told.load() == 1 ? 0 : 1;
    });
    manual_clock::advance(1s);
    manual_clock::remove_listener(parents);
    BOOST_TEST(child_passed);
    BOOST_TEST(parents.told.load() == 1);
}
#endif

BOOST_AUTO_TEST_SUITE_END()
