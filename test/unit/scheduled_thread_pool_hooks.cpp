// scheduled_thread_pool: its hooks (decorate_task, before_execute, after_execute, error_sink),
// where they run and where they do not: a throwing decorate_task, a handed-back task run through
// its handle, a task the caller_runs policy runs, and what shutdown drops before any hook sees
// it.

#include <sched/error.hpp>
#include <sched/scheduled_thread_pool.hpp>

#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <exception>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support/counter.hpp"
#include "support/error_log.hpp"
#include "support/occupied_worker.hpp"
#include "support/pool_fixture.hpp"

using namespace std::chrono_literals;
using sched::manual_clock;
using sched::test::counter;
using sched::test::error_log;
using sched::test::manual_future;
using sched::test::manual_pool;
using sched::test::what_of;

namespace {

// A one-worker pool's options whose before_execute and after_execute hooks count their calls and
// whose error sink keeps what it is given.
struct counted_hooks
{
    std::atomic<int> before{0};
    std::atomic<int> after{0};
    error_log errors;

    sched::pool_options options()
    {
        sched::pool_options o;
        o.threads = 1;
        o.before_execute = [this] {
            ++before;
        };
        o.after_execute = [this](std::exception_ptr) {
            ++after;
        };
        o.error_sink = errors.sink();
        return o;
    }
};

// Whether `f` completes within a minute: a bound that only keeps a broken test from hanging.
template <class R>
bool completes(const manual_future<R>& f)
{
    return f.wait_for(60s) == std::future_status::ready;
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(test_scheduled_thread_pool, sched::test::pool_fixture)

// pool_options.hpp: "decorate_task runs on the scheduling thread instead; what it throws
// propagates to the scheduling call, which then schedules nothing."
BOOST_AUTO_TEST_CASE(a_throwing_decorate_task_fails_the_scheduling_call_which_schedules_nothing)
{
    std::atomic<bool> refuse{true};
    std::atomic<int> decorated{0};
    sched::pool_options options = single_worker();
    options.decorate_task = [&] {
        ++decorated;
        if (refuse)
            throw std::runtime_error("no context");
        return sched::task_wrapper();
    };
    manual_pool pool(options);
    counter ran;
    const auto token = std::make_shared<int>(0); // every callable holds a copy of it
    const auto body = [&ran, token] {
        ran.increment();
    };
    const auto no_context = [](const std::runtime_error& e) {
        return std::string(e.what()) == "no context";
    };
    BOOST_CHECK_EXCEPTION(pool.schedule(1s, body), std::runtime_error, no_context);
    BOOST_CHECK_EXCEPTION(pool.schedule_at(at(1s), body), std::runtime_error, no_context);
    BOOST_CHECK_EXCEPTION(pool.submit(body), std::runtime_error, no_context);
    BOOST_CHECK_EXCEPTION(pool.execute(body), std::runtime_error, no_context);
    BOOST_CHECK_EXCEPTION(pool.schedule_at_fixed_rate(1s, 1s, body), std::runtime_error,
                          no_context);
    BOOST_CHECK_EXCEPTION(pool.schedule_with_fixed_delay(1s, 1s, body), std::runtime_error,
                          no_context);
    BOOST_TEST(decorated.load() == 6);
    BOOST_TEST(pool.queue().size() == 0u);
    BOOST_TEST(token.use_count() == 2); // `body`'s copy and this one: none of the calls kept one

    // Nothing runs when it would have been due, and the pool goes on.
    manual_clock::advance(1h);
    refuse = false;
    auto after = pool.submit([] { return 7; }); // one worker: comes after anything due before
    BOOST_TEST_REQUIRE(completes(after));
    BOOST_TEST(after.get() == 7);
    BOOST_TEST(ran.value() == 0);
    // Nothing was left counted as pending either: the pool terminates.
    pool.shutdown();
    BOOST_TEST_REQUIRE(pool.await_termination(60s));
}

// task_handle.hpp: "A periodic task runs once and then ends cancelled, since nothing will run it
// again. ... The pool's before_execute and after_execute hooks and its error_sink are not
// called: the task has left its pool."
BOOST_AUTO_TEST_CASE(a_handed_back_periodic_task_runs_once_ends_cancelled_and_calls_no_hook)
{
    counted_hooks hooks;
    manual_pool pool(hooks.options());
    std::atomic<int> quiet_runs{0};
    std::atomic<int> failing_runs{0};
    std::atomic<int> dropped_runs{0};
    auto quiet = pool.schedule_at_fixed_rate(1h, 1s, [&] { ++quiet_runs; });
    auto failing =
        pool.schedule_with_fixed_delay(2h, 1s,
                                       [&] {
                                           ++failing_runs;
                                           throw std::runtime_error("survived");
                                       },
                                       {.on_failure = sched::failure_policy::keep_running()});
    (void)pool.schedule_at_fixed_rate(3h, 1s,
                                      [&] {
                                          ++dropped_runs;
                                          throw std::runtime_error("no future");
                                      },
                                      {.on_failure = sched::failure_policy::keep_running()});
    std::vector<sched::basic_task_handle<manual_clock>> handles = pool.shutdown_now();
    BOOST_TEST_REQUIRE(pool.await_termination(60s)); // no worker is left to call a hook
    BOOST_TEST_REQUIRE(handles.size() == 3u);

    std::vector<std::string> returned;
    for (auto& handle : handles)
    {
        BOOST_TEST(handle.is_periodic());
        returned.push_back(what_of(handle.run()));
        BOOST_TEST(!handle.valid());
    }
    BOOST_TEST((returned == std::vector<std::string>{"", "survived", "no future"}),
               boost::test_tools::per_element());
    BOOST_TEST(quiet_runs.load() == 1);
    BOOST_TEST(failing_runs.load() == 1);
    BOOST_TEST(dropped_runs.load() == 1);
    BOOST_TEST(quiet.is_cancelled());
    BOOST_TEST(failing.is_cancelled()); // survived its failure, then ended: nothing runs it again
    BOOST_CHECK_THROW(quiet.get(), sched::cancelled_error);
    BOOST_CHECK_THROW(failing.get(), sched::cancelled_error);
    BOOST_TEST(hooks.before.load() == 0);
    BOOST_TEST(hooks.after.load() == 0);
    BOOST_TEST(hooks.errors.snapshot().empty()); // run() returned them; the sink saw none
}

// scheduled_thread_pool.hpp, execute(): "Under rejection_policy::caller_runs, what it throws on
// the calling thread reaches the error_sink there (no hooks run)."
BOOST_AUTO_TEST_CASE(a_task_run_by_the_caller_runs_policy_calls_no_execute_hook)
{
    counted_hooks hooks;
    sched::pool_options options = hooks.options();
    options.rejection = sched::rejection_policy::caller_runs;
    manual_pool pool(options);
    pool.shutdown();
    BOOST_TEST_REQUIRE(pool.await_termination(60s)); // no worker is left to call a hook
    std::atomic<int> runs{0};
    pool.execute([&] {
        ++runs;
        throw std::runtime_error("on the caller");
    });
    auto one_shot = pool.schedule(1h, [&] { return ++runs; });
    auto periodic = pool.schedule_at_fixed_rate(1s, 1s, [&] { ++runs; });
    BOOST_TEST(runs.load() == 3); // each ran before its scheduling call returned
    BOOST_TEST(one_shot.is_done());
    BOOST_TEST(periodic.is_cancelled());
    BOOST_TEST(hooks.before.load() == 0);
    BOOST_TEST(hooks.after.load() == 0);
    BOOST_TEST(hooks.errors.snapshot() == std::vector<std::string>{"on the caller"},
               boost::test_tools::per_element());
}

// scheduled_future.hpp, cancel(): "A queued task will not run". Nor does one that a worker has
// taken but not begun to run: cancelled while the before_execute hook runs (as Java's
// FutureTask.run checks its state after beforeExecute), its body never runs, and after_execute
// still follows before_execute.
BOOST_DATA_TEST_CASE_F(sched::test::pool_fixture,
                       a_task_cancelled_while_before_execute_runs_does_not_run,
                       boost::unit_test::data::make({false, true}),
                       periodic)
{
    sched::test::blocking_hooks hooks;
    manual_pool pool(hooks.options());
    std::atomic<int> runs{0};
    manual_future<void> f = periodic ? pool.schedule_at_fixed_rate(0s, 1s, [&] { ++runs; })
                                     : pool.schedule(0s, [&] { ++runs; });
    BOOST_TEST_REQUIRE(hooks.entered.wait_for_at_least(1));
    BOOST_TEST(f.cancel());
    hooks.leave.open();
    BOOST_TEST_REQUIRE(hooks.after.wait_for_at_least(1));
    pool.shutdown();
    BOOST_TEST_REQUIRE(pool.await_termination(60s));
    BOOST_TEST(runs.load() == 0);
    BOOST_TEST(f.is_cancelled());
    BOOST_TEST(hooks.entered.value() == 1);
    BOOST_TEST(hooks.after.value() == 1);
}

// Nor does one that a shutdown ends while before_execute runs (Java's ScheduledFutureTask.run asks
// canRunInCurrentRunState after beforeExecute): a periodic task once shutdown() has stopped
// periodic tasks, any task once shutdown_now() (which hands back only what was still queued). It
// ends cancelled, and after_execute still follows before_execute (a review's finding: it ran).
BOOST_DATA_TEST_CASE_F(sched::test::pool_fixture,
                       a_task_a_shutdown_ends_while_before_execute_runs_does_not_run,
                       boost::unit_test::data::make({false, true}),
                       now)
{
    sched::test::blocking_hooks hooks;
    manual_pool pool(hooks.options()); // periodic tasks stop at shutdown(), as Java's default
    std::atomic<int> runs{0};
    manual_future<void> f = now ? pool.schedule(0s, [&] { ++runs; })
                                : pool.schedule_at_fixed_rate(0s, 1s, [&] { ++runs; });
    BOOST_TEST_REQUIRE(hooks.entered.wait_for_at_least(1));
    if (now)
        BOOST_TEST(pool.shutdown_now().empty()); // taken already
    else
        pool.shutdown();
    hooks.leave.open();
    BOOST_TEST_REQUIRE(pool.await_termination(60s));
    BOOST_TEST(runs.load() == 0);
    BOOST_TEST(f.is_cancelled());
    BOOST_TEST(hooks.entered.value() == 1);
    BOOST_TEST(hooks.after.value() == 1);
}

// pool_options.hpp: with execute_existing_delayed_tasks_after_shutdown false, shutdown() "drops
// every one not yet taken by a worker, due or not, execute()'s too". The one worker is busy, so
// the tasks due now are queued, not taken; with the policy true, they all run.
BOOST_DATA_TEST_CASE_F(sched::test::pool_fixture,
                       shutdown_applies_the_delayed_task_policy_to_tasks_already_due,
                       boost::unit_test::data::make({false, true}),
                       execute_delayed)
{
    sched::pool_options options = single_worker();
    options.execute_existing_delayed_tasks_after_shutdown = execute_delayed;
    manual_pool pool(options);
    sched::test::occupied_worker busy(pool);

    counter ran;
    pool.execute([&] { ran.increment(); });
    pool.execute([&] { ran.increment(); });
    auto submitted = pool.submit([&] { ran.increment(); });
    auto fell_due = pool.schedule(1s, [&] { ran.increment(); });
    manual_clock::advance(1s); // all four are due; none is taken
    BOOST_TEST(pool.queue().size() == 4u);

    pool.shutdown();
    BOOST_TEST(pool.queue().size() == (execute_delayed ? 4u : 0u)); // dropped by shutdown()
    BOOST_TEST(submitted.is_cancelled() == !execute_delayed);
    BOOST_TEST(fell_due.is_cancelled() == !execute_delayed);
    busy.release();
    BOOST_TEST_REQUIRE(completes(busy.task()));
    BOOST_TEST_REQUIRE(pool.await_termination(60s));
    BOOST_TEST(ran.value() == (execute_delayed ? 4 : 0));
}

// pool_options.hpp: the error sink "sees every exception that a task ... throws on the pool's
// threads, ... before after_execute". A result whose move constructor throws, as the run stores
// it, fails the run with that exception: the future holds it, and the sink and after_execute see
// it, for execute()'s task too, which no future carries (a review's finding: both saw a success).
BOOST_AUTO_TEST_CASE(a_result_whose_move_throws_fails_the_run_and_reaches_the_hooks)
{
    struct throwing_move
    {
        throwing_move() = default;
        throwing_move(throwing_move&&) { throw std::runtime_error("moved"); }
    };
    error_log sunk;
    error_log after;
    sched::pool_options options = single_worker();
    options.error_sink = sunk.sink();
    options.after_execute = after.sink();
    manual_pool pool(options);
    auto submitted = pool.submit([] { return throwing_move(); });
    BOOST_TEST_REQUIRE(completes(submitted));
    BOOST_TEST((submitted.state() == sched::future_state::exceptional));
    BOOST_CHECK_EXCEPTION(submitted.get(), std::runtime_error, [](const std::runtime_error& e) {
        return e.what() == std::string("moved");
    });
    pool.execute([] { return throwing_move(); });
    pool.shutdown();
    BOOST_TEST_REQUIRE(pool.await_termination(60s));
    BOOST_TEST(sunk.snapshot() == (std::vector<std::string>{"moved", "moved"}),
               boost::test_tools::per_element());
    BOOST_TEST(after.snapshot() == (std::vector<std::string>{"moved", "moved"}),
               boost::test_tools::per_element());
}

BOOST_AUTO_TEST_SUITE_END()
