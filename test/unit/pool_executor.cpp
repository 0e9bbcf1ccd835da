#include <sched/pool_executor.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/bind_allocator.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/defer.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "support/counter.hpp"
#include "support/counting_allocator.hpp"
#include "support/error_log.hpp"
#include "support/gate.hpp"
#include "support/pool_fixture.hpp"
#include "support/wait.hpp"

namespace asio = boost::asio;
namespace execution = boost::asio::execution;
using namespace std::chrono_literals;
using sched::test::counter;
using sched::test::eventually;
using sched::test::gate;

namespace {

using pool_type = sched::scheduled_thread_pool;
using executor_type = pool_type::executor_type;
using tracked_executor =
    decltype(asio::prefer(std::declval<executor_type>(), execution::outstanding_work.tracked));

static_assert(execution::is_executor<executor_type>::value);
static_assert(std::is_constructible_v<asio::any_io_executor, executor_type>);
static_assert(
    std::is_same_v<decltype(asio::query(std::declval<executor_type>(), execution::context)),
                   pool_type&>);
static_assert(executor_type::query(execution::mapping) == execution::mapping.thread);
static_assert(executor_type::query(execution::outstanding_work) ==
              execution::outstanding_work.untracked);

sched::pool_options threads(std::size_t n)
{
    sched::pool_options options;
    options.threads = n;
    return options;
}

// Occupies a worker with a task that runs until shutdown_now() (or the destructor) asks it to
// stop; returns once it runs.
auto occupy_until_stopped(pool_type& pool)
{
    counter started;
    auto blocker = pool.submit([&started](std::stop_token stop) {
        started.increment();
        (void)eventually([&] { return stop.stop_requested(); });
    });
    BOOST_TEST_REQUIRE(started.wait_for_at_least(1));
    return blocker;
}

// A function that counts its calls and whose copies share one token, so that the test can tell
// when the last copy is gone.
struct probe
{
    counter* calls;
    std::shared_ptr<int> token;

    void operator()() const { calls->increment(); }
};

// What the after_execute hook saw: the errors it was given (null ones are not kept).
struct error_log
{
    std::mutex mutex;
    std::vector<std::exception_ptr> errors;
    counter count;

    void record(std::exception_ptr e)
    {
        if (!e)
            return;
        {
            std::lock_guard lock(mutex);
            errors.push_back(std::move(e));
        }
        count.increment();
    }

    std::string message(std::size_t i)
    {
        std::lock_guard lock(mutex);
        try
        {
            std::rethrow_exception(errors.at(i));
        }
        catch (const std::exception& e)
        {
            return e.what();
        }
    }
};

// Hops through the pool's queue five times, counting the resumptions that were on a worker.
asio::awaitable<int> add_on_workers(executor_type pool_ex, counter& on_worker)
{
    const asio::any_io_executor ex = co_await asio::this_coro::executor;
    int sum = 0;
    for (int i = 1; i <= 5; ++i)
    {
        co_await asio::post(ex, asio::use_awaitable);
        if (pool_ex.running_in_this_thread())
            on_worker.increment();
        sum += i;
    }
    co_return sum;
}

} // namespace

BOOST_AUTO_TEST_SUITE(test_pool_executor)

BOOST_AUTO_TEST_CASE(queries_report_the_pool_and_the_properties)
{
    pool_type pool(threads(3));
    const executor_type ex = pool.get_executor();
    BOOST_TEST(&asio::query(ex, execution::context) == &pool);
    BOOST_TEST(&ex.context() == &pool);
    BOOST_TEST(asio::query(ex, execution::occupancy) == 3u);
    BOOST_TEST((asio::query(ex, execution::blocking) == execution::blocking.possibly));
    BOOST_TEST((asio::query(ex, execution::relationship) == execution::relationship.fork));
    BOOST_TEST(
        (asio::query(ex, execution::outstanding_work) == execution::outstanding_work.untracked));

    const auto never = asio::require(ex, execution::blocking.never);
    BOOST_TEST((asio::query(never, execution::blocking) == execution::blocking.never));
    const auto always = asio::require(ex, execution::blocking.always);
    BOOST_TEST((asio::query(always, execution::blocking) == execution::blocking.always));
    const auto continuation = asio::prefer(ex, execution::relationship.continuation);
    BOOST_TEST((asio::query(continuation, execution::relationship) ==
                execution::relationship.continuation));
    BOOST_TEST((continuation != ex));
    BOOST_TEST((asio::require(continuation, execution::relationship.fork) == ex));
    const auto tracked = asio::prefer(ex, execution::outstanding_work.tracked);
    BOOST_TEST(
        (asio::query(tracked, execution::outstanding_work) == execution::outstanding_work.tracked));

    const asio::any_io_executor any = ex;
    BOOST_TEST(&asio::query(any, execution::context) == &pool);
    BOOST_TEST((any == asio::any_io_executor(pool.get_executor())));
}

BOOST_AUTO_TEST_CASE(post_dispatch_and_defer_run_on_a_worker)
{
    pool_type pool(threads(2));
    const executor_type ex = pool.get_executor();
    BOOST_TEST(!ex.running_in_this_thread());
    counter on_worker;
    counter calls;
    auto check = [&] {
        if (ex.running_in_this_thread())
            on_worker.increment();
        calls.increment();
    };
    asio::post(ex, check);
    asio::dispatch(ex, check);
    asio::defer(ex, check);
    asio::post(pool, check); // the pool as an execution context
    ex.execute(check);
    ex.execute([&](auto&&... args) { // called as f(), though it could take a stop token
        if (sizeof...(args) == 0 && ex.running_in_this_thread())
            on_worker.increment();
        calls.increment();
    });
    BOOST_TEST_REQUIRE(calls.wait_for_at_least(6));
    BOOST_TEST(on_worker.value() == 6);
}

BOOST_AUTO_TEST_CASE(dispatch_on_a_worker_runs_inline_and_post_does_not)
{
    pool_type pool(threads(1));
    const executor_type ex = pool.get_executor();
    std::atomic<bool> dispatched{false};
    std::atomic<bool> posted{false};
    std::atomic<bool> never{false};
    bool dispatched_inline = false; // these three are written on the worker, read after `done`
    bool posted_inline = true;
    bool never_inline = true;
    counter done;
    asio::post(ex, [&] {
        asio::dispatch(ex, [&] { dispatched = true; });
        dispatched_inline = dispatched;
        // The only worker is this one, busy here: a queued function cannot have run yet.
        asio::post(ex, [&] {
            posted = true;
            done.increment();
        });
        posted_inline = posted;
        asio::require(ex, execution::blocking.never).execute([&] {
            never = true;
            done.increment();
        });
        never_inline = never;
        done.increment();
    });
    BOOST_TEST_REQUIRE(done.wait_for_at_least(3));
    BOOST_TEST(dispatched_inline);
    BOOST_TEST(!posted_inline);
    BOOST_TEST(!never_inline);
}

BOOST_AUTO_TEST_CASE(blocking_always_returns_once_the_function_has_run)
{
    pool_type pool(threads(1));
    const auto always = asio::require(pool.get_executor(), execution::blocking.always);
    bool ran_on_worker = false; // written by the worker; read once execute() returned
    always.execute([&] { ran_on_worker = always.running_in_this_thread(); });
    BOOST_TEST(ran_on_worker);

    // On a worker it runs inline: with one worker, queuing it would deadlock.
    counter done;
    bool inline_ran = false;
    asio::post(pool, [&] {
        bool ran = false;
        always.execute([&] { ran = true; });
        inline_ran = ran;
        done.increment();
    });
    BOOST_TEST_REQUIRE(done.wait_for_at_least(1));
    BOOST_TEST(inline_ran);

    // With an allocator of its own: the function's memory is back before it runs, and execute()
    // still returns only once it has.
    sched::test::allocation_log counts;
    const auto allocating =
        asio::require(always, execution::allocator(sched::test::counting_allocator<void>(counts)));
    long live_in_call = -1;
    allocating.execute([&] { live_in_call = counts.live(); });
    BOOST_TEST(live_in_call == 0);
    BOOST_TEST(counts.allocations() == 1);
}

// blocking.always waits until the function is done with, run or not: one that throws goes to
// after_execute, and execute() returns to its caller (not a worker) without it; on a pool that
// shutdown_now() stopped, the function is destroyed unrun and execute() returns.
BOOST_AUTO_TEST_CASE(blocking_always_returns_once_the_function_is_done_with_run_or_not,
                     *boost::unit_test::timeout(60))
{
    error_log log;
    sched::pool_options options = threads(1);
    options.after_execute = [&](std::exception_ptr e) {
        log.record(std::move(e));
    };
    pool_type pool(options);
    const auto always = asio::require(pool.get_executor(), execution::blocking.always);
    always.execute([] { throw std::runtime_error("always"); });
    BOOST_TEST_REQUIRE(log.count.wait_for_at_least(1));
    BOOST_TEST(log.message(0) == "always");

    (void)pool.shutdown_now();
    counter calls;
    auto token = std::make_shared<int>();
    std::weak_ptr<int> alive = token;
    always.execute(probe{&calls, std::move(token)});
    BOOST_TEST(alive.expired());
    BOOST_TEST(calls.value() == 0);
}

BOOST_AUTO_TEST_CASE(a_strand_on_the_pool_runs_one_function_at_a_time)
{
    pool_type pool(threads(4));
    auto strand = asio::make_strand(pool.get_executor());
    constexpr int posts = 2000;
    std::atomic<int> inside{0};
    std::atomic<int> most_inside{0};
    int unguarded = 0; // only the strand keeps this free of races
    counter done;
    for (int i = 0; i < posts; ++i)
    {
        asio::post(strand, [&] {
            const int now = ++inside;
            int seen = most_inside.load();
            while (now > seen && !most_inside.compare_exchange_weak(seen, now))
            {}
            ++unguarded;
            std::this_thread::yield(); // invites another worker in, were the strand to allow it
            --inside;
            done.increment();
        });
    }
    BOOST_TEST_REQUIRE(done.wait_for_at_least(posts));
    BOOST_TEST(most_inside.load() == 1);
    BOOST_TEST(unguarded == posts);
}

BOOST_AUTO_TEST_CASE(a_coroutine_spawned_on_the_pool_resumes_on_its_workers)
{
    pool_type pool(threads(2));
    counter on_worker;
    std::future<int> sum =
        asio::co_spawn(pool, add_on_workers(pool.get_executor(), on_worker), asio::use_future);
    BOOST_TEST_REQUIRE((sum.wait_for(60s) == std::future_status::ready));
    BOOST_TEST(sum.get() == 15);
    BOOST_TEST(on_worker.value() == 5);
}

// How long a check that a shut-down pool has not terminated waits: a pool with no work left
// terminates within microseconds, so a wrong answer shows well within it, even on a loaded
// machine.
constexpr auto not_yet = 50ms;

BOOST_AUTO_TEST_CASE(tracked_work_keeps_a_shut_down_pool_from_terminating)
{
    pool_type pool(threads(1));
    auto guard = asio::make_work_guard(pool);
    pool.shutdown();
    BOOST_TEST(!pool.await_termination(not_yet)); // no task left, but the guard is work
    counter calls;
    asio::post(pool, probe{&calls, nullptr}); // and the executor still accepts functions
    BOOST_TEST_REQUIRE(calls.wait_for_at_least(1));
    BOOST_TEST(!pool.await_termination(not_yet));
    guard.reset();
    BOOST_TEST(pool.await_termination(60s));
}

BOOST_AUTO_TEST_CASE(every_tracked_executor_is_work_until_destroyed_or_reassigned)
{
    pool_type first(threads(1));
    pool_type second(threads(1));
    std::optional<tracked_executor> on_first(
        asio::prefer(first.get_executor(), execution::outstanding_work.tracked));
    tracked_executor copy = *on_first; // copies count too
    std::optional<tracked_executor> moved(std::move(*on_first));
    on_first.reset(); // moved from: no longer counts
    tracked_executor on_second =
        asio::prefer(second.get_executor(), execution::outstanding_work.tracked);
    first.shutdown();
    second.shutdown();
    BOOST_TEST(!first.await_termination(not_yet));

    moved.reset();
    BOOST_TEST(!first.await_termination(not_yet)); // `copy` is still there
    copy = on_second;                              // its work moves to the second pool
    BOOST_TEST(first.await_termination(60s));
    BOOST_TEST(!second.await_termination(not_yet));
    on_second = std::move(copy);
    BOOST_TEST(!second.await_termination(not_yet));
    on_second = asio::prefer(first.get_executor(), execution::outstanding_work.tracked);
    BOOST_TEST(second.await_termination(60s));
}

BOOST_AUTO_TEST_CASE(work_started_through_the_ts_interface_holds_the_pool_open)
{
    pool_type pool(threads(1));
    const executor_type ex = pool.get_executor();
    ex.on_work_started();
    pool.shutdown();
    BOOST_TEST(!pool.await_termination(not_yet));
    ex.on_work_finished();
    BOOST_TEST(pool.await_termination(60s));
}

BOOST_AUTO_TEST_CASE(functions_run_after_shutdown_whatever_the_policies_say)
{
    sched::pool_options options = threads(1);
    options.execute_existing_delayed_tasks_after_shutdown = false;
    pool_type pool(options);
    gate release;
    counter started;
    counter calls;
    asio::post(pool, [&] {
        started.increment();
        release.wait();
    });
    BOOST_TEST_REQUIRE(started.wait_for_at_least(1));
    asio::post(pool, probe{&calls, nullptr}); // queued behind the blocked worker
    pool.shutdown();
    BOOST_CHECK_THROW(pool.submit([] {}), sched::rejected_execution); // tasks are refused
    asio::post(pool, probe{&calls, nullptr});                         // functions are not
    asio::post(asio::make_strand(pool), probe{&calls, nullptr});
    release.open();
    BOOST_TEST_REQUIRE(calls.wait_for_at_least(3));
    BOOST_TEST(pool.await_termination(60s));
    BOOST_TEST(calls.value() == 3);
}

BOOST_AUTO_TEST_CASE(after_shutdown_now_a_function_is_destroyed_without_running)
{
    pool_type pool(threads(1));
    (void)pool.shutdown_now();
    counter calls;
    auto token = std::make_shared<int>();
    std::weak_ptr<int> alive = token;
    asio::post(pool, probe{&calls, std::move(token)});
    BOOST_TEST(alive.expired()); // destroyed before post() returned
    BOOST_TEST(calls.value() == 0);
}

BOOST_AUTO_TEST_CASE(a_terminated_pool_destroys_functions_without_running_them)
{
    pool_type pool(threads(1));
    pool.shutdown();
    BOOST_TEST_REQUIRE(pool.await_termination(60s));
    counter calls;
    auto token = std::make_shared<int>();
    std::weak_ptr<int> alive = token;
    asio::post(pool, probe{&calls, std::move(token)});
    BOOST_TEST(alive.expired());
    BOOST_TEST(calls.value() == 0);
}

BOOST_AUTO_TEST_CASE(queued_functions_are_destroyed_unrun_when_the_pool_stops)
{
    counter calls;
    std::weak_ptr<int> destroyed_by_shutdown_now;
    std::weak_ptr<int> dropped_by_destructor;
    {
        pool_type pool(threads(1));
        auto blocker = occupy_until_stopped(pool);

        auto token = std::make_shared<int>();
        destroyed_by_shutdown_now = token;
        asio::post(pool, probe{&calls, std::move(token)});
        std::vector<sched::task_handle> never_ran = pool.shutdown_now();
        BOOST_TEST(never_ran.empty()); // not handed back: destroyed before it returned
        BOOST_TEST(destroyed_by_shutdown_now.expired());
    }
    {
        pool_type pool(threads(1));
        auto blocker = occupy_until_stopped(pool);
        auto token = std::make_shared<int>();
        dropped_by_destructor = token;
        asio::post(pool, probe{&calls, std::move(token)});
    } // the destructor's shutdown_now() drops it, and stops the blocker
    BOOST_TEST(dropped_by_destructor.expired());
    BOOST_TEST(calls.value() == 0);
}

// A strand's queued turn holds the pool's own (tracked) executor: handed back, it would outlive
// the pool in the caller's hands (a review found its destruction then reading the freed pool).
BOOST_AUTO_TEST_CASE(shutdown_now_hands_back_no_function_that_holds_the_pools_executor)
{
    counter calls;
    std::weak_ptr<int> alive;
    std::vector<sched::task_handle> never_ran;
    {
        pool_type pool(threads(1));
        auto blocker = occupy_until_stopped(pool);
        auto token = std::make_shared<int>();
        alive = token;
        asio::post(asio::make_strand(pool), probe{&calls, std::move(token)});
        auto task = pool.schedule(1h, [] {});
        never_ran = pool.shutdown_now();
        BOOST_TEST(never_ran.size() == 1u); // the task only
        BOOST_TEST(alive.expired());
    }
    never_ran.clear(); // after the pool has gone
    BOOST_TEST(calls.value() == 0);
}

BOOST_AUTO_TEST_CASE(a_function_racing_the_pool_going_idle_runs_or_is_destroyed)
{
    // Whichever wins, by the time the pool has terminated the function has run or been
    // destroyed: it is never left in the queue of a pool without workers.
    for (int i = 0; i < 200; ++i)
    {
        BOOST_TEST_CONTEXT("iteration " << i)
        {
            pool_type pool(threads(1));
            counter calls;
            auto token = std::make_shared<int>();
            std::weak_ptr<int> alive = token;
            std::thread poster([&, token = std::move(token)]() mutable {
                asio::post(pool, probe{&calls, std::move(token)});
            });
            pool.shutdown();
            poster.join();
            BOOST_TEST_REQUIRE(pool.await_termination(60s));
            BOOST_TEST(alive.expired());
            BOOST_TEST(calls.value() <= 1);
        }
    }
}

// Asio's rule: memory from the allocator a function comes with (a handler's, which the call may
// free) is given back before the function is called.
BOOST_AUTO_TEST_CASE(functions_live_in_the_executors_allocator_and_give_it_back_before_they_run)
{
    pool_type pool(threads(1));
    sched::test::allocation_log counts;
    sched::test::counting_allocator<void> alloc(counts);
    const auto ex = asio::require(pool.get_executor(), execution::allocator(alloc));
    BOOST_TEST((asio::query(ex, execution::allocator) == alloc));
    counter calls;
    std::atomic<long> most_live_in_a_call{0};
    const auto note_live = [&] {
        most_live_in_a_call = std::max(most_live_in_a_call.load(), counts.live());
        calls.increment();
    };
    // One at a time, so that no other function's memory is live during a call.
    ex.execute(note_live);
    BOOST_TEST_REQUIRE(calls.wait_for_at_least(1));
    asio::post(pool.get_executor(), asio::bind_allocator(alloc, note_live));
    BOOST_TEST_REQUIRE(calls.wait_for_at_least(2));
    pool.get_executor().post(note_live, alloc); // the Networking TS interface
    BOOST_TEST_REQUIRE(calls.wait_for_at_least(3));
    BOOST_TEST(counts.allocations() == 3);
    BOOST_TEST(most_live_in_a_call.load() == 0);
    BOOST_TEST(eventually([&] { return counts.live() == 0; }));

    // Back to the default allocator: no more traffic through the counting one.
    asio::require(ex, execution::allocator).execute(probe{&calls, nullptr});
    BOOST_TEST_REQUIRE(calls.wait_for_at_least(4));
    BOOST_TEST(counts.allocations() == 3);
}

BOOST_AUTO_TEST_CASE(what_a_function_throws_goes_to_after_execute)
{
    error_log log;
    sched::pool_options options = threads(1);
    options.after_execute = [&](std::exception_ptr e) {
        log.record(std::move(e));
    };
    pool_type pool(options);
    asio::post(pool, [] { throw std::runtime_error("posted"); });
    BOOST_TEST_REQUIRE(log.count.wait_for_at_least(1));
    BOOST_TEST(log.message(0) == "posted");

    // The worker survived; a function dispatched inline throws into the hook, not its caller.
    counter done;
    bool caller_went_on = false;
    asio::post(pool, [&] {
        asio::dispatch(pool, [] { throw std::runtime_error("dispatched"); });
        caller_went_on = true;
        done.increment();
    });
    BOOST_TEST_REQUIRE(done.wait_for_at_least(1));
    BOOST_TEST(caller_went_on);
    BOOST_TEST_REQUIRE(log.count.wait_for_at_least(2));
    BOOST_TEST(log.message(1) == "dispatched");
}

// pool_executor.hpp: "A queued function runs on a worker like a task due now: after the tasks
// due before it". The one worker is busy while tasks fall due and the function is posted among
// tasks due at the same time; a function that jumped the queue (a queue of its own, drained
// first) would run first.
BOOST_FIXTURE_TEST_CASE(a_queued_function_runs_after_the_tasks_due_before_it,
                        sched::test::manual_clock_fixture)
{
    using sched::manual_clock;
    sched::test::manual_pool pool(threads(1));
    gate release;
    counter started;
    auto busy = pool.submit([&] {
        started.increment();
        release.wait();
    });
    BOOST_TEST_REQUIRE(started.wait_for_at_least(1));

    std::mutex mutex;
    std::vector<std::string> order;
    counter ran;
    const auto note = [&](std::string name) {
        return [&, name] {
            {
                std::lock_guard lock(mutex);
                order.push_back(name);
            }
            ran.increment();
        };
    };
    auto at_1500ms = pool.schedule(1500ms, note("due at 1.5 s"));
    auto at_1s = pool.schedule(1s, note("due at 1 s"));
    manual_clock::advance(2s); // both due; the worker is still busy
    auto before = pool.submit(note("due at 2 s, submitted before"));
    asio::post(pool.get_executor(), note("function"));
    auto after = pool.submit(note("due at 2 s, submitted after"));
    auto later = pool.schedule(1s, note("due at 3 s"));
    release.open();
    BOOST_TEST_REQUIRE(ran.wait_for_at_least(5));
    auto last = pool.submit([] {}); // due at 2 s too: after all of them
    BOOST_TEST_REQUIRE((last.wait_for(60s) == std::future_status::ready));
    BOOST_TEST(later.cancel()); // not due yet
    std::lock_guard lock(mutex);
    const std::vector<std::string> expected{"due at 1 s", "due at 1.5 s",
                                            "due at 2 s, submitted before", "function",
                                            "due at 2 s, submitted after"};
    BOOST_TEST(order == expected, boost::test_tools::per_element());
}

namespace {
thread_local bool inside_wrapper = false; // set by the decorate_task hook's wrapper
} // namespace

// pool_executor.hpp: a queued function runs "with the pool's decorate_task, before_execute and
// after_execute hooks", and "what it throws goes to the after_execute hook and to the pool's
// error_sink". pool_options.hpp: decorate_task runs on the scheduling thread; the error_sink
// sees the exception on the worker, before after_execute.
BOOST_AUTO_TEST_CASE(queued_functions_go_through_every_hook_and_their_errors_reach_the_sink)
{
    std::mutex mutex;
    std::vector<std::string> events;
    const auto log_event = [&](std::string e) {
        std::lock_guard lock(mutex);
        events.push_back(std::move(e));
    };
    const std::thread::id poster = std::this_thread::get_id();
    std::atomic<int> decorated{0};
    std::atomic<int> decorated_elsewhere{0};
    counter afters;
    pool_type* pool_seen = nullptr; // set before anything is posted
    sched::pool_options options = threads(1);
    options.decorate_task = [&] {
        ++decorated;
        if (std::this_thread::get_id() != poster)
            ++decorated_elsewhere;
        return sched::task_wrapper([](const std::function<void()>& run) {
            inside_wrapper = true;
            try
            {
                run();
            }
            catch (...)
            {
                inside_wrapper = false;
                throw;
            }
            inside_wrapper = false;
        });
    };
    options.before_execute = [&] {
        log_event("before");
    };
    options.after_execute = [&](std::exception_ptr e) {
        log_event(e ? "after: " + sched::test::what_of(e) : "after: ok");
        afters.increment();
    };
    options.error_sink = [&](std::exception_ptr e) {
        const bool on_worker = pool_seen->get_executor().running_in_this_thread();
        log_event(std::string(on_worker ? "sink on a worker: " : "sink elsewhere: ") +
                  sched::test::what_of(e));
    };
    pool_type pool(options);
    pool_seen = &pool;
    asio::post(pool, [&] { log_event(inside_wrapper ? "body, wrapped" : "body, not wrapped"); });
    asio::post(pool, [] {
        throw std::runtime_error(inside_wrapper ? "thrown, wrapped" : "thrown, not wrapped");
    });
    BOOST_TEST_REQUIRE(afters.wait_for_at_least(2));
    BOOST_TEST(decorated.load() == 2); // once per function
    BOOST_TEST(decorated_elsewhere.load() == 0);
    std::lock_guard lock(mutex);
    const std::vector<std::string> expected{"before",
                                            "body, wrapped",
                                            "after: ok",
                                            "before",
                                            "sink on a worker: thrown, wrapped",
                                            "after: thrown, wrapped"};
    BOOST_TEST(events == expected, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_SUITE_END()
