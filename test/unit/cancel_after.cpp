#include <sched/cancel_after.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/test/unit_test.hpp>

#include <optional>

#include "support/io_fixture.hpp"

using namespace std::chrono_literals;
using sched::manual_clock;

namespace {

using error_code = boost::system::error_code;

struct cancel_after_fixture : sched::test::scheduler_fixture
{
    std::optional<error_code> result;

    auto on_done()
    {
        return [this](error_code ec) {
            result = ec;
        };
    }
};

} // namespace

BOOST_AUTO_TEST_SUITE(test_cancel_after)

BOOST_FIXTURE_TEST_CASE(an_operation_outliving_its_timeout_is_cancelled, cancel_after_fixture)
{
    // The wrapped operation: a wait of 10 s, bounded to 1 s.
    scheduler.async_wait(10s, sched::cancel_after(scheduler, 1s, on_done()));
    BOOST_TEST(pool.queue().size() == 2u);
    manual_clock::advance(1s);
    complete_one(); // the emission, through the handler's executor
    if (!result)
        complete_one(); // then the cancelled wait's completion
    BOOST_TEST((result && *result == boost::asio::error::operation_aborted));
    BOOST_TEST(pool.queue().size() == 0u);
}

BOOST_FIXTURE_TEST_CASE(an_operation_that_completes_first_takes_its_timeout_out,
                        cancel_after_fixture)
{
    scheduler.async_wait(1s, sched::cancel_after(scheduler, 1h, on_done()));
    manual_clock::advance(1s);
    complete_one();
    BOOST_TEST((result && !*result));
    BOOST_TEST(pool.queue().size() == 0u); // the 1 h timeout left in O(log n)
}

BOOST_FIXTURE_TEST_CASE(cancel_at_uses_an_absolute_time, cancel_after_fixture)
{
    scheduler.async_wait(10s, sched::cancel_at(scheduler, at(2s), on_done()));
    manual_clock::advance(2s);
    io.restart();
    while (!result && io.run_one() == 1u)
    {}
    BOOST_TEST((result && *result == boost::asio::error::operation_aborted));
}

BOOST_FIXTURE_TEST_CASE(the_cancellation_type_is_the_callers, cancel_after_fixture)
{
    // Periodic operations refuse total cancellation once they have ticked.
    std::optional<std::size_t> ticks;
    scheduler.async_schedule_at_fixed_rate(
        0s, 1s, [] {},
        sched::cancel_after(
            scheduler, 500ms, [&](std::exception_ptr, std::size_t n) { ticks = n; },
            boost::asio::cancellation_type::total));
    manual_clock::advance(500ms);
    complete_one(); // the emission: refused
    BOOST_TEST(!ticks);
    BOOST_TEST(pool.queue().size() == 1u);
    pool.shutdown_now();
    complete_one();
    BOOST_TEST(ticks.value_or(0) == 1u);
}

BOOST_FIXTURE_TEST_CASE(cancellation_on_the_callers_own_slot_reaches_the_operation,
                        cancel_after_fixture)
{
    boost::asio::cancellation_signal signal;
    scheduler.async_wait(
        10s, sched::cancel_after(scheduler, 1h,
                                 boost::asio::bind_cancellation_slot(signal.slot(), on_done())));
    signal.emit(boost::asio::cancellation_type::terminal);
    complete_one();
    BOOST_TEST((result && *result == boost::asio::error::operation_aborted));
    BOOST_TEST(pool.queue().size() == 0u); // the wait and its timeout
}

BOOST_AUTO_TEST_SUITE_END()
