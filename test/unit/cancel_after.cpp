#include <sched/cancel_after.hpp>
#include <sched/deadline.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/bind_allocator.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detail/handler_cont_helpers.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/execution.hpp>
#include <boost/asio/experimental/promise.hpp>
#include <boost/asio/experimental/use_promise.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/require.hpp>
#include <boost/asio/strand.hpp>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized" // as in scheduler_tokens.cpp
#endif
#include <boost/asio/use_future.hpp>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <future>
#include <memory>
#include <optional>
#include <stdexcept>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "support/counting_allocator.hpp"
#include "support/failing_allocation.hpp"
#include "support/io_fixture.hpp"
#include "support/promise_waiter.hpp"
#include "support/recycler_probe.hpp"
#include "support/wait.hpp"

using namespace std::chrono_literals;
using sched::manual_clock;

namespace {

using error_code = boost::system::error_code;

struct cancel_after_fixture : sched::test::scheduler_fixture
{
    std::optional<error_code> result; // the last completion's
    int completions = 0;

    auto on_done()
    {
        return [this](error_code ec) {
            result = ec;
            ++completions;
        };
    }

    // Launches two waits in a row, the second `second` long, under one 10 s timeout, and runs the
    // first.
    void launch_two_waits(manual_clock::duration second)
    {
        auto chain =
            scheduler.async_wait(1s, boost::asio::deferred([this, second](error_code) {
                                     return scheduler.async_wait(second, boost::asio::deferred);
                                 }));
        std::move(chain)(sched::cancel_after(scheduler, 10s, on_done()));
        manual_clock::advance(1s);
        complete_one(); // the first wait's completion starts the second
        BOOST_TEST(completions == 0);
    }

    // Checks that the operation is not cancelled before `due` on the clock, and is at `due`.
    void expect_cancelled_at(manual_clock::time_point due)
    {
        manual_clock::advance(due - manual_clock::now() - 1ms);
        settle(pool);
        BOOST_TEST(run_ready() == 0u); // not cancelled early
        BOOST_TEST(!result);
        manual_clock::advance(1ms);
        complete_one(); // the emission, through the handler's executor
        if (!result)
            complete_one(); // then the cancelled wait's completion
        BOOST_TEST((result && *result == boost::asio::error::operation_aborted));
    }
};

// An operation that parks its handler and records how, and on which thread, cancellation
// reaches it; its executor is the io_context's, as an I/O object's is.
struct parking_operation
{
    boost::asio::io_context::executor_type executor;
    std::optional<boost::asio::any_completion_handler<void(error_code)>>* parked;
    std::optional<boost::asio::cancellation_type>* cancelled_as;
    std::optional<std::thread::id>* cancelled_on;

    boost::asio::io_context::executor_type get_executor() const noexcept { return executor; }

    template <class Handler>
    void operator()(Handler&& handler) const
    {
        parked->emplace(std::forward<Handler>(handler));
        auto slot = (*parked)->get_cancellation_slot();
        BOOST_TEST_REQUIRE(slot.is_connected());
        slot.assign([as = cancelled_as, on = cancelled_on](boost::asio::cancellation_type type) {
            *as = type;
            *on = std::this_thread::get_id();
        });
    }
};

// A handler that tells Asio it continues its caller's chain of operations.
struct continuing_handler
{
    void operator()(error_code) const {}

    friend bool asio_handler_is_continuation(continuing_handler*) { return true; }
};

} // namespace

BOOST_TEST_DONT_PRINT_LOG_VALUE(boost::asio::cancellation_type)

BOOST_AUTO_TEST_SUITE(test_cancel_after)

// The handler given to the wrapped operation moves as the user's handler does: one whose move
// may throw is not declared never to throw (a throw would have ended the program).
BOOST_AUTO_TEST_CASE(the_wrapped_handler_may_throw_on_a_move_only_if_the_handler_may)
{
    struct throwing_move
    {
        throwing_move() = default;
        throwing_move(throwing_move&&) noexcept(false) {}
        void operator()(error_code) {}
    };
    struct quiet_move
    {
        void operator()(error_code) {}
    };
    using timeout = sched::detail::timeout_task<std::chrono::steady_clock,
                                                boost::asio::io_context::executor_type,
                                                boost::asio::io_context::executor_type>;
    constexpr bool throwing_may_throw = !std::is_nothrow_move_constructible_v<
        sched::detail::timeout_handler<throwing_move, timeout>>;
    constexpr bool quiet_stays_quiet =
        std::is_nothrow_move_constructible_v<sched::detail::timeout_handler<quiet_move, timeout>>;
    BOOST_TEST(throwing_may_throw);
    BOOST_TEST(quiet_stays_quiet);
}

BOOST_FIXTURE_TEST_CASE(an_operation_outliving_its_timeout_is_cancelled, cancel_after_fixture)
{
    // The wrapped operation: a wait of 10 s, bounded to 1 s.
    scheduler.async_wait(10s, sched::cancel_after(scheduler, 1s, on_done()));
    BOOST_TEST(pool.queue().size() == 2u);
    expect_cancelled_at(at(1s));
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

BOOST_FIXTURE_TEST_CASE(a_nan_timeout_is_rejected_and_starts_nothing, cancel_after_fixture)
{
    const std::chrono::duration<double> nan(std::nan(""));
    BOOST_CHECK_THROW(scheduler.async_wait(10s, sched::cancel_after(scheduler, nan, on_done())),
                      std::invalid_argument);
    BOOST_TEST(pool.queue().size() == 0u);
    BOOST_TEST(!result);
}

BOOST_FIXTURE_TEST_CASE(cancel_at_uses_an_absolute_time, cancel_after_fixture)
{
    manual_clock::advance(1s);
    // At 3 s on the clock, 2 s from now (a relative reading would make it 4 s).
    scheduler.async_wait(10s, sched::cancel_at(scheduler, at(3s), on_done()));
    expect_cancelled_at(at(3s));
}

BOOST_DATA_TEST_CASE_F(cancel_after_fixture,
                       the_cancellation_type_is_the_callers,
                       boost::unit_test::data::make({boost::asio::cancellation_type::terminal,
                                                     boost::asio::cancellation_type::partial,
                                                     boost::asio::cancellation_type::total}),
                       type)
{
    std::optional<boost::asio::any_completion_handler<void(error_code)>> parked;
    std::optional<boost::asio::cancellation_type> cancelled_as;
    std::optional<std::thread::id> cancelled_on;
    auto token = sched::cancel_after(scheduler, 1s, on_done(), type);
    boost::asio::async_initiate<decltype(token), void(error_code)>(
        parking_operation{io.get_executor(), &parked, &cancelled_as, &cancelled_on}, token);
    manual_clock::advance(1s);
    settle(pool);
    BOOST_TEST(run_ready() > 0u); // the emission
    BOOST_TEST((cancelled_as == type));
    BOOST_TEST_REQUIRE(parked.has_value());
    std::move (*parked)(error_code(boost::asio::error::operation_aborted));
    BOOST_TEST((result && *result == boost::asio::error::operation_aborted));
}

// The emission goes to an operation on another io_context through a service of that context's:
// it is made as the operation starts, while the context is surely there, not by a worker as the
// timeout falls due, when the context may be in its destructor (which walks its services without
// a lock: a service added meanwhile races it, and is never shut down).
BOOST_FIXTURE_TEST_CASE(an_operation_on_another_context_readies_it_for_the_emission_as_it_starts,
                        cancel_after_fixture)
{
    using service = sched::detail::scheduler_service<manual_clock>;
    boost::asio::io_context other;
    BOOST_TEST_REQUIRE(!boost::asio::has_service<service>(other));
    std::optional<boost::asio::any_completion_handler<void(error_code)>> parked;
    std::optional<boost::asio::cancellation_type> cancelled_as;
    std::optional<std::thread::id> cancelled_on;
    auto token = sched::cancel_after(scheduler, 1s, on_done());
    boost::asio::async_initiate<decltype(token), void(error_code)>(
        parking_operation{other.get_executor(), &parked, &cancelled_as, &cancelled_on}, token);
    BOOST_TEST(boost::asio::has_service<service>(other));
    manual_clock::advance(1s);
    settle(pool);
    BOOST_TEST(other.run_one_for(1min) == 1u); // the emission, on the operation's context
    BOOST_TEST((cancelled_as == boost::asio::cancellation_type::terminal));
    BOOST_TEST_REQUIRE(parked.has_value());
    std::move (*parked)(error_code(boost::asio::error::operation_aborted));
    BOOST_TEST((result && *result == boost::asio::error::operation_aborted));
}

// The wrapped operation's initiation names its executor, so a promise made through cancel_after
// completes there, as one made without it does (not on Asio's system executor).
BOOST_FIXTURE_TEST_CASE(a_promise_through_it_completes_on_the_operations_executor,
                        cancel_after_fixture)
{
    auto promise = scheduler.async_wait(
        1s, sched::cancel_after(scheduler, 1h, boost::asio::experimental::use_promise));
    BOOST_TEST(
        (std::is_same_v<decltype(promise),
                        boost::asio::experimental::promise<
                            void(error_code), sched::test::manual_scheduler::executor_type>>));
    sched::test::promise_waiter waiter(io);
    waiter.wait_on(promise);
    manual_clock::advance(1s);
    run_to_end();
    BOOST_TEST(waiter.ran_on_io_with(error_code())); // success, on the io_context
    BOOST_TEST(pool.queue().size() == 0u);           // the timeout went with the operation
}

// A chain of deferred operations takes cancel_after as its token (the chain first tries the
// initiation as a const object: its body must not be compiled for that), and the timeout bounds
// the whole chain. The chain's second wait is `second` long; the first has run.
BOOST_FIXTURE_TEST_CASE(a_chain_of_deferred_operations_takes_it, cancel_after_fixture)
{
    launch_two_waits(1s);
    manual_clock::advance(1s);
    run_to_end();
    BOOST_TEST((result && !*result));
    BOOST_TEST(completions == 1);
    BOOST_TEST(pool.queue().size() == 0u); // the timeout went with the chain
}

BOOST_FIXTURE_TEST_CASE(a_chain_of_deferred_operations_is_bounded_as_a_whole, cancel_after_fixture)
{
    launch_two_waits(1h);
    manual_clock::advance(9s); // the timeout is due, 10 s after the chain began
    settle(pool);
    run_to_end(); // the emission cancels the second wait
    BOOST_TEST((result && *result == boost::asio::error::operation_aborted));
    BOOST_TEST(completions == 1);
    BOOST_TEST(pool.queue().size() == 0u);
}

// redirect_error takes cancel_after as its inner token (it asks the inner token's return type).
BOOST_FIXTURE_TEST_CASE(redirect_error_takes_it_as_its_inner_token, cancel_after_fixture)
{
    error_code redirected;
    bool ran = false;
    scheduler.async_wait(
        1h, boost::asio::redirect_error(sched::cancel_after(scheduler, 1s, [&] { ran = true; }),
                                        redirected));
    manual_clock::advance(1s);
    settle(pool);
    run_to_end();
    BOOST_TEST(ran);
    BOOST_TEST((redirected == boost::asio::error::operation_aborted));
}

// The handler the operation gets says what the caller's handler says of continuing its chain
// (Asio schedules a continuation's completion more cheaply).
BOOST_FIXTURE_TEST_CASE(the_wrapped_handler_passes_on_the_continuation_hint, cancel_after_fixture)
{
    std::optional<boost::asio::any_completion_handler<void(error_code)>> parked;
    bool continuing = false;
    auto token = sched::cancel_after(scheduler, 1h, continuing_handler{});
    boost::asio::async_initiate<decltype(token), void(error_code)>(
        [&](auto handler) {
            continuing = boost_asio_handler_cont_helpers::is_continuation(handler);
            parked.emplace(std::move(handler));
        },
        token);
    BOOST_TEST(continuing);
    BOOST_TEST_REQUIRE(parked.has_value());
    std::move (*parked)(error_code());
    BOOST_TEST(pool.queue().size() == 0u);
}

// An operation may ask the handler it moved from for its slot (a composed operation that has
// handed the handler on): it gets an unconnected one.
BOOST_FIXTURE_TEST_CASE(a_moved_from_wrapped_handler_has_no_slot, cancel_after_fixture)
{
    std::optional<boost::asio::any_completion_handler<void(error_code)>> parked;
    bool moved_from_connected = true;
    auto token = sched::cancel_after(scheduler, 1h, on_done());
    boost::asio::async_initiate<decltype(token), void(error_code)>(
        [&](auto handler) {
            BOOST_TEST(boost::asio::get_associated_cancellation_slot(handler).is_connected());
            parked.emplace(std::move(handler));
            moved_from_connected =
                boost::asio::get_associated_cancellation_slot(handler).is_connected();
        },
        token);
    BOOST_TEST(!moved_from_connected);
    BOOST_TEST_REQUIRE(parked.has_value());
    std::move (*parked)(error_code());
    BOOST_TEST(completions == 1);
    BOOST_TEST(pool.queue().size() == 0u);
}

// A deadline is an I/O object: the emission goes to its executor (here another io_context's),
// not to the scheduler's.
BOOST_FIXTURE_TEST_CASE(a_deadlines_wait_has_its_timeout_emitted_on_the_deadlines_executor,
                        cancel_after_fixture)
{
    boost::asio::io_context other;
    sched::basic_deadline<manual_clock> deadline(other.get_executor(), pool);
    deadline.expires_after(1h);
    deadline.async_wait(sched::cancel_after(scheduler, 1s, on_done()));
    manual_clock::advance(1s);
    settle(pool);
    run_ready(); // the scheduler's io_context: the emission is not posted there
    BOOST_TEST(deadline.armed());
    BOOST_TEST(other.run_one_for(1min) == 1u); // the emission: it cancels the wait
    BOOST_TEST(!deadline.armed());
    BOOST_TEST(other.run_one_for(1min) == 1u); // the wait's completion, on its own executor
    BOOST_TEST((result && *result == boost::asio::error::operation_aborted));
    BOOST_TEST(completions == 1);
}

BOOST_FIXTURE_TEST_CASE(a_periodic_operation_refuses_a_total_timeout_once_it_has_ticked,
                        cancel_after_fixture)
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

// Asio reuses a slot for an agent's next operation: one started on it once the wrapped
// operation has completed, before the wrapped handler runs, keeps it (the handler clearing the
// slot as it ran dropped the next operation's cancellation: a review's probe).
BOOST_FIXTURE_TEST_CASE(a_slot_reused_before_the_handler_runs_is_left_to_the_next_operation,
                        cancel_after_fixture)
{
    boost::asio::cancellation_signal signal;
    scheduler.async_wait(
        10s, sched::cancel_after(scheduler, 1h,
                                 boost::asio::bind_cancellation_slot(signal.slot(), on_done())));
    signal.emit(boost::asio::cancellation_type::terminal); // its completion is queued
    std::optional<error_code> next;
    scheduler.async_wait(10s, boost::asio::bind_cancellation_slot(
                                  signal.slot(), [&next](error_code ec) { next = ec; }));
    complete_one(); // the first handler
    BOOST_TEST((result && *result == boost::asio::error::operation_aborted));
    BOOST_TEST(signal.slot().has_handler()); // the next operation's
    signal.emit(boost::asio::cancellation_type::terminal);
    complete_one();
    BOOST_TEST((next && *next == boost::asio::error::operation_aborted));
}

// Nor is a slot touched whose signal is gone by the time the handler runs (its connection torn
// down meanwhile): clearing it read freed memory (the ASan build catches it).
BOOST_FIXTURE_TEST_CASE(a_slot_whose_signal_went_before_the_handler_runs_is_not_touched,
                        cancel_after_fixture)
{
    auto signal = std::make_unique<boost::asio::cancellation_signal>();
    scheduler.async_wait(
        10s, sched::cancel_after(scheduler, 1h,
                                 boost::asio::bind_cancellation_slot(signal->slot(), on_done())));
    signal->emit(boost::asio::cancellation_type::terminal);
    signal.reset();
    complete_one();
    BOOST_TEST((result && *result == boost::asio::error::operation_aborted));
    BOOST_TEST(pool.queue().size() == 0u);
}

// An operation whose cancellation handler completes it at once, right there (dispatch: the
// emission runs on the handler's executor), as a composed operation may.
BOOST_FIXTURE_TEST_CASE(an_operation_that_completes_inside_the_emission_ends_once,
                        cancel_after_fixture,
                        *boost::unit_test::timeout(60))
{
    auto until_cancelled = [&](auto handler) {
        using handler_type = decltype(handler);
        auto slot = boost::asio::get_associated_cancellation_slot(handler);
        BOOST_TEST_REQUIRE(slot.is_connected());
        slot.assign([this, h = std::optional<handler_type>(std::move(handler))](
                        boost::asio::cancellation_type) mutable {
            handler_type taken = std::move(*h);
            h.reset();
            const auto ex = boost::asio::get_associated_executor(taken, io.get_executor());
            boost::asio::dispatch(ex, [taken = std::move(taken)]() mutable {
                std::move(taken)(error_code(boost::asio::error::operation_aborted));
            });
        });
    };
    auto token = sched::cancel_after(scheduler, 1s, on_done());
    boost::asio::async_initiate<decltype(token), void(error_code)>(until_cancelled, token);
    manual_clock::advance(1s);
    settle(pool);
    complete_one(); // the emission, and inside it the operation's completion (it deadlocked)
    BOOST_TEST((result && *result == boost::asio::error::operation_aborted));
    BOOST_TEST(pool.queue().size() == 0u);
    run_to_end(); // a second completion, if any, would run here
    BOOST_TEST(completions == 1);
}

// A pool that is shut down cannot time the operation: rather than let it go on unbounded, the
// timeout cancels it at once.
BOOST_FIXTURE_TEST_CASE(on_a_shut_down_pool_the_operation_is_cancelled_at_once,
                        cancel_after_fixture)
{
    std::optional<boost::asio::any_completion_handler<void(error_code)>> parked;
    std::optional<boost::asio::cancellation_type> cancelled;
    std::optional<std::thread::id> cancelled_on;
    pool.shutdown();
    auto token = sched::cancel_after(scheduler, 1h, on_done());
    boost::asio::async_initiate<decltype(token), void(error_code)>(
        parking_operation{io.get_executor(), &parked, &cancelled, &cancelled_on}, token);
    BOOST_TEST(!cancelled); // not inside the initiating function
    BOOST_TEST(run_ready() == 1u);
    BOOST_TEST((cancelled == boost::asio::cancellation_type::terminal));
    BOOST_TEST_REQUIRE(parked.has_value());
    std::move (*parked)(error_code(boost::asio::error::operation_aborted));
    BOOST_TEST((result && *result == boost::asio::error::operation_aborted));
}

// The timeout may be released last on a worker, after the handler has run and the user has
// destroyed the handler's execution context: it let go of the handler's executor (a strand of
// that context, which touches it as it goes) as the operation completed. AddressSanitizer saw
// the use after free.
BOOST_AUTO_TEST_CASE(a_timeout_released_after_its_handlers_context_is_gone_touches_nothing_of_it,
                     *boost::unit_test::timeout(60))
{
    sched::test::manual_clock_fixture time;
    std::promise<void> go_on;
    std::shared_future<void> may_go_on = go_on.get_future().share();
    sched::pool_options options = sched::test::pool_fixture::single_worker();
    options.after_execute = [may_go_on](std::exception_ptr) {
        may_go_on.wait();
    };
    sched::test::manual_pool pool(options);
    boost::asio::io_context io;
    sched::test::manual_scheduler scheduler(io, pool);
    auto handlers_io = std::make_unique<boost::asio::io_context>();
    std::optional strand(boost::asio::make_strand(*handlers_io));
    std::optional<boost::asio::any_completion_handler<void(error_code)>> parked;
    auto park = [&](auto handler) {
        parked.emplace(std::move(handler));
    };
    std::optional<error_code> result;
    {
        auto token = sched::cancel_after( // it holds a copy of the strand: it goes first
            scheduler, 1s,
            boost::asio::bind_executor(*strand, [&](error_code ec) { result = ec; }));
        boost::asio::async_initiate<decltype(token), void(error_code)>(park, token);
    }
    // Due: the worker posts the emission to the operation's executor (the scheduler's io_context,
    // which does not run here), then waits in after_execute with the queue's reference to the
    // timeout.
    manual_clock::advance(1s);
    BOOST_TEST_REQUIRE(sched::test::eventually([&] { return pool.queue().size() == 0u; }));
    // The operation completes first; then its user lets go of the strand and the context.
    BOOST_TEST_REQUIRE(parked.has_value());
    std::move (*parked)(error_code());
    BOOST_TEST((result == error_code()));
    parked.reset();
    strand.reset();
    handlers_io.reset();
    go_on.set_value(); // the worker lets go of the last reference
    sched::test::pool_fixture::settle(pool);
}

// A strand of `context`'s whose execute() stops once, when armed, until `go`: a dispatch into it
// held up at the point where it touches the strand.
struct gate_executor
{
    boost::asio::strand<boost::asio::io_context::executor_type> inner;
    std::atomic<bool>* armed;
    std::promise<void>* entered;
    const std::shared_future<void>* go; // a pointer: an executor's copy must not throw

    boost::asio::execution_context& query(boost::asio::execution::context_t) const noexcept
    {
        return inner.context();
    }
    static constexpr auto query(boost::asio::execution::blocking_t) noexcept
    {
        return boost::asio::execution::blocking.possibly;
    }
    template <class F>
    void execute(F&& f) const
    {
        if (armed->exchange(false))
        {
            entered->set_value();
            go->wait();
        }
        boost::asio::execution::execute(inner, std::forward<F>(f));
    }
    friend bool operator==(const gate_executor& a, const gate_executor& b) noexcept
    {
        return a.inner == b.inner;
    }
    friend bool operator!=(const gate_executor& a, const gate_executor& b) noexcept
    {
        return !(a == b);
    }
};

// The emission enters the handler's executor (a strand of another io_context) from the
// operation's: the operation, completing meanwhile on another thread, waits for that to end, so
// its user may then destroy that context. Before, the emission entered through a copy of the
// executor taken before unlocking, and the completion did not wait: the copy then touched the
// strand's freed service (a review's ASan probe).
BOOST_AUTO_TEST_CASE(an_operation_completing_while_its_emission_enters_the_handlers_strand_waits,
                     *boost::unit_test::timeout(60))
{
    sched::test::manual_clock_fixture time;
    sched::test::manual_pool pool(sched::test::pool_fixture::single_worker());
    boost::asio::io_context io; // the operation's executor: the scheduler's
    sched::test::manual_scheduler scheduler(io, pool);
    auto handlers_io = std::make_unique<boost::asio::io_context>();
    std::atomic<bool> armed{false};
    std::promise<void> entered;
    std::promise<void> go;
    const std::shared_future<void> may_go = go.get_future().share();
    std::optional<gate_executor> gate(
        gate_executor{boost::asio::make_strand(*handlers_io), &armed, &entered, &may_go});
    std::optional<boost::asio::any_completion_handler<void(error_code)>> parked;
    auto park = [&](auto handler) {
        parked.emplace(std::move(handler));
    };
    std::optional<error_code> result;
    {
        auto token = sched::cancel_after(
            scheduler, 1s, boost::asio::bind_executor(*gate, [&](error_code ec) { result = ec; }));
        boost::asio::async_initiate<decltype(token), void(error_code)>(park, token);
    }
    armed = true;
    manual_clock::advance(1s);
    sched::test::pool_fixture::settle(pool); // the emission is posted to io
    std::thread io_thread([&] { io.run_one_for(std::chrono::minutes(1)); });
    entered.get_future().wait(); // the emission is entering the gate
    BOOST_TEST_REQUIRE(parked.has_value());
    std::atomic<bool> completed{false};
    std::thread completer([&] {
        std::move (*parked)(error_code());
        completed = true;
    });
    const bool completed_meanwhile = sched::test::within(100ms, [&] { return completed.load(); });
    go.set_value();
    completer.join();
    io_thread.join();
    BOOST_TEST(!completed_meanwhile);
    BOOST_TEST((result == error_code()));
    parked.reset();
    gate.reset();
    handlers_io.reset(); // the emission, queued on the strand, goes unrun
}

// The timeout's memory is the recycler's whatever the handler's allocator (the pool's queue may
// hold the timeout after the handler has run, and Asio frees the handler's allocator's memory
// before). The operation bounded here keeps its handler in an any_completion_handler, whose
// memory is not the recycler's.
BOOST_TEST_DECORATOR(*boost::unit_test::precondition(sched::test::recycling))
BOOST_FIXTURE_TEST_CASE(a_timeout_for_a_use_future_caller_takes_its_memory_from_the_recycler,
                        cancel_after_fixture)
{
    // Emplaced: Boost 1.81's any_completion_handler cannot be assigned to (it wraps itself).
    std::optional<boost::asio::any_completion_handler<void(error_code)>> parked;
    auto park = [&](auto handler) {
        parked.emplace(std::move(handler));
    };
    const sched::test::recycler_probe probe;
    auto token = sched::cancel_after(scheduler, 1h, boost::asio::use_future);
    std::future<void> done =
        boost::asio::async_initiate<decltype(token), void(error_code)>(park, token);
    BOOST_TEST(probe.taken() > 0u);
    BOOST_TEST(pool.queue().size() == 1u); // the timeout
    std::move (*parked)(error_code());
    BOOST_REQUIRE_NO_THROW(done.get());
    BOOST_TEST(pool.queue().size() == 0u);
    run_to_end();
}

// use_future's handler names its own executor (the system executor, for a handler that may run
// anywhere): the emission still reaches the operation on its own executor, where the operation's
// steps run, and enters the handler's from there. Before, it was posted to the handler's
// executor, and ran on a thread of Asio's system context beside the operation's own steps on the
// io_context (a helper's TSan probe with async_read saw the races).
BOOST_FIXTURE_TEST_CASE(a_use_future_callers_operation_is_cancelled_on_its_own_executor,
                        cancel_after_fixture)
{
    std::optional<boost::asio::any_completion_handler<void(error_code)>> parked;
    std::optional<boost::asio::cancellation_type> cancelled_as;
    std::optional<std::thread::id> cancelled_on;
    auto token = sched::cancel_after(scheduler, 1s, boost::asio::use_future);
    std::future<void> done = boost::asio::async_initiate<decltype(token), void(error_code)>(
        parking_operation{io.get_executor(), &parked, &cancelled_as, &cancelled_on}, token);
    manual_clock::advance(1s);
    settle(pool);
    BOOST_TEST(run_ready() > 0u); // the emission, on this thread, which runs the io_context
    BOOST_TEST((cancelled_on == std::this_thread::get_id()));
    BOOST_TEST_REQUIRE(parked.has_value());
    std::move (*parked)(error_code(boost::asio::error::operation_aborted));
    BOOST_TEST((done.wait_for(0s) == std::future_status::ready));
    BOOST_CHECK_THROW(done.get(), boost::system::system_error);
}

// The same with a handler that names an allocator of its own: the timeout takes none of it.
BOOST_FIXTURE_TEST_CASE(a_timeout_takes_no_memory_from_the_handlers_allocator, cancel_after_fixture)
{
    std::optional<boost::asio::any_completion_handler<void(error_code)>> parked;
    auto park = [&](auto handler) {
        parked.emplace(std::move(handler));
    };
    sched::test::allocation_log unbounded;
    auto plain =
        boost::asio::bind_allocator(sched::test::counting_allocator<void>(unbounded), on_done());
    boost::asio::async_initiate<decltype(plain), void(error_code)>(park, plain);
    parked.reset();
    sched::test::allocation_log bounded;
    auto token = sched::cancel_after(
        scheduler, 1h,
        boost::asio::bind_allocator(sched::test::counting_allocator<void>(bounded), on_done()));
    boost::asio::async_initiate<decltype(token), void(error_code)>(park, token);
    BOOST_TEST(pool.queue().size() == 1u);   // the timeout
    BOOST_TEST(unbounded.allocations() > 0); // any_completion_handler's own
    BOOST_TEST(bounded.allocations() == unbounded.allocations());
    std::move (*parked)(error_code());
    BOOST_TEST((result && !*result));
    BOOST_TEST(pool.queue().size() == 0u);
}

// Queueing the timeout comes after the operation has started: if there is no memory for it, the
// initiating function cannot throw (the handler would be invoked all the same), and the operation
// goes on without its timeout.
BOOST_AUTO_TEST_CASE(out_of_memory_for_its_timeout_a_started_operation_goes_on_without_it)
{
    sched::test::manual_clock_fixture time;
    sched::pool_options options = sched::test::pool_fixture::single_worker();
    options.far_tier_horizon = 0s; // one heap, filled to its capacity below
    sched::test::manual_pool pool(options);
    boost::asio::io_context io;
    sched::test::manual_scheduler scheduler(io, pool);
    std::vector<sched::test::manual_future<void>> fillers;
    for (bool full = false; !full && fillers.size() < 100'000;)
    {
        sched::test::fail_next_aligned_allocation(); // the heap's growth, and nothing else
        try
        {
            fillers.push_back(pool.schedule(1h, [] {}));
        }
        catch (const std::bad_alloc&)
        {
            full = true;
        }
    }
    BOOST_TEST_REQUIRE(sched::test::aligned_allocation_failure_armed() == false);
    std::optional<boost::asio::any_completion_handler<void(error_code)>> parked;
    bool listening = false;
    bool cancelled = false;
    auto park = [&](auto handler) {         // listens for cancellation, as an operation does
        parked.emplace(std::move(handler)); // it installs its own in the slot, then forwards
        auto slot = parked->get_cancellation_slot();
        listening = slot.is_connected();
        if (listening)
            slot.assign([&](boost::asio::cancellation_type) { cancelled = true; });
    };
    int calls = 0;
    std::optional<error_code> result;
    auto token = sched::cancel_after(scheduler, 1s, [&](error_code ec) {
        ++calls;
        result = ec;
    });
    sched::test::fail_next_aligned_allocation(); // the timeout's push
    BOOST_REQUIRE_NO_THROW(
        (boost::asio::async_initiate<decltype(token), void(error_code)>(park, token)));
    BOOST_TEST(!sched::test::aligned_allocation_failure_armed()); // it was that push that failed
    sched::test::fail_next_aligned_allocation(false);
    BOOST_TEST(pool.queue().size() == fillers.size()); // no timeout queued
    manual_clock::advance(2s);
    sched::test::pool_fixture::settle(pool);
    io.poll();
    BOOST_TEST(listening);
    BOOST_TEST(!cancelled); // no timeout fell
    BOOST_TEST(calls == 0);
    BOOST_TEST_REQUIRE(parked.has_value());
    std::move (*parked)(error_code());
    BOOST_TEST(calls == 1);
    BOOST_TEST((result == error_code()));
}

// A handler whose move throws as the timeout is wrapped around it: the initiation throws, and the
// timeout lets go of everything, the work its handler's executor tracks with it. Before, the
// reference made for the wrapping handler was never taken, so the timeout and a tracked executor
// stayed: the handler's io_context never ran out of work (a review's probe).
BOOST_FIXTURE_TEST_CASE(a_handler_whose_move_throws_leaves_no_timeout_behind, cancel_after_fixture)
{
    struct throwing_move
    {
        using executor_type = boost::asio::any_io_executor;
        executor_type executor;
        const bool* throws;

        throwing_move(executor_type ex, const bool* t) : executor(std::move(ex)), throws(t) {}
        throwing_move(throwing_move&& other) noexcept(false)
            : executor(other.executor), throws(other.throws)
        {
            if (*throws)
                throw sched::test::custom_error();
        }
        executor_type get_executor() const noexcept { return executor; }
        void operator()(error_code) {}
    };
    boost::asio::io_context handlers_io;
    bool throws = false;
    {
        auto token = sched::cancel_after(
            scheduler, 1h,
            throwing_move(boost::asio::require(handlers_io.get_executor(),
                                               boost::asio::execution::outstanding_work.tracked),
                          &throws));
        throws = true;
        BOOST_CHECK_THROW(scheduler.async_wait(10s, std::move(token)), sched::test::custom_error);
        throws = false;
    }
    BOOST_TEST(pool.queue().size() == 0u); // neither the wait nor its timeout
    handlers_io.poll();
    BOOST_TEST(handlers_io.stopped()); // out of work: nothing holds the handler's executor
}

// An operation that completes inside its cancellation handler, through its handler's strand,
// whose handler throws: the exception leaves the io_context's run(), as any Asio handler's does.
// Before, it met the emission's noexcept and ended the program (a review's probe).
BOOST_FIXTURE_TEST_CASE(a_handler_that_throws_inside_the_emission_leaves_run, cancel_after_fixture)
{
    auto complete_when_cancelled = [this](auto handler) {
        using handler_type = decltype(handler);
        auto slot = boost::asio::get_associated_cancellation_slot(handler);
        auto parked = std::make_shared<std::optional<handler_type>>(std::move(handler));
        slot.assign([parked, ex = io.get_executor()](boost::asio::cancellation_type) {
            handler_type h = std::move(**parked);
            parked->reset();
            const auto handlers_ex = boost::asio::get_associated_executor(h, ex);
            boost::asio::dispatch(handlers_ex, [h = std::move(h)]() mutable {
                std::move(h)(boost::asio::error::operation_aborted);
            });
        });
    };
    int runs = 0;
    auto token = sched::cancel_after(
        scheduler, 1s,
        boost::asio::bind_executor(boost::asio::make_strand(io), [&runs](error_code) {
            ++runs;
            throw sched::test::custom_error();
        }));
    boost::asio::async_initiate<decltype(token), void(error_code)>(complete_when_cancelled, token);
    manual_clock::advance(1s);
    settle(pool); // the emission is posted to io
    BOOST_CHECK_THROW(complete_one(), sched::test::custom_error);
    BOOST_TEST(runs == 1);
}

// The token, and a lazy operation it starts, keep a copy of the scheduler given, not its
// address: a deferred operation launched after that scheduler object has gone (its storage now
// another scheduler's, of another pool) is timed by the first one's pool. Before, the initiation
// read the object at its old address (a review's probe: use after free).
BOOST_FIXTURE_TEST_CASE(a_lazy_operation_keeps_a_copy_of_the_scheduler, cancel_after_fixture)
{
    sched::test::manual_pool other_pool(single_worker());
    std::optional<sched::test::manual_scheduler> given(std::in_place, io, pool);
    auto wait = scheduler.async_wait(10s, sched::cancel_after(*given, 1s, boost::asio::deferred));
    given.emplace(io, other_pool); // the same storage, another scheduler
    std::move(wait)(on_done());
    BOOST_TEST(pool.queue().size() == 2u); // the wait and its timeout
    BOOST_TEST(other_pool.queue().size() == 0u);
    expect_cancelled_at(at(1s));
}

BOOST_AUTO_TEST_SUITE_END()
