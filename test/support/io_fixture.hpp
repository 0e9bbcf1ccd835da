#ifndef SCHED_TEST_SUPPORT_IO_FIXTURE_HPP
#define SCHED_TEST_SUPPORT_IO_FIXTURE_HPP

#include <sched/scheduler.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/system/error_code.hpp>
#include <boost/system/system_error.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstddef>
#include <exception>
#include <stdexcept>

#include "support/pool_fixture.hpp"

namespace sched::test {

using manual_scheduler = basic_scheduler<manual_clock>;

// The Asio front's tests: an io_context that every operation completes through, and a
// one-worker pool on the manual clock (the pool goes first, then the io_context).
struct io_fixture : pool_fixture
{
    boost::asio::io_context io;
    manual_pool pool{single_worker()};

    // Runs the io_context until one handler has run; a minute with none fails the test (rather
    // than hang it).
    void complete_one()
    {
        io.restart(); // it stops whenever it runs out of work
        BOOST_TEST_REQUIRE(io.run_one_for(std::chrono::minutes(1)) == 1u);
    }

    // Runs what is ready, without blocking (a coroutine just spawned runs to its first
    // co_await); returns how many handlers ran.
    std::size_t run_ready()
    {
        io.restart(); // a stopped io_context would run nothing
        return io.poll();
    }

    // Runs the io_context until it runs out of work: every pending operation has completed and
    // every coroutine has ended. A minute with work still left fails the test (rather than hang
    // it).
    void run_to_end()
    {
        io.restart();
        io.run_for(std::chrono::minutes(1));
        BOOST_TEST_REQUIRE(io.stopped()); // out of work, not out of time
    }
};

// io_fixture with a scheduler on it.
struct scheduler_fixture : io_fixture
{
    manual_scheduler scheduler{io, pool};
};

// An exception of the tests' own, to tell a work's exception from the library's.
struct custom_error : std::runtime_error
{
    custom_error() : std::runtime_error("custom") {}
};

// The error_code inside an exception_ptr that carries a system_error; success otherwise.
inline boost::system::error_code code_in(const std::exception_ptr& e)
{
    try
    {
        if (e)
            std::rethrow_exception(e);
    }
    catch (const boost::system::system_error& error)
    {
        return error.code();
    }
    return {};
}

} // namespace sched::test

#endif // SCHED_TEST_SUPPORT_IO_FIXTURE_HPP
