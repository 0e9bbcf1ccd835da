// scheduler: what shutdown() and shutdown_now() do to pending asynchronous operations, by policy.

#include <sched/cancel_after.hpp>
#include <sched/deadline.hpp>
#include <sched/error.hpp>
#include <sched/scheduler.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstddef>
#include <exception>
#include <future>
#include <optional>
#include <thread>
#include <utility>

#include "support/counter.hpp"
#include "support/io_fixture.hpp"
#include "support/pool_fixture.hpp"
#include "support/wait.hpp"

using namespace std::chrono_literals;
using boost::asio::cancellation_type;
using sched::manual_clock;
using sched::test::code_in;
using sched::test::counter;
using sched::test::eventually;
using sched::test::manual_pool;
using sched::test::manual_scheduler;
using sched::test::pool_fixture;

// Named, not anonymous: the data test cases are templates, whose lambdas may not capture types of
// an anonymous namespace (GCC's -Wsubobject-linkage).
namespace scheduler_shutdown {

using error_code = boost::system::error_code;
using manual_deadline = sched::basic_deadline<manual_clock>;
namespace data = boost::unit_test::data;

const error_code shut_down = make_error_code(sched::error::shutdown);
const error_code aborted = boost::asio::error::operation_aborted;

bool is(const std::optional<error_code>& result, const error_code& expected)
{
    return result && *result == expected;
}

sched::pool_options policies(bool continue_periodic, bool execute_delayed)
{
    sched::pool_options options = pool_fixture::single_worker();
    options.continue_existing_periodic_tasks_after_shutdown = continue_periodic;
    options.execute_existing_delayed_tasks_after_shutdown = execute_delayed;
    return options;
}

// An io_context, a one-worker pool on the manual clock, and a scheduler and a deadline on them
// (destroyed in reverse order: the pool before the io_context).
struct rig
{
    explicit rig(sched::pool_options options) : pool(std::move(options)) {}

    boost::asio::io_context io;
    manual_pool pool;
    manual_scheduler scheduler{io, pool};
    manual_deadline deadline{scheduler};

    // Runs the io_context's handlers until `done()` holds; false after a minute without.
    template <class Condition>
    bool run_until(Condition done)
    {
        const auto give_up = std::chrono::steady_clock::now() + 1min;
        while (!done())
        {
            if (std::chrono::steady_clock::now() > give_up)
                return false;
            io.restart(); // it stops whenever it runs out of work
            if (io.run_one_for(10ms) == 0)
                std::this_thread::yield();
        }
        return true;
    }

    // Runs the handlers that are ready, without blocking; returns how many ran.
    std::size_t run_ready()
    {
        io.restart();
        return io.poll();
    }

    // Returns once the worker has run everything due by now, also after shutdown() (when
    // pool.submit() is refused): a function given to the pool's executor runs after the tasks
    // due before it, or, once the pool has run out of work, is destroyed unrun at once.
    void settle()
    {
        std::promise<void> promise;
        std::future<void> ran = promise.get_future();
        boost::asio::post(pool.get_executor(),
                          [promise = std::move(promise)]() mutable { promise.set_value(); });
        BOOST_TEST_REQUIRE((ran.wait_for(1min) == std::future_status::ready));
    }

    // Runs the io_context until it is out of work; a minute with work left fails the test.
    void run_to_end()
    {
        io.restart();
        io.run_for(1min);
        BOOST_TEST_REQUIRE(io.stopped());
    }
};

// One pending operation of each kind, all started at 0 s: a wait and a one-shot work due at 10 s,
// a fixed-rate and a fixed-delay operation first due at 5 s and every 5 s after, and a deadline
// armed for 10 s. Its handlers run on the test's thread (the io_context's).
struct operations
{
    std::optional<error_code> wait;
    std::optional<std::exception_ptr> work; // engaged once the work's operation completed
    int value = 0;
    counter work_runs;
    counter rate_ticks;
    counter delay_ticks;
    std::optional<std::size_t> rate_end; // ticks run, once the operation ended
    std::optional<std::size_t> delay_end;
    std::exception_ptr rate_why;
    std::exception_ptr delay_why;
    std::optional<error_code> deadline;
    boost::asio::cancellation_signal rate_signal;
    int completions = 0;

    void start(rig& r)
    {
        r.scheduler.async_wait(10s, [this](error_code ec) {
            wait = ec;
            ++completions;
        });
        r.scheduler.async_schedule(
            10s,
            [this] {
                work_runs.increment();
                return 7;
            },
            [this](std::exception_ptr e, int v) {
                work = e;
                value = v;
                ++completions;
            });
        r.scheduler.async_schedule_at_fixed_rate(
            5s, 5s, [this] { rate_ticks.increment(); },
            boost::asio::bind_cancellation_slot(rate_signal.slot(),
                                                [this](std::exception_ptr e, std::size_t n) {
                                                    rate_why = e;
                                                    rate_end = n;
                                                    ++completions;
                                                }));
        r.scheduler.async_schedule_with_fixed_delay(
            5s, 5s, [this] { delay_ticks.increment(); },
            [this](std::exception_ptr e, std::size_t n) {
                delay_why = e;
                delay_end = n;
                ++completions;
            });
        r.deadline.expires_after(10s);
        r.deadline.async_wait([this](error_code ec) {
            deadline = ec;
            ++completions;
        });
    }

    // Moves the clock to 5 s: each periodic operation ticks once and is queued again.
    void tick_once(rig& r)
    {
        manual_clock::advance(5s);
        BOOST_TEST_REQUIRE(rate_ticks.wait_for_at_least(1));
        BOOST_TEST_REQUIRE(delay_ticks.wait_for_at_least(1));
        BOOST_TEST_REQUIRE(eventually([&] { return r.pool.queue().size() == 5u; }));
    }

    // How many of the one-shot operations (wait, work, deadline) have completed.
    int one_shots_done() const
    {
        return int(wait.has_value()) + int(work.has_value()) + int(deadline.has_value());
    }

    // How many of the periodic operations have ended.
    int periodics_done() const { return int(rate_end.has_value()) + int(delay_end.has_value()); }
};

// An operation that only listens for cancellation, as a socket read does, and completes when the
// test says: what a timeout does to it shows alone, without the scheduler's own shutdown rules.
struct parked_operation
{
    std::optional<boost::asio::any_completion_handler<void(error_code)>> handler;
    std::optional<cancellation_type> cancelled;
    std::optional<error_code> result;
    int completions = 0;

    // Starts it, bounded by `bounded(token)` (cancel_after or cancel_at around the token).
    template <class Bound>
    void start(Bound bounded)
    {
        auto on_done = [this](error_code ec) {
            result = ec;
            ++completions;
        };
        auto token = bounded(on_done);
        boost::asio::async_initiate<decltype(token), void(error_code)>(
            [this](auto h) {
                handler.emplace(std::move(h));
                auto slot = handler->get_cancellation_slot();
                BOOST_TEST_REQUIRE(slot.is_connected());
                slot.assign([this](cancellation_type type) { cancelled = type; });
            },
            token);
    }

    // Completes it with `ec`, as the operation itself would.
    void complete(error_code ec)
    {
        BOOST_TEST_REQUIRE(handler.has_value());
        handler->get_cancellation_slot().clear();
        auto h = std::move(*handler);
        handler.reset();
        std::move(h)(ec);
    }
};

} // namespace scheduler_shutdown

using namespace scheduler_shutdown;

BOOST_AUTO_TEST_SUITE(test_scheduler)

// The policy matrix, {continue periodic} x {execute delayed}, as the pool's own: what a policy
// drops completes with the shutdown error at once; what it keeps completes, runs or ticks when
// due. An implementation that ended every operation at shutdown(), or kept every one, or applied
// one policy to the other's operations, fails a row.
BOOST_DATA_TEST_CASE_F(pool_fixture,
                       shutdown_ends_or_keeps_each_pending_operation_as_the_policies_say,
                       data::make({false, true}) * data::make({false, true}),
                       continue_periodic,
                       execute_delayed)
{
    operations ops; // outlives the pool, which may still tick or complete into it
    rig r(policies(continue_periodic, execute_delayed));
    ops.start(r);
    ops.tick_once(r);

    r.pool.shutdown();
    // What the policies drop completes at once, with the clock still at 5 s.
    BOOST_TEST_REQUIRE(r.run_until([&] {
        return ops.one_shots_done() == (execute_delayed ? 0 : 3) &&
               ops.periodics_done() == (continue_periodic ? 0 : 2);
    }));
    r.settle();
    r.run_ready();
    BOOST_TEST(ops.one_shots_done() == (execute_delayed ? 0 : 3)); // the kept ones wait
    BOOST_TEST(ops.periodics_done() == (continue_periodic ? 0 : 2));
    BOOST_TEST(r.pool.queue().size() ==
               (execute_delayed ? 3u : 0u) + (continue_periodic ? 2u : 0u));
    BOOST_TEST(r.deadline.armed() == execute_delayed);
    if (!execute_delayed)
    {
        BOOST_TEST(is(ops.wait, shut_down));
        BOOST_TEST_REQUIRE(ops.work.has_value());
        BOOST_TEST(code_in(*ops.work) == shut_down);
        BOOST_TEST(is(ops.deadline, shut_down));
        BOOST_TEST(!r.deadline.expires_after(1s)); // nothing armed to move
    }
    if (!continue_periodic)
    {
        BOOST_TEST(code_in(ops.rate_why) == shut_down);
        BOOST_TEST(code_in(ops.delay_why) == shut_down);
        BOOST_TEST(ops.rate_end.value_or(0) == 1u);
        BOOST_TEST(ops.delay_end.value_or(0) == 1u);
    }

    // Not before they are due.
    manual_clock::advance_to(at(10s) - 1ms);
    r.settle();
    r.run_ready();
    BOOST_TEST(ops.one_shots_done() == (execute_delayed ? 0 : 3));
    BOOST_TEST(ops.work_runs.value() == 0);
    BOOST_TEST(ops.rate_ticks.value() == 1);
    BOOST_TEST(ops.delay_ticks.value() == 1);

    // When due: the kept one-shot operations run or complete with success.
    manual_clock::advance_to(at(10s));
    if (execute_delayed)
    {
        BOOST_TEST_REQUIRE(r.run_until([&] { return ops.one_shots_done() == 3; }));
        BOOST_TEST(is(ops.wait, error_code()));
        BOOST_TEST_REQUIRE(ops.work.has_value());
        BOOST_TEST(!*ops.work);
        BOOST_TEST(ops.value == 7);
        BOOST_TEST(is(ops.deadline, error_code()));
    }

    // The kept periodic operations tick on, every 5 s; the dropped ones never again.
    for (int k = 2; k <= 4; ++k)
    {
        if (k > 2)
            manual_clock::advance_to(at(k * 5s));
        if (continue_periodic)
        {
            BOOST_TEST_REQUIRE(ops.rate_ticks.wait_for_at_least(k));
            BOOST_TEST_REQUIRE(ops.delay_ticks.wait_for_at_least(k));
            BOOST_TEST_REQUIRE(eventually([&] { return r.pool.queue().size() == 2u; }));
        }
        r.settle();
        r.run_ready();
        BOOST_TEST(ops.rate_ticks.value() == (continue_periodic ? k : 1));
        BOOST_TEST(ops.delay_ticks.value() == (continue_periodic ? k : 1));
        BOOST_TEST(ops.periodics_done() == (continue_periodic ? 0 : 2));
    }
    BOOST_TEST(ops.work_runs.value() == (execute_delayed ? 1 : 0));

    if (continue_periodic)
    {
        // A periodic operation that survived shutdown() keeps the pool alive until it ends as
        // any does: cancelled (operation_aborted), or by shutdown_now() (the shutdown error).
        BOOST_TEST(!r.pool.is_terminated());
        ops.rate_signal.emit(cancellation_type::terminal);
        BOOST_TEST_REQUIRE(r.run_until([&] { return ops.rate_end.has_value(); }));
        BOOST_TEST(code_in(ops.rate_why) == aborted);
        BOOST_TEST(*ops.rate_end == 4u);
        BOOST_TEST(r.pool.shutdown_now().empty());
        BOOST_TEST_REQUIRE(r.run_until([&] { return ops.delay_end.has_value(); }));
        BOOST_TEST(code_in(ops.delay_why) == shut_down);
        BOOST_TEST(*ops.delay_end == 4u);
    }
    BOOST_TEST_REQUIRE(r.pool.await_termination(60s));
    r.run_to_end();
    BOOST_TEST(ops.completions == 5); // each handler exactly once
}

// shutdown_now() ignores the after-shutdown policies: an implementation that applied them (as
// shutdown() does) would let a row's kept operations run or tick on.
BOOST_DATA_TEST_CASE_F(
    pool_fixture,
    shutdown_now_ends_every_pending_operation_with_the_shutdown_error_whatever_the_policies,
    data::make({false, true}) * data::make({false, true}),
    continue_periodic,
    execute_delayed)
{
    operations ops;
    rig r(policies(continue_periodic, execute_delayed));
    ops.start(r);
    ops.tick_once(r);

    BOOST_TEST(r.pool.shutdown_now().empty()); // none handed back: their handlers are told
    BOOST_TEST(r.pool.queue().empty());
    BOOST_TEST(!r.deadline.armed());
    BOOST_TEST_REQUIRE(r.run_until([&] { return ops.completions == 5; })); // clock still at 5 s
    BOOST_TEST(is(ops.wait, shut_down));
    BOOST_TEST_REQUIRE(ops.work.has_value());
    BOOST_TEST(code_in(*ops.work) == shut_down);
    BOOST_TEST(is(ops.deadline, shut_down));
    BOOST_TEST(code_in(ops.rate_why) == shut_down);
    BOOST_TEST(code_in(ops.delay_why) == shut_down);
    BOOST_TEST(ops.rate_end.value_or(0) == 1u);
    BOOST_TEST(ops.delay_end.value_or(0) == 1u);

    // Nothing runs afterwards, however far the clock goes.
    BOOST_TEST_REQUIRE(r.pool.await_termination(60s));
    manual_clock::advance(1h);
    r.run_to_end();
    BOOST_TEST(ops.work_runs.value() == 0);
    BOOST_TEST(ops.rate_ticks.value() == 1);
    BOOST_TEST(ops.delay_ticks.value() == 1);
    BOOST_TEST(ops.completions == 5);
}

// A timeout is a one-shot task of the pool: a graceful shutdown() keeps it (it still cancels its
// operation when due) if the pool executes delayed tasks after shutdown, and drops it otherwise,
// leaving the operation to go on and complete on its own; the periodic policy has no say. A
// bounded operation started after the shutdown is cancelled at once either way.
BOOST_DATA_TEST_CASE_F(pool_fixture,
                       a_graceful_shutdown_keeps_a_timeout_exactly_when_it_keeps_delayed_tasks,
                       data::make({false, true}) * data::make({false, true}),
                       continue_periodic,
                       execute_delayed)
{
    parked_operation op;
    parked_operation late;
    std::optional<error_code> bounded_wait; // a scheduler's wait of 10 s, bounded to 1 s
    rig r(policies(continue_periodic, execute_delayed));
    op.start([&](auto token) { return sched::cancel_after(r.scheduler, 1s, std::move(token)); });
    r.scheduler.async_wait(10s, sched::cancel_after(r.scheduler, 1s, [&](error_code ec) {
                               BOOST_TEST(!bounded_wait); // once
                               bounded_wait = ec;
                           }));
    BOOST_TEST(r.pool.queue().size() == 3u);

    r.pool.shutdown();
    late.start([&](auto token) { return sched::cancel_after(r.scheduler, 1h, std::move(token)); });
    BOOST_TEST_REQUIRE(r.run_until([&] { return late.cancelled.has_value(); }));
    BOOST_TEST((*late.cancelled == cancellation_type::terminal));
    late.complete(aborted);

    if (execute_delayed)
    {
        BOOST_TEST(r.pool.queue().size() == 3u);
        manual_clock::advance(1s - 1ms);
        r.settle();
        r.run_ready();
        BOOST_TEST(!op.cancelled); // not early
        BOOST_TEST(!bounded_wait);
        manual_clock::advance(1ms);
        BOOST_TEST_REQUIRE(
            r.run_until([&] { return op.cancelled.has_value() && bounded_wait.has_value(); }));
        BOOST_TEST((*op.cancelled == cancellation_type::terminal));
        BOOST_TEST(*bounded_wait == aborted); // cancelled by its timeout, not ended by shutdown
        op.complete(aborted);
        BOOST_TEST(is(op.result, aborted));
    }
    else
    {
        // The wait is dropped with its timeout: the shutdown error, at once, not operation_aborted.
        BOOST_TEST_REQUIRE(r.run_until([&] { return bounded_wait.has_value(); }));
        BOOST_TEST(*bounded_wait == shut_down);
        BOOST_TEST(r.pool.queue().empty());
        BOOST_TEST_REQUIRE(r.pool.await_termination(60s)); // no timeout holds the pool open
        manual_clock::advance(1h);
        r.run_ready();
        BOOST_TEST(!op.cancelled); // the operation goes on without its timeout
        op.complete(error_code());
        BOOST_TEST(is(op.result, error_code()));
    }
    BOOST_TEST_REQUIRE(r.pool.await_termination(60s));
    r.run_to_end();
    BOOST_TEST(op.completions == 1);
    BOOST_TEST(late.completions == 1);
}

BOOST_FIXTURE_TEST_CASE(shutdown_now_drops_a_timeout_and_its_operation_completes_on_its_own,
                        pool_fixture)
{
    parked_operation op;
    rig r(single_worker());
    op.start([&](auto token) { return sched::cancel_after(r.scheduler, 1s, std::move(token)); });
    BOOST_TEST(r.pool.queue().size() == 1u);
    BOOST_TEST(r.pool.shutdown_now().empty()); // dropped, not handed back to be run
    BOOST_TEST(r.pool.queue().empty());
    BOOST_TEST_REQUIRE(r.pool.await_termination(60s));
    manual_clock::advance(1h);
    r.run_ready();
    BOOST_TEST(!op.cancelled);
    BOOST_TEST(!op.result);
    op.complete(error_code());
    BOOST_TEST(is(op.result, error_code()));
    r.run_to_end();
    BOOST_TEST(!op.cancelled);
    BOOST_TEST(op.completions == 1);
}

// "A negative timeout means now": an implementation that took a negative timeout as none (never
// fires) or by its magnitude (fires 1 s later) fails; the clock does not move here.
BOOST_FIXTURE_TEST_CASE(a_negative_timeout_cancels_the_operation_at_once, pool_fixture)
{
    parked_operation op;
    parked_operation most_negative;
    std::optional<error_code> bounded_wait;
    rig r(single_worker());
    manual_clock::advance(1s);
    op.start([&](auto token) { return sched::cancel_after(r.scheduler, -1s, std::move(token)); });
    most_negative.start([&](auto token) {
        return sched::cancel_after(r.scheduler, std::chrono::hours::min(), std::move(token));
    });
    r.scheduler.async_wait(
        1h, sched::cancel_after(r.scheduler, -1ms, [&](error_code ec) { bounded_wait = ec; }));
    BOOST_TEST(!op.cancelled); // not inside the initiating function
    // The clock stays at 1 s.
    BOOST_TEST_REQUIRE(r.run_until([&] {
        return op.cancelled.has_value() && most_negative.cancelled.has_value() &&
               bounded_wait.has_value();
    }));
    BOOST_TEST((*op.cancelled == cancellation_type::terminal));
    BOOST_TEST((*most_negative.cancelled == cancellation_type::terminal));
    BOOST_TEST(*bounded_wait == aborted);
    op.complete(aborted);
    most_negative.complete(aborted);
    BOOST_TEST(r.pool.queue().empty());
    r.run_to_end();
}

// "One too large for the clock never fires": from 1 s on the clock, an implementation that added
// the timeout without saturating would wrap around to a due time in the past and fire at once.
BOOST_FIXTURE_TEST_CASE(a_timeout_too_large_for_the_clock_never_fires, pool_fixture)
{
    parked_operation op;
    parked_operation clock_max;
    rig r(single_worker());
    manual_clock::advance(1s);
    op.start([&](auto token) {
        return sched::cancel_after(r.scheduler, std::chrono::hours::max(), std::move(token));
    });
    clock_max.start([&](auto token) {
        return sched::cancel_after(r.scheduler, manual_clock::duration::max(), std::move(token));
    });
    BOOST_TEST_REQUIRE(r.pool.queue().size() == 2u);
    BOOST_TEST(
        (r.pool.queue().due_time(*r.pool.queue().peek()) == manual_clock::time_point::max()));
    manual_clock::advance(1h);
    settle(r.pool);
    BOOST_TEST(r.run_ready() == 0u);
    manual_clock::advance_to(manual_clock::end_of_time()); // the timeouts are due never
    settle(r.pool);
    r.run_ready();
    BOOST_TEST(!op.cancelled);
    BOOST_TEST(!clock_max.cancelled);
    op.complete(error_code());
    clock_max.complete(error_code());
    BOOST_TEST(is(op.result, error_code()));
    BOOST_TEST(is(clock_max.result, error_code()));
    BOOST_TEST(r.pool.queue().empty()); // both timeouts left with their operations
    r.run_to_end();
}

// A timeout that can never fire would hold a shut-down pool open forever: shutdown() drops it, as
// it drops any task due never, even though delayed tasks are kept; the operation goes on.
BOOST_FIXTURE_TEST_CASE(a_graceful_shutdown_drops_a_timeout_that_could_never_fire, pool_fixture)
{
    parked_operation op;
    rig r(single_worker()); // execute_existing_delayed_tasks_after_shutdown: true
    op.start([&](auto token) {
        return sched::cancel_after(r.scheduler, std::chrono::hours::max(), std::move(token));
    });
    r.pool.shutdown();
    BOOST_TEST(r.pool.queue().empty());
    BOOST_TEST_REQUIRE(r.pool.await_termination(60s));
    r.run_ready();
    BOOST_TEST(!op.cancelled);
    op.complete(error_code());
    BOOST_TEST(is(op.result, error_code()));
    r.run_to_end();
    BOOST_TEST(op.completions == 1);
}

BOOST_AUTO_TEST_SUITE_END()
