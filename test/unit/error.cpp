#include <sched/error.hpp>

#include <boost/asio/error.hpp>
#include <boost/test/unit_test.hpp>

#include <string>
#include <system_error>

BOOST_AUTO_TEST_SUITE(test_error)

BOOST_AUTO_TEST_CASE(codes_belong_to_the_sched_category)
{
    const boost::system::error_code ec = sched::error::shutdown;
    BOOST_TEST(ec.category().name() == std::string("sched"));
    BOOST_TEST(ec.value() == 1);
    BOOST_TEST(ec.message() == "the scheduler is shut down");
    BOOST_TEST((ec == sched::make_error_code(sched::error::shutdown)));
    BOOST_TEST((ec != boost::asio::error::operation_aborted));
}

BOOST_AUTO_TEST_CASE(an_unknown_value_has_a_message)
{
    BOOST_TEST(sched::error_category().message(99) == "unknown sched error");
}

BOOST_AUTO_TEST_CASE(codes_convert_to_std_error_code_and_keep_their_category)
{
    const boost::system::error_code ec = sched::error::shutdown;
    const std::error_code converted = ec;
    BOOST_TEST(converted.category().name() == std::string("sched"));
    BOOST_TEST(converted.value() == 1);
    BOOST_TEST(converted.message() == "the scheduler is shut down");
    BOOST_TEST((converted == std::error_code(sched::make_error_code(sched::error::shutdown))));
    BOOST_TEST((boost::system::error_code(converted) == sched::error::shutdown));
}

BOOST_AUTO_TEST_CASE(rejected_execution_carries_its_reason)
{
    const sched::rejected_execution e(sched::error::shutdown, "pool");
    BOOST_TEST((e.code() == sched::error::shutdown));
    BOOST_TEST(std::string(e.what()).find("pool") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(cancelled_error_carries_operation_aborted)
{
    const sched::cancelled_error e;
    BOOST_TEST((e.code() == boost::asio::error::operation_aborted));
}

BOOST_AUTO_TEST_SUITE_END()
