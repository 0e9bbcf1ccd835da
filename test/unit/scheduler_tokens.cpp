#include <sched/cancel_after.hpp>
#include <sched/scheduler.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_allocator.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/consign.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/experimental/promise.hpp>
#include <boost/asio/experimental/use_promise.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/spawn.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
// GCC 12 at -O1 (the asan preset) warns that the empty use_future_t token, copied out of
// bind_cancellation_slot, "may be used uninitialized" (impl/use_future.hpp, promise_handler's
// constructor): a false positive, silenced for that header only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <boost/asio/use_future.hpp>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#include <boost/asio/write.hpp>
#include <boost/test/unit_test.hpp>

#include <array>
#include <cstddef>
#include <exception>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <variant>

#include "support/counter.hpp"
#include "support/counting_allocator.hpp"
#include "support/io_fixture.hpp"
#include "support/promise_waiter.hpp"
#include "support/recycler_probe.hpp"
#include "support/wait.hpp"

// Every completion token Asio 1.26 offers, on the scheduler's three kinds of operation: each test
// checks what the token delivers and where it runs. Time moves only through manual_clock::advance.

using namespace std::chrono_literals;
using boost::asio::awaitable;
using boost::asio::cancellation_type;
using boost::asio::use_awaitable;
using boost::asio::ip::tcp;
using sched::manual_clock;
using sched::test::code_in;
using sched::test::counter;
using sched::test::custom_error;
using sched::test::eventually;

namespace {

using error_code = boost::system::error_code;

using tokens_fixture = sched::test::scheduler_fixture;

// A connected pair of loopback TCP sockets.
struct loopback
{
    tcp::acceptor acceptor;
    tcp::socket client;
    tcp::socket server;

    explicit loopback(boost::asio::io_context& io)
        : acceptor(io, tcp::endpoint(boost::asio::ip::address_v4::loopback(), 0)), client(io),
          server(io)
    {
        client.connect(acceptor.local_endpoint());
        acceptor.accept(server);
    }
};

// The error_code of the system_error that `f` throws; success if it throws nothing.
template <class F>
error_code code_thrown_by(F f)
{
    try
    {
        f();
    }
    catch (const boost::system::system_error& error)
    {
        return error.code();
    }
    return {};
}

// Whether `e` holds a custom_error.
bool is_custom_error(const std::exception_ptr& e)
{
    try
    {
        if (e)
            std::rethrow_exception(e);
    }
    catch (const custom_error&)
    {
        return true;
    }
    catch (...)
    {}
    return false;
}

} // namespace

BOOST_AUTO_TEST_SUITE(test_scheduler_tokens)

BOOST_FIXTURE_TEST_CASE(callback_gets_the_outcome_on_the_io_context, tokens_fixture)
{
    std::optional<error_code> waited;
    std::optional<int> value;
    std::exception_ptr error;
    std::thread::id work_thread;
    std::thread::id handler_thread;
    scheduler.async_wait(1s, [&](error_code ec) { waited = ec; });
    scheduler.async_schedule(
        2s,
        [&] {
            work_thread = std::this_thread::get_id();
            return 42;
        },
        [&](std::exception_ptr e, int v) {
            error = e;
            value = v;
            handler_thread = std::this_thread::get_id();
        });
    BOOST_TEST(pool.queue().size() == 2u);
    manual_clock::advance(1s);
    complete_one();
    BOOST_TEST((waited && !*waited));
    settle(pool);
    BOOST_TEST(run_ready() == 0u);
    BOOST_TEST(!value); // not due yet
    manual_clock::advance(1s);
    complete_one();
    BOOST_TEST(!error);
    BOOST_TEST(value.value_or(0) == 42);
    BOOST_TEST((work_thread != std::thread::id() && work_thread != std::this_thread::get_id()));
    BOOST_TEST((handler_thread == std::this_thread::get_id()));
}

BOOST_FIXTURE_TEST_CASE(use_future_gets_the_value_without_the_io_context, tokens_fixture)
{
    std::future<int> value = scheduler.async_schedule(
        1s, [] { return 42; }, boost::asio::use_future);
    BOOST_TEST((value.wait_for(0s) == std::future_status::timeout));
    manual_clock::advance(1s);
    // use_future's handler has an executor of its own: the io_context never runs.
    BOOST_TEST_REQUIRE((value.wait_for(60s) == std::future_status::ready));
    BOOST_TEST(value.get() == 42);

    std::future<int> thrown = scheduler.async_schedule(
        0s, []() -> int { throw custom_error(); }, boost::asio::use_future);
    BOOST_CHECK_THROW(thrown.get(), custom_error);
    // The operations release their work on the io_context only after their handlers ran, on a
    // system_executor thread: run() returns once they have, and the io_context may then go.
    run_to_end();
}

BOOST_FIXTURE_TEST_CASE(use_future_of_a_cancelled_operation_throws_operation_aborted,
                        tokens_fixture)
{
    boost::asio::cancellation_signal wait_signal;
    boost::asio::cancellation_signal schedule_signal;
    bool ran = false;
    std::future<void> waited = scheduler.async_wait(
        10s, boost::asio::bind_cancellation_slot(wait_signal.slot(), boost::asio::use_future));
    std::future<int> scheduled = scheduler.async_schedule(
        10s,
        [&] {
            ran = true;
            return 1;
        },
        boost::asio::bind_cancellation_slot(schedule_signal.slot(), boost::asio::use_future));
    BOOST_TEST(pool.queue().size() == 2u);
    wait_signal.emit(cancellation_type::terminal);
    schedule_signal.emit(cancellation_type::terminal);
    BOOST_TEST(pool.queue().size() == 0u);
    BOOST_TEST(code_thrown_by([&] { waited.get(); }) == boost::asio::error::operation_aborted);
    BOOST_TEST(code_thrown_by([&] { scheduled.get(); }) == boost::asio::error::operation_aborted);
    manual_clock::advance(10s);
    settle(pool);
    BOOST_TEST(!ran);
    run_to_end(); // the operations have let go of the io_context: it may be destroyed
}

// use_future's handler names std::allocator, as its allocator: the operation's memory then comes
// from the recycler, as it does for a handler with no allocator (Asio recycles its own
// operations alike).
BOOST_TEST_DECORATOR(*boost::unit_test::precondition(sched::test::recycling))
BOOST_FIXTURE_TEST_CASE(use_future_operations_take_their_memory_from_the_recycler, tokens_fixture)
{
    const sched::test::recycler_probe probe;
    std::future<void> waited = scheduler.async_wait(10s, boost::asio::use_future);
    BOOST_TEST(probe.taken() > 0u);
    manual_clock::advance(10s);
    BOOST_REQUIRE_NO_THROW(waited.get());
    run_to_end();
}

BOOST_FIXTURE_TEST_CASE(use_awaitable_resumes_the_coroutine_with_the_value_or_the_exception,
                        tokens_fixture)
{
    std::optional<int> value;
    std::thread::id resumed_on;
    bool caught_custom_error = false;
    std::optional<std::exception_ptr> coroutine_end;
    boost::asio::co_spawn(
        io,
        [&]() -> awaitable<void> {
            value = co_await scheduler.async_schedule(
                1s, [] { return 42; }, use_awaitable);
            resumed_on = std::this_thread::get_id();
            try
            {
                co_await scheduler.async_schedule(
                    0s, []() -> int { throw custom_error(); }, use_awaitable);
            }
            catch (const custom_error&) // the work's own exception, not a wrapper
            {
                caught_custom_error = true;
            }
        },
        [&](std::exception_ptr e) { coroutine_end = e; });
    run_ready();
    BOOST_TEST(pool.queue().size() == 1u); // suspended in async_schedule
    BOOST_TEST(!value);
    manual_clock::advance(1s);
    run_to_end();
    BOOST_TEST(value.value_or(0) == 42);
    BOOST_TEST((resumed_on == std::this_thread::get_id())); // on the io_context
    BOOST_TEST(caught_custom_error);
    BOOST_TEST_REQUIRE(coroutine_end.has_value());
    BOOST_TEST(!*coroutine_end);
}

BOOST_FIXTURE_TEST_CASE(deferred_schedules_nothing_until_launched_and_counts_the_delay_from_then,
                        tokens_fixture)
{
    bool ran = false;
    auto op = scheduler.async_schedule(
        1s,
        [&] {
            ran = true;
            return 42;
        },
        boost::asio::deferred);
    BOOST_TEST(pool.queue().size() == 0u);
    manual_clock::advance(5s);
    settle(pool);
    BOOST_TEST(!ran);

    std::optional<int> value;
    std::move(op)([&](std::exception_ptr e, int v) {
        if (!e)
            value = v;
    });
    BOOST_TEST(pool.queue().size() == 1u);
    manual_clock::advance(999ms); // the second counts from the launch
    settle(pool);
    BOOST_TEST(!ran);
    manual_clock::advance(1ms);
    complete_one();
    BOOST_TEST(ran);
    BOOST_TEST(value.value_or(0) == 42);
}

BOOST_FIXTURE_TEST_CASE(use_promise_starts_at_once_and_cancels_when_destroyed, tokens_fixture)
{
    counter completions;
    std::mutex mutex;
    std::optional<int> value; // guarded by mutex
    std::exception_ptr error; // guarded by mutex
    auto promise = scheduler.async_schedule(
        1s, [] { return 42; }, boost::asio::experimental::use_promise);
    BOOST_TEST(pool.queue().size() == 1u); // eager: started by the initiating function
    BOOST_TEST(!promise.completed());
    promise([&](std::exception_ptr e, int v) {
        std::lock_guard lock(mutex);
        error = e;
        value = v;
        completions.increment();
    });
    manual_clock::advance(1s);
    run_to_end();
    BOOST_TEST_REQUIRE(completions.wait_for_at_least(1));
    {
        std::lock_guard lock(mutex);
        BOOST_TEST(!error);
        BOOST_TEST(value.value_or(0) == 42);
    }

    {
        auto abandoned = scheduler.async_wait(10s, boost::asio::experimental::use_promise);
        BOOST_TEST(pool.queue().size() == 1u);
    } // the promise's destructor cancels the operation, through the scheduler's executor
    run_to_end(); // the cancellation, then the completion
    BOOST_TEST(pool.queue().size() == 0u);
}

// A promise completes through the executor of its operation's initiation, which the scheduler
// gives as its own (as Asio's I/O objects do): the promise's waiters run on the io_context.
BOOST_FIXTURE_TEST_CASE(use_promise_completes_on_the_schedulers_executor, tokens_fixture)
{
    auto promise = scheduler.async_wait(1s, boost::asio::experimental::use_promise);
    sched::test::promise_waiter waiter(io);
    waiter.wait_on(promise);
    manual_clock::advance(1s);
    run_to_end();
    BOOST_TEST(waiter.ran_on_io_with(error_code())); // success, on the io_context
}

// Boost 1.81's yield_context cannot take a completion signature that starts with an
// std::exception_ptr (chriskohlhoff/asio#1336): `void(std::exception_ptr, T)` does not compile
// and `void(std::exception_ptr)` rethrows a null exception_ptr on success. async_schedule goes
// through as_tuple(yield) instead; async_wait's error_code works with yield itself.
BOOST_FIXTURE_TEST_CASE(yield_context_gets_the_value_the_exception_and_the_error, tokens_fixture)
{
    std::thread::id resumed_on;
    std::optional<std::tuple<std::exception_ptr, int>> value;
    std::optional<std::tuple<std::exception_ptr, int>> thrown;
    std::optional<std::exception_ptr> first_end;
    boost::asio::spawn(
        io,
        [&](boost::asio::yield_context yield) {
            scheduler.async_wait(1s, yield); // throws unless it succeeds
            resumed_on = std::this_thread::get_id();
            value = scheduler.async_schedule(
                0s, [] { return 42; }, boost::asio::as_tuple(yield));
            thrown = scheduler.async_schedule(
                0s, []() -> int { throw custom_error(); }, boost::asio::as_tuple(yield));
        },
        [&](std::exception_ptr e) { first_end = e; });
    run_ready();
    BOOST_TEST(pool.queue().size() == 1u);
    manual_clock::advance(1s);
    run_to_end();
    BOOST_TEST_REQUIRE(first_end.has_value());
    BOOST_TEST(!*first_end);
    BOOST_TEST((resumed_on == std::this_thread::get_id()));
    BOOST_TEST_REQUIRE(value.has_value());
    BOOST_TEST(!std::get<0>(*value));
    BOOST_TEST(std::get<1>(*value) == 42);
    BOOST_TEST_REQUIRE(thrown.has_value());
    BOOST_TEST(is_custom_error(std::get<0>(*thrown)));

    // yield[ec] takes the error instead of throwing it; the spawned function's cancellation
    // slot reaches the operation, through the spawn's executor (spawn dispatches the emission).
    boost::asio::cancellation_signal signal;
    std::optional<error_code> waited;
    boost::asio::spawn(
        io,
        [&](boost::asio::yield_context yield) {
            error_code ec;
            scheduler.async_wait(10s, yield[ec]);
            waited = ec;
        },
        boost::asio::bind_cancellation_slot(signal.slot(), [](std::exception_ptr) {}));
    run_ready();
    BOOST_TEST(pool.queue().size() == 1u);
    signal.emit(cancellation_type::terminal);
    run_to_end();
    BOOST_TEST(pool.queue().size() == 0u); // out before its time: nothing advanced the clock
    BOOST_TEST((waited && *waited == boost::asio::error::operation_aborted));
}

BOOST_FIXTURE_TEST_CASE(as_tuple_delivers_the_arguments_as_one_tuple, tokens_fixture)
{
    std::optional<std::tuple<std::exception_ptr, int>> scheduled;
    scheduler.async_schedule(
        0s, []() -> int { throw custom_error(); },
        boost::asio::as_tuple([&](std::tuple<std::exception_ptr, int> t) { scheduled = t; }));
    complete_one();
    BOOST_TEST_REQUIRE(scheduled.has_value());
    BOOST_TEST(is_custom_error(std::get<0>(*scheduled)));
    BOOST_TEST(std::get<1>(*scheduled) == 0);

    boost::asio::cancellation_signal signal;
    std::optional<std::tuple<error_code>> waited;
    scheduler.async_wait(
        1s,
        boost::asio::bind_cancellation_slot(
            signal.slot(), boost::asio::as_tuple([&](std::tuple<error_code> t) { waited = t; })));
    signal.emit(cancellation_type::terminal);
    complete_one();
    BOOST_TEST_REQUIRE(waited.has_value());
    BOOST_TEST(std::get<0>(*waited) == boost::asio::error::operation_aborted);
}

BOOST_FIXTURE_TEST_CASE(redirect_error_stores_the_error_code, tokens_fixture)
{
    error_code ec = boost::asio::error::invalid_argument; // overwritten, even with success
    bool invoked = false;
    scheduler.async_wait(1s, boost::asio::redirect_error([&] { invoked = true; }, ec));
    manual_clock::advance(1s);
    complete_one();
    BOOST_TEST(invoked);
    BOOST_TEST(!ec);

    boost::asio::cancellation_signal signal;
    invoked = false;
    scheduler.async_wait(
        1s, boost::asio::bind_cancellation_slot(
                signal.slot(), boost::asio::redirect_error([&] { invoked = true; }, ec)));
    signal.emit(cancellation_type::terminal);
    complete_one();
    BOOST_TEST(invoked);
    BOOST_TEST(ec == boost::asio::error::operation_aborted);
}

BOOST_FIXTURE_TEST_CASE(bind_executor_to_a_strand_runs_the_handler_in_it, tokens_fixture)
{
    auto strand = boost::asio::make_strand(io);
    std::optional<error_code> waited;
    bool in_strand = false;
    scheduler.async_wait(1s, boost::asio::bind_executor(strand, [&](error_code ec) {
                             waited = ec;
                             in_strand = strand.running_in_this_thread();
                         }));
    manual_clock::advance(1s);
    run_to_end();
    BOOST_TEST((waited && !*waited));
    BOOST_TEST(in_strand);
}

BOOST_FIXTURE_TEST_CASE(bind_executor_to_another_io_context_runs_the_handler_there, tokens_fixture)
{
    boost::asio::io_context other;
    std::optional<int> value;
    std::thread::id ran_on;
    bool in_other = false;
    bool in_io = true;
    scheduler.async_schedule(
        1s, [] { return 7; }, boost::asio::bind_executor(other, [&](std::exception_ptr e, int v) {
            if (!e)
                value = v;
            ran_on = std::this_thread::get_id();
            in_other = other.get_executor().running_in_this_thread();
            in_io = io.get_executor().running_in_this_thread();
        }));
    // The pending operation is work on both: run() returns only once the handler has run.
    std::thread runner([&] { other.run(); });
    const std::thread::id runner_id = runner.get_id();
    manual_clock::advance(1s);
    runner.join();
    BOOST_TEST(value.value_or(0) == 7);
    BOOST_TEST((ran_on == runner_id));
    BOOST_TEST(in_other);
    BOOST_TEST(!in_io);
    run_to_end(); // returns: the work counted on the scheduler's executor was released
    BOOST_TEST(io.stopped());
}

BOOST_FIXTURE_TEST_CASE(bind_cancellation_slot_aborts_a_pending_schedule, tokens_fixture)
{
    boost::asio::cancellation_signal signal;
    bool ran = false;
    std::optional<std::exception_ptr> error;
    int value = -1;
    scheduler.async_schedule(
        5s,
        [&] {
            ran = true;
            return 1;
        },
        boost::asio::bind_cancellation_slot(signal.slot(), [&](std::exception_ptr e, int v) {
            error = e;
            value = v;
        }));
    BOOST_TEST(pool.queue().size() == 1u);
    signal.emit(cancellation_type::terminal);
    BOOST_TEST(pool.queue().size() == 0u); // out at once, not left to expire
    BOOST_TEST(!error);                    // never inside the emit
    complete_one();
    BOOST_TEST_REQUIRE(error.has_value());
    BOOST_TEST(code_in(*error) == boost::asio::error::operation_aborted);
    BOOST_TEST(value == 0);
    manual_clock::advance(5s);
    settle(pool);
    BOOST_TEST(!ran);
}

BOOST_FIXTURE_TEST_CASE(bind_allocator_allocates_from_the_handlers_allocator, tokens_fixture)
{
    sched::test::allocation_log log;
    sched::test::counting_allocator<void> alloc(log);
    long live_in_wait_handler = -1;
    long live_in_schedule_handler = -1;
    boost::asio::cancellation_signal signal;
    scheduler.async_wait(1s, boost::asio::bind_allocator(
                                 alloc, [&](error_code) { live_in_wait_handler = log.live(); }));
    const long after_wait = log.allocations();
    BOOST_TEST(after_wait >= 1); // the operation itself, at once
    scheduler.async_schedule(
        1s, [] { return 1; },
        boost::asio::bind_cancellation_slot(
            signal.slot(), boost::asio::bind_allocator(alloc, [&](std::exception_ptr, int) {
                live_in_schedule_handler = log.live();
            })));
    BOOST_TEST(log.allocations() > after_wait);
    BOOST_TEST(log.live() > 0);
    signal.emit(cancellation_type::terminal);
    complete_one();
    BOOST_TEST(live_in_schedule_handler > 0); // the wait is still pending
    manual_clock::advance(1s);
    complete_one();
    BOOST_TEST(live_in_wait_handler == 0); // freed before the handler runs
    BOOST_TEST(log.live() == 0);           // everything allocated was given back
}

BOOST_FIXTURE_TEST_CASE(consign_keeps_the_object_alive_until_the_handler_ran, tokens_fixture)
{
    auto kept = std::make_shared<int>(1);
    const std::weak_ptr<int> watch = kept;
    bool alive_in_handler = false;
    scheduler.async_wait(
        1s, boost::asio::consign([&](error_code) { alive_in_handler = !watch.expired(); },
                                 std::move(kept)));
    BOOST_TEST(!watch.expired());
    manual_clock::advance(1s);
    settle(pool); // the wait has run; its completion waits for the io_context
    BOOST_TEST(!watch.expired());
    complete_one();
    BOOST_TEST(alive_in_handler);
    BOOST_TEST(watch.expired()); // released with the handler
}

BOOST_FIXTURE_TEST_CASE(parallel_group_wait_for_one_cancels_the_slower_wait, tokens_fixture)
{
    std::optional<std::array<std::size_t, 2>> order;
    error_code first;
    error_code second;
    boost::asio::experimental::make_parallel_group(scheduler.async_wait(1s, boost::asio::deferred),
                                                   scheduler.async_wait(5s, boost::asio::deferred))
        .async_wait(boost::asio::experimental::wait_for_one(),
                    [&](std::array<std::size_t, 2> o, error_code ec1, error_code ec2) {
                        order = o;
                        first = ec1;
                        second = ec2;
                    });
    BOOST_TEST(pool.queue().size() == 2u);
    manual_clock::advance(1s);
    run_to_end();
    BOOST_TEST(pool.queue().size() == 0u); // the 5 s wait left the queue at 1 s
    BOOST_TEST_REQUIRE(order.has_value());
    BOOST_TEST((*order)[0] == 0u);
    BOOST_TEST((*order)[1] == 1u);
    BOOST_TEST(!first);
    BOOST_TEST(second == boost::asio::error::operation_aborted);
}

BOOST_FIXTURE_TEST_CASE(awaitable_or_lets_the_wait_win_over_a_silent_socket_read, tokens_fixture)
{
    using namespace boost::asio::experimental::awaitable_operators;
    loopback sockets(io);
    std::array<char, 16> data{};
    std::optional<std::size_t> winner;
    std::optional<error_code> read_error;
    std::optional<std::exception_ptr> coroutine_end;
    auto read = [&]() -> awaitable<std::size_t> {
        try
        {
            co_return co_await sockets.server.async_read_some(boost::asio::buffer(data),
                                                              use_awaitable);
        }
        catch (const boost::system::system_error& e)
        {
            read_error = e.code();
            throw;
        }
    };
    boost::asio::co_spawn(
        io,
        [&]() -> awaitable<void> {
            auto result = co_await (scheduler.async_wait(1s, use_awaitable) || read());
            winner = result.index();
        },
        [&](std::exception_ptr e) { coroutine_end = e; });
    run_ready();
    BOOST_TEST(pool.queue().size() == 1u);
    BOOST_TEST(!winner);
    manual_clock::advance(1s);
    run_to_end();
    BOOST_TEST_REQUIRE(coroutine_end.has_value());
    BOOST_TEST(!*coroutine_end);
    BOOST_TEST(winner.value_or(9) == 0u);
    BOOST_TEST((read_error && *read_error == boost::asio::error::operation_aborted));
    BOOST_TEST(pool.queue().size() == 0u);
}

BOOST_FIXTURE_TEST_CASE(cancel_after_aborts_a_socket_read_that_gets_no_data, tokens_fixture)
{
    loopback sockets(io);
    std::array<char, 16> data{};
    std::optional<error_code> read_error;
    std::optional<std::exception_ptr> coroutine_end;
    boost::asio::co_spawn(
        io,
        [&]() -> awaitable<void> {
            try
            {
                co_await sockets.server.async_read_some(
                    boost::asio::buffer(data), sched::cancel_after(scheduler, 1s, use_awaitable));
            }
            catch (const boost::system::system_error& e)
            {
                read_error = e.code();
            }
        },
        [&](std::exception_ptr e) { coroutine_end = e; });
    run_ready();
    BOOST_TEST(pool.queue().size() == 1u); // the timeout
    manual_clock::advance(999ms);
    settle(pool); // a timeout that fired early would have posted its cancel by now
    BOOST_TEST(run_ready() == 0u);
    BOOST_TEST(!read_error);
    manual_clock::advance(1ms);
    run_to_end();
    BOOST_TEST_REQUIRE(coroutine_end.has_value());
    BOOST_TEST(!*coroutine_end);
    BOOST_TEST((read_error && *read_error == boost::asio::error::operation_aborted));
    BOOST_TEST(pool.queue().size() == 0u);
}

BOOST_FIXTURE_TEST_CASE(cancel_after_lets_a_read_that_gets_data_complete, tokens_fixture)
{
    loopback sockets(io);
    std::array<char, 16> data{};
    std::optional<std::size_t> received;
    std::optional<std::exception_ptr> coroutine_end;
    boost::asio::co_spawn(
        io,
        [&]() -> awaitable<void> {
            received = co_await sockets.server.async_read_some(
                boost::asio::buffer(data), sched::cancel_after(scheduler, 1s, use_awaitable));
        },
        [&](std::exception_ptr e) { coroutine_end = e; });
    run_ready();
    BOOST_TEST(pool.queue().size() == 1u);
    boost::asio::write(sockets.client, boost::asio::buffer(std::string("hi")));
    run_to_end();
    BOOST_TEST_REQUIRE(coroutine_end.has_value());
    BOOST_TEST(!*coroutine_end);
    BOOST_TEST(received.value_or(0) == 2u);
    BOOST_TEST(std::string(data.data(), 2) == "hi");
    BOOST_TEST(pool.queue().size() == 0u); // the timeout left with the completion
    manual_clock::advance(1s);             // and never fires
    settle(pool);
    run_to_end();
    BOOST_TEST(sockets.server.is_open());
}

BOOST_FIXTURE_TEST_CASE(periodic_with_use_awaitable_ends_with_the_tick_count, tokens_fixture)
{
    counter ticks;
    std::thread::id tick_thread;
    boost::asio::cancellation_signal signal;
    std::optional<std::tuple<std::exception_ptr, std::size_t>> result;
    std::thread::id resumed_on;
    boost::asio::co_spawn(
        io,
        [&]() -> awaitable<void> {
            result = co_await scheduler.async_schedule_at_fixed_rate(
                1s, 1s,
                [&] {
                    tick_thread = std::this_thread::get_id();
                    ticks.increment();
                },
                boost::asio::bind_cancellation_slot(signal.slot(),
                                                    boost::asio::as_tuple(use_awaitable)));
            resumed_on = std::this_thread::get_id();
        },
        boost::asio::detached);
    run_ready();
    BOOST_TEST(pool.queue().size() == 1u);
    for (int k = 1; k <= 3; ++k)
    {
        manual_clock::advance(1s);
        BOOST_TEST_REQUIRE(ticks.wait_for_at_least(k));
    }
    // Back in the queue for its fourth run, due at 4 s: cancel it there.
    BOOST_TEST_REQUIRE(eventually([&] { return pool.queue().size() == 1u; }));
    signal.emit(cancellation_type::terminal);
    BOOST_TEST(pool.queue().size() == 0u);
    run_to_end();
    BOOST_TEST_REQUIRE(result.has_value());
    BOOST_TEST(code_in(std::get<0>(*result)) == boost::asio::error::operation_aborted);
    BOOST_TEST(std::get<1>(*result) == 3u);
    BOOST_TEST(ticks.value() == 3);
    BOOST_TEST((tick_thread != std::thread::id() && tick_thread != std::this_thread::get_id()));
    BOOST_TEST((resumed_on == std::this_thread::get_id()));
}

BOOST_AUTO_TEST_SUITE_END()
