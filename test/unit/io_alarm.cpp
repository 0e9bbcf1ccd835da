// A scheduler's waits on the steady clock, and the ticks of its periodic operations bound to its
// io_context, are waited for by that io_context (detail::io_alarm), not by the pool's workers.
// These tests run on the real clock: they assert what can only happen that way (a wait
// completing while every worker is busy), never how long anything takes, except with margins of
// seconds. The tests of polling (pool_options::spin_before_due) run on silent_clock, which the
// test moves: a thread that polls sees it move at once, one asleep only after the real time it
// saw left.

#include <sched/deadline.hpp>
#include <sched/error.hpp>
#include <sched/scheduler.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/require.hpp>
#include <boost/asio/strand.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "support/manual_clock_fixture.hpp"
#include "support/occupied_worker.hpp"
#include "support/silent_clock.hpp"
#include "support/wait.hpp"

using namespace std::chrono_literals;

namespace {

using error_code = boost::system::error_code;

// Joins a thread that runs `io` as the test ends; one that a failed requirement ends early stops
// the io_context first (a thread still joinable would end the whole run, and `io` would go under
// it).
struct joined_on_exit
{
    boost::asio::io_context& io;
    std::thread& runner;

    ~joined_on_exit()
    {
        if (runner.joinable())
        {
            io.stop();
            runner.join();
        }
    }
};
using clock_type = std::chrono::steady_clock;

// A one-worker pool on the steady clock, a scheduler on an io_context, and one wait's outcome.
struct steady_fixture
{
    sched::scheduled_thread_pool pool{1};
    boost::asio::io_context io;
    sched::scheduler scheduler{io, pool};
    std::optional<error_code> result;

    auto record()
    {
        return [this](error_code ec) {
            result = ec;
        };
    }

    // Runs the io_context until nothing is pending; returns whether that took less than 30 s (an
    // io_context still waiting for a timer an hour away runs to the 60 s limit).
    bool run_returns_soon()
    {
        const clock_type::time_point start = clock_type::now();
        io.run_for(60s);
        return clock_type::now() - start < 30s;
    }
};

// A one-worker pool that polls the clock from `spin` before a task is due.
sched::pool_options one_worker_spinning(std::chrono::nanoseconds spin)
{
    sched::pool_options o;
    o.threads = 1;
    o.spin_before_due = spin;
    return o;
}

// A one-worker pool whose worker is taken until the test ends.
struct busy_pool_fixture
{
    sched::scheduled_thread_pool pool{1};
    sched::test::occupied_worker<decltype(pool)> taken{pool};
};

// Arms a wait on a scheduler on `io` and `pool` (its workers busy) and runs `io`: only the
// io_context's alarm can complete the wait, and run() returns once it has (well before the busy
// worker gives up, after a minute).
template <class Clock>
void expect_the_alarm_to_complete_a_wait(boost::asio::io_context& io,
                                         sched::basic_scheduled_thread_pool<Clock>& pool)
{
    sched::basic_scheduler<Clock> scheduler(io, pool);
    std::optional<error_code> result;
    scheduler.async_wait(std::chrono::ceil<typename Clock::duration>(1ms),
                         [&](error_code ec) { result = ec; });
    io.run_for(20s); // returns once the wait has completed: nothing else is pending
    BOOST_TEST_REQUIRE(result.has_value());
    BOOST_TEST(!*result);
}

// The steady clock in hundredths of a second: a user's clock coarser than the alarm's own
// thresholds (a millisecond).
struct centisecond_clock
{
    using duration = std::chrono::duration<std::int64_t, std::centi>;
    using rep = duration::rep;
    using period = duration::period;
    using time_point = std::chrono::time_point<centisecond_clock>;
    static constexpr bool is_steady = true;

    static time_point now() noexcept
    {
        return time_point(
            std::chrono::duration_cast<duration>(clock_type::now().time_since_epoch()));
    }
};

// A periodic operation's completion handler that records the error its end carries.
auto record_end(std::optional<error_code>& out)
{
    return [&out](std::exception_ptr e, std::size_t) {
        try
        {
            if (e)
                std::rethrow_exception(e);
        }
        catch (const boost::system::system_error& failure)
        {
            out = failure.code();
        }
    };
}

// Arms one operation of a scheduler on an io_context that then goes before the pool: the
// operation goes with it, its handler (holding `alive`) destroyed unrun, and the pool goes on.
template <class Arm>
void check_destroyed_with_its_io_context(Arm arm)
{
    sched::scheduled_thread_pool pool(1);
    auto alive = std::make_shared<int>(0);
    std::weak_ptr<int> watch = alive;
    int invoked = 0;
    {
        boost::asio::io_context io;
        sched::scheduler scheduler(io, pool);
        arm(io, scheduler, std::exchange(alive, nullptr), invoked);
        BOOST_TEST(pool.queue().size() == 1u);
    } // the io_context and its timers go first
    BOOST_TEST(watch.expired());
    BOOST_TEST(invoked == 0);
    BOOST_TEST(pool.queue().size() == 0u);
    auto work = pool.schedule(0ms, [] { return 7; }); // the pool goes on
    BOOST_TEST(work.get() == 7);
}

// The pool's own tasks scheduled beside a stress test's operations (task k returning k * 10)
// all ran, and nothing is left queued.
void check_pool_work_ran(sched::scheduled_thread_pool& pool,
                         std::vector<sched::scheduled_future<int>>& work)
{
    int ran = 0;
    for (std::size_t i = 0; i < work.size(); ++i)
        ran += work[i].get() == static_cast<int>(i * 10);
    BOOST_TEST(ran == static_cast<int>(work.size()));
    BOOST_TEST(pool.queue().size() == 0u);
}

// A wait armed right after the only other one was cancelled, while the alarm's timer still waits
// for that one: the timer is kept if it wakes in time, and set again if not. Either way the wait
// completes through the io_context (the worker is busy throughout), and never early.
void check_a_wait_armed_after_a_cancelled_one(clock_type::duration cancelled_in,
                                              clock_type::duration due_in)
{
    busy_pool_fixture busy;
    boost::asio::io_context io;
    sched::scheduler scheduler(io, busy.pool);
    boost::asio::cancellation_signal signal;
    std::optional<error_code> cancelled;
    std::optional<error_code> result;
    clock_type::time_point due;
    clock_type::time_point completed;
    boost::asio::post(io, [&] {
        scheduler.async_wait(cancelled_in,
                             boost::asio::bind_cancellation_slot(
                                 signal.slot(), [&](error_code ec) { cancelled = ec; }));
        signal.emit(boost::asio::cancellation_type::terminal);
        due = clock_type::now() + due_in;
        scheduler.async_wait(due, [&](error_code ec) {
            completed = clock_type::now();
            result = ec;
        });
    });
    const clock_type::time_point start = clock_type::now();
    io.run_for(60s); // returns once both have completed: nothing else is pending
    BOOST_TEST((clock_type::now() - start < 30s));
    BOOST_TEST_REQUIRE(cancelled.has_value());
    BOOST_TEST(*cancelled == boost::asio::error::operation_aborted);
    BOOST_TEST_REQUIRE(result.has_value());
    BOOST_TEST(!*result);
    BOOST_TEST((completed >= due));
}

// Options of a one-worker pool whose before_execute, the `nth` time it runs on this thread (the
// io_context's), sleeps until `until` (another wait's timer is then ready) and polls `io`;
// `io_hooks` counts its calls on this thread.
sched::pool_options
polling_hook(boost::asio::io_context& io, int nth, clock_type::time_point until, int& io_hooks)
{
    sched::pool_options polling;
    polling.threads = 1;
    polling.before_execute = [&io, nth, until, &io_hooks, io_thread = std::this_thread::get_id()] {
        if (std::this_thread::get_id() == io_thread && ++io_hooks == nth)
        {
            std::this_thread::sleep_until(until);
            io.poll();
        }
    };
    return polling;
}

// Makes handlers that record their name in `ran` ("error" if they get one).
auto recorder(std::vector<std::string>& ran)
{
    return [&ran](const char* name) {
        return [&ran, name](error_code ec) {
            ran.push_back(ec ? "error" : name);
        };
    };
}

} // namespace

// A one-worker pool whose worker is taken until the test ends, and whose waits' io_contexts
// poll the clock for them from `spin` before they are due (pool_options::spin_before_due).
struct busy_spinning_pool
{
    sched::scheduled_thread_pool pool;
    sched::test::occupied_worker<decltype(pool)> taken{pool};

    explicit busy_spinning_pool(std::chrono::nanoseconds spin) : pool(one_worker_spinning(spin)) {}
};

// A one-worker pool on a clock the test moves without telling anyone (silent_clock), whose worker
// is taken until the test ends and whose waits are polled for from 2 min before they are due (so
// waits due within 2 min from the start are polled for at once), with a scheduler on an
// io_context. The tests put their waits 30 s or more ahead of the clock and allow 2 s for a
// completion once the clock gets there: an alarm asleep would sleep for the 30 s of real time it
// saw left.
struct silent_spinning_fixture : sched::test::manual_clock_fixture
{
    sched::basic_scheduled_thread_pool<sched::test::silent_clock> pool{one_worker_spinning(120s)};
    boost::asio::io_context io;
    sched::basic_scheduler<sched::test::silent_clock> scheduler{io, pool};
    sched::test::occupied_worker<decltype(pool)> taken{pool}; // released first, as the test ends

    static sched::test::silent_clock::time_point at(std::chrono::nanoseconds since_epoch)
    {
        return sched::test::silent_clock::time_point(since_epoch);
    }

    // Returns once a thread running `io` has run a handler posted now: the io_context runs, and
    // the alarm has taken up what was armed before (with a spin, it polls) before the clock moves.
    bool io_running()
    {
        std::promise<void> ran;
        std::future<void> done = ran.get_future();
        boost::asio::post(io, [&ran] { ran.set_value(); });
        return done.wait_for(60s) == std::future_status::ready;
    }
};

BOOST_AUTO_TEST_SUITE(test_io_alarm)

BOOST_FIXTURE_TEST_CASE(a_due_wait_completes_on_the_io_context_while_every_worker_is_busy,
                        busy_pool_fixture,
                        *boost::unit_test::timeout(120))
{
    boost::asio::io_context io;
    expect_the_alarm_to_complete_a_wait(io, pool);
}

// Waits due together by the thousand: the alarm takes a runner's share of them, runs their
// handlers, and takes the rest in turns of their own, so the first handlers do not wait until
// every wait has been fired. (The worker is busy: only the alarm takes them.)
BOOST_FIXTURE_TEST_CASE(waits_due_together_run_their_first_handlers_before_the_rest_are_taken,
                        busy_pool_fixture,
                        *boost::unit_test::timeout(120))
{
    constexpr std::size_t share =
        sched::detail::completion_queue<sched::detail::scheduler_service<clock_type>>::share;
    constexpr std::size_t count = 3 * share;
    boost::asio::io_context io;
    sched::scheduler scheduler(io, pool);
    std::size_t ran = 0;
    std::size_t failed = 0;
    std::optional<std::size_t> queued_at_first; // the waits still queued as the first ran
    const clock_type::time_point due = clock_type::now() + 100ms;
    for (std::size_t i = 0; i < count; ++i)
    {
        scheduler.async_wait(due, [&](error_code ec) {
            if (!queued_at_first)
                queued_at_first = pool.queue().size();
            failed += ec ? 1 : 0;
            ++ran;
        });
    }
    io.run_for(20s); // returns once every wait has completed: nothing else is pending
    BOOST_TEST(ran == count);
    BOOST_TEST(failed == 0u);
    BOOST_TEST_REQUIRE(queued_at_first.has_value());
    BOOST_TEST(*queued_at_first == count - share);
}

// On a clock coarser than a millisecond too (the alarm's threshold for waking early, a
// millisecond, did not convert to its duration: the scheduler did not compile).
BOOST_AUTO_TEST_CASE(a_wait_on_a_clock_coarser_than_a_millisecond_completes_on_the_io_context,
                     *boost::unit_test::timeout(120))
{
    sched::basic_scheduled_thread_pool<centisecond_clock> pool(1);
    sched::test::occupied_worker<decltype(pool)> taken(pool);
    boost::asio::io_context io;
    expect_the_alarm_to_complete_a_wait(io, pool);
}

// A scheduler on an any_io_executor holding a tracked executor of the io_context (what
// require(io.get_executor(), outstanding_work.tracked) gives) has the io_context's alarm, as one
// on its untracked executor has (before, the workers waited instead: the busy worker here would
// have held the wait up for a minute). The scheduler's executor keeps the io_context's work, so
// run() would not return: it runs one handler at a time until the wait has completed.
BOOST_FIXTURE_TEST_CASE(a_scheduler_on_a_tracked_io_executor_has_the_io_contexts_alarm,
                        busy_pool_fixture,
                        *boost::unit_test::timeout(120))
{
    boost::asio::io_context io;
    std::optional<error_code> result;
    {
        sched::scheduler scheduler(
            boost::asio::any_io_executor(boost::asio::require(
                io.get_executor(), boost::asio::execution::outstanding_work.tracked)),
            pool);
        scheduler.async_wait(1ms, [&](error_code ec) { result = ec; });
        while (!result && io.run_one_for(20s) != 0)
        {}
    }
    BOOST_TEST_REQUIRE(result.has_value());
    BOOST_TEST(!*result);
}

// A scheduler on a strand of an io_context is the first on it: the services an alarm needs are
// made first all the same, so a scheduler on the io_context's own executor, made later, gets
// its alarm (before, the first service did not know the context to be an io_context, and the
// workers waited instead: the busy worker here would have held the wait up).
BOOST_FIXTURE_TEST_CASE(a_first_scheduler_on_a_strand_readies_the_io_context_for_alarms,
                        busy_pool_fixture,
                        *boost::unit_test::timeout(120))
{
    {
        boost::asio::io_context io;
        const sched::scheduler on_strand(boost::asio::make_strand(io), pool);
        expect_the_alarm_to_complete_a_wait(io, pool);
    }
    // A strand of an I/O object's executor, as make_strand(socket.get_executor()) makes.
    boost::asio::io_context io;
    const sched::scheduler on_strand(
        boost::asio::make_strand(boost::asio::any_io_executor(io.get_executor())), pool);
    expect_the_alarm_to_complete_a_wait(io, pool);
}

// The alarm completes a wait whose handler is bound to a pool that refuses it (shut down): that
// pool destroys the completion at once, and the handler with it, which here holds the last
// reference to the pool the wait was in. That pool goes once the alarm has let go of it, not
// while the alarm runs its tasks (its destructor waits for that: it deadlocked on this thread).
// The other waits complete once each: the one that fell due with the refused one, and the one
// that the pool's destruction ends (which comes first: the refused completion is destroyed as it
// is refused, before the rest are sent on, so that a context waiting for it can finish).
BOOST_AUTO_TEST_CASE(a_handler_refused_where_the_alarm_completes_it_may_free_the_pool,
                     *boost::unit_test::timeout(120))
{
    using pool_type = sched::scheduled_thread_pool;
    auto pool = std::make_shared<pool_type>(1);
    const std::weak_ptr<pool_type> watch = pool;
    // Only the io_context's thread can take the waits; the handler lets the worker go first.
    auto taken = std::make_shared<sched::test::occupied_worker<pool_type>>(*pool);
    pool_type refusing(1);
    (void)refusing.shutdown_now();
    struct handler
    {
        std::shared_ptr<pool_type> keep; // goes last
        std::shared_ptr<sched::test::occupied_worker<pool_type>> taken;
        bool* invoked;
        void operator()(error_code) const { *invoked = true; }
    };
    bool invoked = false;
    std::vector<error_code> others;
    boost::asio::io_context io;
    {
        sched::scheduler scheduler(io, *pool);
        const clock_type::time_point due = clock_type::now() + 10ms; // both in one wake-up
        scheduler.async_wait(due,
                             boost::asio::bind_executor(refusing.get_executor(),
                                                        handler{pool, std::move(taken), &invoked}));
        scheduler.async_wait(due, [&](error_code ec) { others.push_back(ec); });
        scheduler.async_wait(1h, [&](error_code ec) { others.push_back(ec); });
    }
    pool.reset();
    BOOST_TEST(!watch.expired());
    std::future<std::size_t> ran = std::async(std::launch::async, [&] { return io.run_for(60s); });
    BOOST_TEST_REQUIRE((ran.wait_for(90s) == std::future_status::ready));
    BOOST_TEST(watch.expired());
    BOOST_TEST(!invoked);
    BOOST_TEST(others == (std::vector<error_code>{sched::error::shutdown, error_code()}),
               boost::test_tools::per_element());
}

// pool_options.hpp: before_execute runs "for a scheduler's wait ... on the io_context's thread
// that takes it", and so does after_execute. The worker is busy, so only the io_context's thread
// can take the wait.
BOOST_AUTO_TEST_CASE(the_execute_hooks_run_on_the_io_context_thread_for_its_waits,
                     *boost::unit_test::timeout(120))
{
    std::mutex mutex;
    std::vector<std::pair<std::string, std::thread::id>> hooks;
    const auto note = [&](const char* hook) {
        std::lock_guard lock(mutex);
        hooks.emplace_back(hook, std::this_thread::get_id());
    };
    sched::pool_options options;
    options.threads = 1;
    options.before_execute = [&] {
        note("before");
    };
    options.after_execute = [&](std::exception_ptr) {
        note("after");
    };
    sched::scheduled_thread_pool pool(options);
    sched::test::occupied_worker taken(pool);
    std::size_t hooked_before; // the taken worker's before_execute
    {
        std::lock_guard lock(mutex);
        hooked_before = hooks.size();
    }
    boost::asio::io_context io;
    sched::scheduler scheduler(io, pool);
    std::optional<error_code> result;
    scheduler.async_wait(1ms, [&](error_code ec) {
        note("handler");
        result = ec;
    });
    io.run_for(60s); // on this thread; returns once the wait has completed
    BOOST_TEST(io.stopped());
    BOOST_TEST_REQUIRE(result.has_value());
    BOOST_TEST(!*result);
    const std::thread::id io_thread = std::this_thread::get_id();
    std::lock_guard lock(mutex);
    std::string seen; // the hooks and the handler, in order
    std::size_t elsewhere = 0;
    for (std::size_t i = hooked_before; i < hooks.size(); ++i)
    {
        seen += (seen.empty() ? "" : ", ") + hooks[i].first;
        elsewhere += hooks[i].second != io_thread;
    }
    // The handler runs once the wait has been taken, as Asio's own timers complete; after_execute
    // ends the run, before or after the handler.
    BOOST_TEST((seen == "before, after, handler" || seen == "before, handler, after"),
               "seen: " << seen);
    BOOST_TEST(elsewhere == 0u);
}

// A pool's hook may run the io_context (poll() it) on the thread where that pool's alarm runs
// the waits it took: another pool's alarm, ready by then, runs there inside it. The handlers of
// the waits either alarm took all run, once each, in the order the waits were taken (the first
// alarm's collecting goes on after; the other's completion waits, with the first's, until the
// first alarm lets go of its pool: see detail::deferred_completions).
BOOST_AUTO_TEST_CASE(a_hook_that_polls_the_io_context_loses_no_wait_its_alarm_took,
                     *boost::unit_test::timeout(120))
{
    boost::asio::io_context io;
    const clock_type::time_point start = clock_type::now();
    const clock_type::time_point due = start + 100ms;
    const clock_type::time_point other_due = due + 5ms;
    int io_hooks = 0;
    // Before the second wait: the first one's handler is collected, not yet run.
    sched::scheduled_thread_pool pool(polling_hook(io, 2, other_due + 20ms, io_hooks));
    sched::scheduled_thread_pool other_pool(1);
    sched::test::occupied_worker taken(pool);
    sched::test::occupied_worker other_taken(other_pool);
    sched::scheduler scheduler(io, pool);
    sched::scheduler other_scheduler(io, other_pool);
    std::vector<std::string> ran;
    const auto record = recorder(ran);
    scheduler.async_wait(due, record("first"));
    scheduler.async_wait(due, record("second"));
    other_scheduler.async_wait(other_due, record("other"));
    io.run_for(60s);
    BOOST_TEST(io.stopped());
    BOOST_TEST((clock_type::now() - start < 30s));
    BOOST_TEST(io_hooks == 2);
    BOOST_TEST(ran == (std::vector<std::string>{"first", "other", "second"}),
               boost::test_tools::per_element());
}

// The same with one pool: while the hook runs for the first wait, the alarm's other timer (woken
// for the second wait) runs inside the poll, and takes that pool's link again on the same thread.
// Before, it locked the link's mutex twice and hung there (a review's finding).
BOOST_AUTO_TEST_CASE(a_hook_that_polls_the_io_context_runs_its_own_pools_next_wait_there,
                     *boost::unit_test::timeout(120))
{
    boost::asio::io_context io;
    const clock_type::time_point start = clock_type::now();
    const clock_type::time_point due = start + 100ms;
    const clock_type::time_point second_due = due + 5ms;
    int io_hooks = 0;
    sched::scheduled_thread_pool pool(polling_hook(io, 1, second_due + 20ms, io_hooks));
    sched::test::occupied_worker taken(pool);
    sched::scheduler scheduler(io, pool);
    std::vector<std::string> ran;
    const auto record = recorder(ran);
    // The later one first: its timer keeps waiting for it as the earlier one takes the other.
    scheduler.async_wait(second_due, record("second"));
    scheduler.async_wait(due, record("first"));
    io.run_for(60s);
    BOOST_TEST(io.stopped());
    BOOST_TEST((clock_type::now() - start < 30s));
    BOOST_TEST(io_hooks == 2);
    // Once each; the second, if it ran inside the first's hook, ran first (it completed first).
    std::sort(ran.begin(), ran.end());
    BOOST_TEST(ran == (std::vector<std::string>{"first", "second"}),
               boost::test_tools::per_element());
}

// A pool task due a little after a wait goes to the far tier (the pool's horizon is 400 ms here),
// whose marker, due 200 ms before the task, then comes before the wait (if the task is armed
// within 90 ms of the wait): the alarm keeps the wait and completes it while every worker is busy
// (before, it stepped down for the marker, which only a worker wakes for: a review's finding).
// The pool task runs once the worker is free.
BOOST_AUTO_TEST_CASE(a_wait_behind_the_far_tiers_marker_completes_while_every_worker_is_busy,
                     *boost::unit_test::timeout(120))
{
    sched::pool_options options;
    options.threads = 1;
    options.far_tier_horizon = 400ms;
    sched::scheduled_thread_pool pool(options);
    sched::test::occupied_worker<decltype(pool)> taken(pool);
    boost::asio::io_context io;
    sched::scheduler scheduler(io, pool);
    std::optional<error_code> result;
    scheduler.async_wait(300ms, [&](error_code ec) { result = ec; });
    auto work = pool.schedule(410ms, [] { return 42; });
    io.run_for(20s); // returns once the wait has completed: nothing else is pending
    BOOST_TEST_REQUIRE(result.has_value());
    BOOST_TEST(!*result);
    taken.release();
    BOOST_TEST_REQUIRE((work.wait_for(60s) == std::future_status::ready));
    BOOST_TEST(work.get() == 42);
}

BOOST_FIXTURE_TEST_CASE(ticks_bound_to_the_io_context_run_while_every_worker_is_busy,
                        busy_pool_fixture,
                        *boost::unit_test::timeout(120))
{
    boost::asio::io_context io;
    sched::scheduler scheduler(io, pool);
    boost::asio::cancellation_signal signal;
    int ticks = 0;
    std::optional<error_code> result;
    // Cancelled after the third tick, from a handler of its own: the tick is back in the queue
    // by then, so the cancel takes it out of there, and the alarm lets the io_context go.
    scheduler.async_schedule_at_fixed_rate(
        1ms, 1ms,
        boost::asio::bind_executor(io,
                                   [&] {
                                       if (++ticks == 3)
                                           boost::asio::post(io, [&] {
                                               signal.emit(
                                                   boost::asio::cancellation_type::terminal);
                                           });
                                   }),
        boost::asio::bind_cancellation_slot(signal.slot(), record_end(result)));
    const clock_type::time_point start = clock_type::now();
    io.run_for(60s); // returns once the operation has ended: nothing else is pending
    BOOST_TEST((clock_type::now() - start < 30s));
    BOOST_TEST(ticks >= 3); // a fourth may come before the cancel on a loaded machine
    BOOST_TEST_REQUIRE(result.has_value());
    BOOST_TEST(*result == boost::asio::error::operation_aborted);
}

BOOST_FIXTURE_TEST_CASE(cancelling_the_last_pending_wait_lets_run_return_at_once,
                        steady_fixture,
                        *boost::unit_test::timeout(120))
{
    boost::asio::cancellation_signal signal;
    scheduler.async_wait(1h, boost::asio::bind_cancellation_slot(signal.slot(), record()));
    boost::asio::post(io, [&] { signal.emit(boost::asio::cancellation_type::terminal); });
    BOOST_TEST(run_returns_soon());
    BOOST_TEST_REQUIRE(result.has_value());
    BOOST_TEST(*result == boost::asio::error::operation_aborted);
}

BOOST_FIXTURE_TEST_CASE(waits_armed_and_cancelled_at_once_over_and_over_keep_the_alarm_waiting,
                        steady_fixture,
                        *boost::unit_test::timeout(120))
{
    // Each is the only pending wait. The alarm keeps its timer waiting between them (stopping
    // it would complete its wait as a handler of its own: one per round), and stops it once the
    // io_context gets to it, so run() returns at once.
    constexpr int rounds = 1000;
    boost::asio::cancellation_signal signal;
    int aborted = 0;
    int other = 0;
    const auto count = [&](error_code ec) {
        ++(ec == boost::asio::error::operation_aborted ? aborted : other);
    };
    boost::asio::post(io, [&] {
        for (int i = 0; i < rounds; ++i)
        {
            scheduler.async_wait(1h, boost::asio::bind_cancellation_slot(signal.slot(), count));
            signal.emit(boost::asio::cancellation_type::terminal);
        }
    });
    const clock_type::time_point start = clock_type::now();
    const std::size_t handlers = io.run_for(60s);
    BOOST_TEST((clock_type::now() - start < 30s));
    BOOST_TEST(aborted == rounds);
    BOOST_TEST(other == 0);
    BOOST_TEST(handlers < std::size_t(rounds / 10)); // the waits' own complete in batches
}

BOOST_AUTO_TEST_CASE(a_wait_due_after_a_cancelled_one_completes_when_due,
                     *boost::unit_test::timeout(120))
{
    check_a_wait_armed_after_a_cancelled_one(20ms, 60ms); // the kept timer wakes early first
}

BOOST_AUTO_TEST_CASE(a_wait_due_before_a_cancelled_one_completes_when_due,
                     *boost::unit_test::timeout(120))
{
    check_a_wait_armed_after_a_cancelled_one(1h, 20ms); // the kept timer would wake too late
}

BOOST_FIXTURE_TEST_CASE(pool_work_behind_a_due_wait_runs_while_its_io_context_is_not_running,
                        steady_fixture,
                        *boost::unit_test::timeout(120))
{
    // Nobody runs the io_context until the end.
    scheduler.async_wait(0ms, record()); // the head, due now
    auto work = pool.schedule(1ms, [] { return 42; });
    // A worker takes the due wait once it is overdue by the grace, and then the work.
    BOOST_TEST_REQUIRE((work.wait_for(60s) == std::future_status::ready));
    BOOST_TEST(work.get() == 42);
    BOOST_TEST(!result.has_value()); // its handler waits for the io_context
    io.run_for(60s);
    BOOST_TEST_REQUIRE(result.has_value());
    BOOST_TEST(!*result);
}

BOOST_FIXTURE_TEST_CASE(a_deadline_pulled_in_completes_through_the_io_context,
                        steady_fixture,
                        *boost::unit_test::timeout(120))
{
    sched::deadline deadline(io, pool);
    deadline.expires_after(1h);
    deadline.async_wait(record());
    BOOST_TEST(deadline.expires_after(1ms)); // moved in place, the io_context's timer with it
    BOOST_TEST(run_returns_soon());
    BOOST_TEST_REQUIRE(result.has_value());
    BOOST_TEST(!*result);
}

BOOST_FIXTURE_TEST_CASE(shutting_the_pool_down_now_completes_a_waiting_wait_with_the_shutdown_error,
                        steady_fixture,
                        *boost::unit_test::timeout(120))
{
    scheduler.async_wait(1h, record());
    (void)pool.shutdown_now();
    BOOST_TEST(run_returns_soon());
    BOOST_TEST_REQUIRE(result.has_value());
    BOOST_TEST(*result == make_error_code(sched::error::shutdown));
}

BOOST_FIXTURE_TEST_CASE(
    shutting_the_pool_down_now_ends_a_periodic_operation_its_io_context_waits_for,
    steady_fixture,
    *boost::unit_test::timeout(120))
{
    std::optional<error_code> ended;
    scheduler.async_schedule_at_fixed_rate(1h, 1h, boost::asio::bind_executor(io, [] {}),
                                           record_end(ended));
    (void)pool.shutdown_now();
    BOOST_TEST(run_returns_soon());
    BOOST_TEST_REQUIRE(ended.has_value());
    BOOST_TEST(*ended == make_error_code(sched::error::shutdown));
}

BOOST_AUTO_TEST_CASE(an_io_context_destroyed_first_takes_its_waiting_wait_with_it,
                     *boost::unit_test::timeout(120))
{
    check_destroyed_with_its_io_context(
        [](boost::asio::io_context&, sched::scheduler& scheduler, auto alive, int& invoked) {
            scheduler.async_wait(1h, [&invoked, alive](error_code) { ++invoked; });
        });
}

BOOST_AUTO_TEST_CASE(an_io_context_destroyed_first_takes_its_waiting_periodic_operation_with_it,
                     *boost::unit_test::timeout(120))
{
    check_destroyed_with_its_io_context(
        [](boost::asio::io_context& io, sched::scheduler& scheduler, auto alive, int& invoked) {
            scheduler.async_schedule_at_fixed_rate(
                1h, 1h, boost::asio::bind_executor(io, [alive] {}),
                [&invoked, alive](std::exception_ptr, std::size_t) { ++invoked; });
        });
}

// Heads change hands between two io_contexts' timers and the workers all the time: each wait's
// handler runs exactly once, on its own io_context, and every pool task runs.
BOOST_AUTO_TEST_CASE(waits_of_two_io_contexts_and_pool_work_share_a_pool_without_loss,
                     *boost::unit_test::timeout(300))
{
    constexpr int waits = 20000;
    sched::scheduled_thread_pool pool(2);
    boost::asio::io_context io[2];
    std::vector<std::thread> threads;
    std::vector<sched::scheduler> schedulers;
    for (auto& context : io)
        schedulers.emplace_back(context, pool);
    std::vector<std::atomic<int>> invoked(waits);
    std::atomic<int> wrong_context{0};
    std::atomic<int> errors{0};
    std::vector<sched::scheduled_future<int>> work;
    std::mt19937 random(11);
    for (int id = 0; id < waits; ++id)
    {
        const int side = id % 2;
        const auto delay = std::chrono::microseconds(random() % 20000);
        schedulers[static_cast<std::size_t>(side)].async_wait(delay, [&, id, side](error_code ec) {
            invoked[static_cast<std::size_t>(id)].fetch_add(1);
            if (!io[side].get_executor().running_in_this_thread())
                wrong_context.fetch_add(1);
            if (ec)
                errors.fetch_add(1);
        });
        if (id % 10 == 0)
            work.push_back(pool.schedule(delay, [id] { return id; }));
    }
    // Bounded: a lost handler leaves its io_context with work, and fails the test below.
    for (auto& context : io)
        threads.emplace_back([&context] { context.run_for(120s); });
    for (std::thread& t : threads)
        t.join();
    for (auto& context : io)
        BOOST_TEST(context.stopped()); // out of work, not out of time: every wait has completed

    int once = 0;
    for (const std::atomic<int>& n : invoked)
        once += n.load() == 1;
    BOOST_TEST(once == waits);
    BOOST_TEST(wrong_context.load() == 0);
    BOOST_TEST(errors.load() == 0);
    check_pool_work_ran(pool, work);
}

// Periodic operations bound to two io_contexts, led by their timers, beside pool work: each
// ticks on its own io_context, never concurrently with itself, and is cancelled (from a handler
// of its own io_context) after its fifth tick; every completion runs exactly once, aborted.
BOOST_AUTO_TEST_CASE(ticks_of_two_io_contexts_and_pool_work_share_a_pool_without_loss,
                     *boost::unit_test::timeout(300))
{
    constexpr int operations = 2000;
    constexpr int ticks_each = 5;
    sched::scheduled_thread_pool pool(2);
    boost::asio::io_context io[2];
    std::vector<sched::scheduler> schedulers;
    for (auto& context : io)
        schedulers.emplace_back(context, pool);
    struct operation
    {
        boost::asio::cancellation_signal signal;
        std::atomic<int> ticks{0};
        std::atomic<bool> ticking{false};
        std::atomic<int> ended{0};
    };
    std::vector<operation> ops(operations);
    std::atomic<int> wrong_context{0};
    std::atomic<int> overlapping{0};
    std::atomic<int> not_aborted{0};
    std::vector<sched::scheduled_future<int>> work;
    std::mt19937 random(17);
    for (int id = 0; id < operations; ++id)
    {
        const std::size_t side = static_cast<std::size_t>(id % 2);
        operation& op = ops[static_cast<std::size_t>(id)];
        const auto first = std::chrono::microseconds(random() % 20000);
        const auto period = std::chrono::microseconds(1000 + random() % 2000);
        auto tick = [&, side] {
            if (op.ticking.exchange(true))
                overlapping.fetch_add(1);
            if (!io[side].get_executor().running_in_this_thread())
                wrong_context.fetch_add(1);
            if (op.ticks.fetch_add(1) + 1 == ticks_each)
                boost::asio::post(
                    io[side], [&op] { op.signal.emit(boost::asio::cancellation_type::terminal); });
            op.ticking.store(false);
        };
        schedulers[side].async_schedule_at_fixed_rate(
            first, period, boost::asio::bind_executor(io[side], tick),
            boost::asio::bind_cancellation_slot(
                op.signal.slot(), [&op, &not_aborted](std::exception_ptr e, std::size_t) {
                    op.ended.fetch_add(1);
                    std::optional<error_code> code;
                    record_end(code)(e, 0);
                    if (code != boost::asio::error::operation_aborted)
                        not_aborted.fetch_add(1);
                }));
        if (id % 10 == 0)
            work.push_back(pool.schedule(first, [id] { return id; }));
    }
    std::vector<std::thread> threads;
    // Bounded: a lost handler leaves its io_context with work, and fails the test below.
    for (auto& context : io)
        threads.emplace_back([&context] { context.run_for(120s); });
    for (std::thread& t : threads)
        t.join();
    for (auto& context : io)
        BOOST_TEST(context.stopped()); // out of work, not out of time: every operation has ended

    int ended_once = 0;
    int ticked_enough = 0;
    for (const operation& op : ops)
    {
        ended_once += op.ended.load() == 1;
        ticked_enough += op.ticks.load() >= ticks_each;
    }
    BOOST_TEST(ended_once == operations);
    BOOST_TEST(ticked_enough == operations);
    BOOST_TEST(wrong_context.load() == 0);
    BOOST_TEST(overlapping.load() == 0);
    BOOST_TEST(not_aborted.load() == 0);
    check_pool_work_ran(pool, work);
}

// Waits 10 µs apart, three at a time, on an io_context run by two threads that poll for them:
// each completes once, none before it is due.
BOOST_AUTO_TEST_CASE(with_a_spin_waits_complete_once_each_and_none_before_it_is_due,
                     *boost::unit_test::timeout(120))
{
    busy_spinning_pool busy(2ms);
    boost::asio::io_context io(2);
    sched::scheduler scheduler(io, busy.pool);
    constexpr std::size_t count = 600;
    std::vector<std::atomic<int>> completions(count);
    std::atomic<int> early{0};
    std::atomic<int> failed{0};
    const clock_type::time_point start = clock_type::now() + 20ms;
    for (std::size_t i = 0; i < count; ++i)
    {
        const clock_type::time_point due = start + (i / 3) * 10us;
        scheduler.async_wait(due, [&, i, due](error_code ec) {
            if (clock_type::now() < due)
                early.fetch_add(1);
            if (ec)
                failed.fetch_add(1);
            completions[i].fetch_add(1);
        });
    }
    std::thread second([&] { io.run_for(60s); });
    io.run_for(60s);
    second.join();
    BOOST_TEST(io.stopped()); // out of work, not out of time
    for (const auto& c : completions)
        BOOST_TEST(c.load() == 1);
    BOOST_TEST(early.load() == 0);
    BOOST_TEST(failed.load() == 0);
}

// The ticks an alarm leads go to their executor before the waits led with them complete, and at
// once: on an io_context run by two threads, the other thread may run a tick while the handler of
// a wait led with it still runs (here it waits for the tick). Ticks kept on the leading thread
// until its handler returned would not run meanwhile. (A tick led in an earlier batch than the
// wait has run by then, on either thread.)
BOOST_AUTO_TEST_CASE(a_tick_led_with_a_wait_runs_while_the_waits_handler_runs,
                     *boost::unit_test::timeout(120))
{
    sched::pool_options options;
    options.threads = 1;
    options.timer_slack = 20ms; // the tick and the wait fall due in one batch
    sched::scheduled_thread_pool pool(options);
    boost::asio::io_context io;
    sched::scheduler scheduler(io, pool);
    std::promise<void> tick_ran;
    std::future<void> ticked = tick_ran.get_future();
    std::atomic<bool> first_tick{true};
    boost::asio::cancellation_signal signal;
    std::optional<error_code> result;
    scheduler.async_schedule_at_fixed_rate(
        100ms, 1h,
        boost::asio::bind_executor(io,
                                   [&] {
                                       if (first_tick.exchange(false))
                                           tick_ran.set_value();
                                   }),
        boost::asio::bind_cancellation_slot(signal.slot(), record_end(result)));
    const clock_type::time_point due = clock_type::now() + 100ms;
    bool tick_ran_meanwhile = false;
    scheduler.async_wait(due, [&](error_code) {
        tick_ran_meanwhile = ticked.wait_for(30s) == std::future_status::ready;
        signal.emit(boost::asio::cancellation_type::terminal);
    });
    std::thread second([&] { io.run_for(60s); });
    const joined_on_exit join{io, second};
    io.run_for(60s);
    second.join();
    BOOST_TEST(io.stopped()); // out of work, not out of time
    BOOST_TEST(tick_ran_meanwhile);
    BOOST_TEST_REQUIRE(result.has_value());
    BOOST_TEST(*result == boost::asio::error::operation_aborted);
}

// The io_context polls for a wait on a clock that moves without telling anyone: an alarm asleep
// would sleep for the 30 s of real time it saw left, one that polls sees the clock move. Other
// handlers run between its turns.
BOOST_FIXTURE_TEST_CASE(an_io_context_thread_polls_for_a_wait_and_runs_other_handlers_meanwhile,
                        silent_spinning_fixture,
                        *boost::unit_test::timeout(120))
{
    std::promise<error_code> result;
    std::atomic<bool> completed{false};
    scheduler.async_wait(at(30s), [&](error_code ec) {
        completed = true;
        result.set_value(ec);
    });
    // Each link posts the next until the wait has completed.
    std::atomic<std::size_t> links{0};
    std::function<void()> link = [&] {
        links.fetch_add(1);
        if (!completed.load())
            boost::asio::post(io, link);
    };
    boost::asio::post(io, link);
    std::thread runner([this] { io.run_for(60s); });
    const joined_on_exit joined{io, runner};
    BOOST_TEST_REQUIRE(sched::test::eventually([&] { return links.load() > 1000; }));
    sched::manual_clock::advance(30s);
    BOOST_TEST_REQUIRE((result.get_future().wait_for(2s) == std::future_status::ready));
    runner.join();
    BOOST_TEST(io.stopped()); // out of work: the polling ended with the wait
}

// The first wait shows that the io_context polls (it completes as soon as the clock moves), and
// it cancels the second, which the thread then polls for: that ends the polling, and run()
// returns.
BOOST_FIXTURE_TEST_CASE(cancelling_the_wait_a_thread_polls_for_ends_the_polling,
                        silent_spinning_fixture,
                        *boost::unit_test::timeout(120))
{
    boost::asio::cancellation_signal signal;
    std::promise<void> first;
    std::optional<error_code> second;
    scheduler.async_wait(at(30s), [&](error_code) {
        signal.emit(boost::asio::cancellation_type::terminal);
        first.set_value();
    });
    scheduler.async_wait(at(60s), boost::asio::bind_cancellation_slot(
                                      signal.slot(), [&](error_code ec) { second = ec; }));
    std::thread runner([this] { io.run_for(60s); });
    const joined_on_exit joined{io, runner};
    BOOST_TEST_REQUIRE(io_running());
    sched::manual_clock::advance(30s);
    BOOST_TEST_REQUIRE((first.get_future().wait_for(2s) == std::future_status::ready));
    runner.join(); // within a minute: a thread polling on would keep it for the whole minute
    BOOST_TEST(io.stopped());
    BOOST_TEST((second == boost::asio::error::operation_aborted));
}

// A handler that throws out of run() while its thread polls for the next wait: the polling goes
// on (the io_context is run again), and the next wait completes when the clock gets there. The
// first wait's completion within 2 s shows that the thread polls; the next is 30 s later, so an
// alarm that went to sleep after the throw would not see the clock get there.
BOOST_FIXTURE_TEST_CASE(a_handler_that_throws_while_its_thread_polls_leaves_the_polling_on,
                        silent_spinning_fixture,
                        *boost::unit_test::timeout(120))
{
    std::promise<error_code> second;
    scheduler.async_wait(at(30s), [](error_code) { throw std::runtime_error("handler"); });
    scheduler.async_wait(at(60s), [&](error_code ec) { second.set_value(ec); });
    std::atomic<int> thrown{0};
    std::thread runner([&] {
        for (;;)
        {
            try
            {
                io.run_for(60s);
                return;
            }
            catch (const std::runtime_error&)
            {
                thrown.fetch_add(1);
            }
        }
    });
    const joined_on_exit joined{io, runner};
    BOOST_TEST_REQUIRE(io_running());
    sched::manual_clock::advance(30s);
    BOOST_TEST_REQUIRE(sched::test::within(2s, [&] { return thrown.load() == 1; }));
    sched::manual_clock::advance(30s);
    auto outcome = second.get_future();
    BOOST_TEST_REQUIRE((outcome.wait_for(2s) == std::future_status::ready));
    BOOST_TEST((outcome.get() == error_code()));
    runner.join();
}

// A wait's handler that runs long on the thread that is to poll for the next wait does not hold
// that wait up: the polling is handed on before the handler runs, and the io_context's other
// thread polls meanwhile (a review found the next wait held until the handler returned: the
// other thread, woken for it, found it polled for, and went back to sleep). The first wait's
// handler waits for the second's, which is due only once the clock moves on after it started.
BOOST_FIXTURE_TEST_CASE(another_thread_polls_for_the_next_wait_while_a_handler_runs,
                        silent_spinning_fixture,
                        *boost::unit_test::timeout(120))
{
    std::promise<void> first_started;
    std::promise<error_code> second;
    std::future<error_code> second_done = second.get_future();
    bool second_completed_meanwhile = false;
    scheduler.async_wait(at(30s), [&](error_code) {
        first_started.set_value();
        second_completed_meanwhile = second_done.wait_for(20s) == std::future_status::ready;
    });
    scheduler.async_wait(at(60s), [&](error_code ec) { second.set_value(ec); });
    std::thread one([this] { io.run_for(60s); });
    const joined_on_exit join_one{io, one};
    std::thread two([this] { io.run_for(60s); });
    const joined_on_exit join_two{io, two};
    BOOST_TEST_REQUIRE(io_running());
    sched::manual_clock::advance(30s);
    BOOST_TEST_REQUIRE((first_started.get_future().wait_for(20s) == std::future_status::ready));
    sched::manual_clock::advance(30s);
    one.join();
    two.join();
    BOOST_TEST(second_completed_meanwhile);
    BOOST_TEST_REQUIRE((second_done.wait_for(0s) == std::future_status::ready));
    BOOST_TEST((second_done.get() == error_code()));
}

BOOST_AUTO_TEST_SUITE_END()
