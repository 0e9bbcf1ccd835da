#include <sched/error.hpp>
#include <sched/scheduled_future.hpp>
#include <sched/scheduled_thread_pool.hpp>

#include <sched/detail/parking.hpp>

#include <boost/asio/error.hpp>
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <future>
#include <latch>
#include <limits>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support/blocking_call.hpp"
#include "support/child_process.hpp"
#include "support/counter.hpp"
#include "support/millisecond_clock.hpp"
#include "support/pool_fixture.hpp"
#include "support/wait.hpp"

using namespace std::chrono_literals;
using sched::future_state;
using sched::manual_clock;
using sched::test::counter;
using sched::test::manual_future;
using sched::test::manual_pool;

namespace {

struct future_fixture : sched::test::pool_fixture
{
    manual_pool pool{2};
};

struct custom_error : std::runtime_error
{
    using std::runtime_error::runtime_error;
};

// Blocks until stop is requested on its token; returns how it ended.
std::string wait_for_stop(std::stop_token stop, counter& started)
{
    std::mutex mutex;
    std::condition_variable_any never;
    started.increment();
    std::unique_lock lock(mutex);
    never.wait(lock, stop, [] { return false; });
    return stop.stop_requested() ? "stopped" : "woken";
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(test_scheduled_future, future_fixture)

BOOST_AUTO_TEST_CASE(a_completed_task_is_normal_and_get_gives_its_value)
{
    auto f = pool.schedule(5s, [] { return std::string("done"); });
    BOOST_TEST((f.state() == future_state::pending));
    BOOST_TEST(!f.is_done());
    manual_clock::advance(5s);
    BOOST_TEST(f.get() == "done");
    BOOST_TEST((f.state() == future_state::normal));
    BOOST_TEST(f.is_done());
    BOOST_TEST(!f.is_cancelled());
    BOOST_TEST(&f.get() == &f.get()); // the same stored value every time
}

BOOST_AUTO_TEST_CASE(a_move_only_result_is_kept_in_the_future)
{
    auto f = pool.submit([] { return std::make_unique<int>(7); });
    BOOST_TEST(*f.get() == 7);
}

BOOST_AUTO_TEST_CASE(a_throwing_task_is_exceptional_and_get_rethrows_the_same_exception)
{
    auto f = pool.submit([]() -> int { throw custom_error("boom"); });
    BOOST_CHECK_EXCEPTION(f.get(), custom_error,
                          [](const custom_error& e) { return std::string(e.what()) == "boom"; });
    BOOST_TEST((f.state() == future_state::exceptional));
    BOOST_TEST(f.is_done());
    BOOST_TEST(!f.is_cancelled());
    BOOST_CHECK_THROW(f.get(), custom_error); // again: same outcome
}

BOOST_AUTO_TEST_CASE(cancel_before_the_run_gives_cancelled_and_get_throws_operation_aborted)
{
    counter ran;
    auto f = pool.schedule(5s, [&] { ran.increment(); });
    BOOST_TEST(f.cancel());
    BOOST_TEST((f.state() == future_state::cancelled));
    BOOST_TEST(f.is_cancelled());
    BOOST_TEST(f.is_done());
    BOOST_CHECK_EXCEPTION(f.get(), sched::cancelled_error, [](const sched::cancelled_error& e) {
        return e.code() == boost::asio::error::operation_aborted;
    });
    manual_clock::advance(10s);
    pool.submit([] {}).get(); // due now, after the cancelled task's due time
    BOOST_TEST(ran.value() == 0);
}

BOOST_AUTO_TEST_CASE(cancelling_twice_or_after_completion_returns_false_and_changes_nothing)
{
    auto cancelled = pool.schedule(5s, [] { return 1; });
    BOOST_TEST(cancelled.cancel());
    BOOST_TEST(!cancelled.cancel());
    BOOST_TEST(!cancelled.cancel(true));
    BOOST_TEST((cancelled.state() == future_state::cancelled));

    auto finished = pool.submit([] { return 2; });
    BOOST_TEST(finished.get() == 2);
    BOOST_TEST(!finished.cancel());
    BOOST_TEST(!finished.cancel(true));
    BOOST_TEST((finished.state() == future_state::normal));
    BOOST_TEST(finished.get() == 2);
}

BOOST_AUTO_TEST_CASE(cancel_with_interruption_requests_stop_of_a_running_task,
                     *boost::unit_test::timeout(60))
{
    counter started;
    counter stopped;
    auto f = pool.submit([&](std::stop_token stop) {
        std::string how = wait_for_stop(stop, started);
        if (how == "stopped")
            stopped.increment();
        return how;
    });
    BOOST_TEST_REQUIRE(started.wait_for_at_least(1));
    BOOST_TEST(f.cancel(true));
    // The running body sees the request now, not when the pool goes at the end of the test.
    BOOST_TEST(stopped.wait_for_at_least(1));
    BOOST_TEST((f.state() == future_state::interrupted));
    BOOST_TEST(f.is_cancelled());
    BOOST_CHECK_THROW(f.get(), sched::cancelled_error); // the run's result is discarded
    BOOST_TEST(!f.cancel(true));
}

BOOST_AUTO_TEST_CASE(cancel_without_interruption_lets_a_running_task_finish_but_drops_its_result,
                     *boost::unit_test::timeout(60))
{
    counter started;
    std::promise<void> release;
    auto released = release.get_future().share();
    counter finished;
    std::atomic<bool> asked_to_stop{false};
    auto f = pool.submit([&](std::stop_token stop) {
        started.increment();
        released.wait();
        asked_to_stop = stop.stop_requested();
        finished.increment();
        return 5;
    });
    BOOST_TEST_REQUIRE(started.wait_for_at_least(1));
    BOOST_TEST(f.cancel(false)); // still pending while it runs, as in Java
    BOOST_TEST((f.state() == future_state::cancelled));
    release.set_value();
    BOOST_TEST_REQUIRE(finished.wait_for_at_least(1));
    BOOST_TEST(!asked_to_stop); // only cancel(true) asks a running body to stop
    BOOST_CHECK_THROW(f.get(), sched::cancelled_error);
}

BOOST_AUTO_TEST_CASE(delay_is_the_time_left_on_the_pool_clock)
{
    auto f = pool.schedule(10s, [] {});
    BOOST_TEST((f.delay() == 10s));
    manual_clock::advance(4s);
    BOOST_TEST((f.delay() == 6s));
    BOOST_TEST(f.cancel());
    manual_clock::advance(10s);
    BOOST_TEST((f.delay() == -4s)); // negative once overdue
}

BOOST_AUTO_TEST_CASE(delay_saturates_for_a_task_due_at_the_dawn_of_time)
{
    auto f = pool.schedule_at(manual_clock::time_point::min(), [] { return 1; });
    BOOST_TEST(f.get() == 1); // at once
    manual_clock::advance(1s);
    BOOST_TEST((f.delay() == manual_clock::duration::min()));
}

BOOST_AUTO_TEST_CASE(delay_follows_a_periodic_task_from_run_to_run)
{
    counter runs;
    auto f = pool.schedule_at_fixed_rate(5s, 10s, [&] { runs.increment(); });
    BOOST_TEST((f.delay() == 5s));
    manual_clock::advance(5s);
    BOOST_TEST_REQUIRE(runs.wait_for_at_least(1));
    // Queued again, due at 15 s (while it ran: its last due time, 5 s).
    BOOST_TEST_REQUIRE(sched::test::eventually([&] { return f.delay() == 10s; }));
    BOOST_TEST(f.cancel());
    BOOST_TEST(pool.queue().empty()); // removed on cancel: read from the task itself now
    manual_clock::advance(1s);
    BOOST_TEST((f.delay() == 9s)); // its last due time
}

// The queue's lock is taken through the pool, which a destructor on another thread may take
// apart meanwhile: a read finds the task queued there, or finds its last due time.
BOOST_AUTO_TEST_CASE(delay_read_while_the_pool_goes_finds_the_due_time,
                     *boost::unit_test::timeout(120))
{
    std::vector<sched::scheduled_future<void>> futures;
    std::atomic<int> passes{0};
    std::atomic<int> wrong{0};
    std::atomic<bool> stop{false};
    std::vector<std::thread> readers;
    {
        sched::scheduled_thread_pool steady(1);
        for (int i = 0; i < 1000; ++i)
            futures.push_back(steady.schedule(1h + i * 1ms, [] {}));
        for (int r = 0; r < 2; ++r)
            readers.emplace_back([&] {
                while (!stop)
                {
                    for (const auto& f : futures)
                    {
                        const auto left = f.delay();
                        if (left < 50min || left > 1h + 1s)
                            ++wrong;
                    }
                    ++passes;
                }
            });
        BOOST_TEST_REQUIRE(sched::test::eventually([&] { return passes >= 2; }));
    } // destroyed as they read
    const int before = passes;
    BOOST_TEST_REQUIRE(sched::test::eventually([&] { return passes >= before + 2; }));
    stop = true;
    for (std::thread& reader : readers)
        reader.join();
    BOOST_TEST(wrong == 0);
    for (const auto& f : futures)
        BOOST_TEST(f.is_cancelled()); // dropped by the pool's shutdown_now()
}

BOOST_AUTO_TEST_CASE(is_periodic_tells_periodic_from_one_shot)
{
    auto one_shot = pool.schedule(1s, [] {});
    auto periodic = pool.schedule_at_fixed_rate(1s, 1s, [] {});
    BOOST_TEST(!one_shot.is_periodic());
    BOOST_TEST(periodic.is_periodic());
    periodic.cancel();
}

BOOST_AUTO_TEST_CASE(wait_for_times_out_on_a_task_not_yet_due)
{
    auto f = pool.schedule(10s, [] {});
    BOOST_TEST((f.wait_for(1ms) == std::future_status::timeout));
    BOOST_TEST((f.wait_until(std::chrono::steady_clock::now()) == std::future_status::timeout));
    manual_clock::advance(10s);
    BOOST_TEST((f.wait_for(std::chrono::hours::max()) == std::future_status::ready));
    BOOST_TEST((f.wait_for(0s) == std::future_status::ready));
}

// A NaN timeout or deadline is refused, as other waits' are (wait_until read a NaN deadline as the
// clock's epoch and timed out at once: a review's probe).
BOOST_AUTO_TEST_CASE(a_nan_timeout_or_deadline_throws_invalid_argument)
{
    auto f = pool.schedule(10s, [] {});
    const std::chrono::duration<double> nan(std::numeric_limits<double>::quiet_NaN());
    BOOST_CHECK_THROW((void)f.wait_for(nan), std::invalid_argument);
    BOOST_CHECK_THROW(
        (void)f.wait_until(
            std::chrono::time_point<std::chrono::steady_clock, std::chrono::duration<double>>(nan)),
        std::invalid_argument);
    BOOST_TEST(f.cancel());
}

BOOST_AUTO_TEST_CASE(copies_share_the_task)
{
    auto f = pool.schedule(5s, [] { return 3; });
    manual_future<int> copy = f;
    BOOST_TEST(copy.cancel());
    BOOST_TEST(f.is_cancelled());
    manual_future<int> moved = std::move(copy);
    BOOST_TEST(!copy.valid());
    BOOST_TEST(moved.is_cancelled());
}

// A connection that holds its timeout's future, kept alive by nothing but the timeout's own
// callable: cancelling the timeout destroys the callable, and with it the future being cancelled.
// The task goes with its last reference: a sanitizer sees a leak or a use after free.
BOOST_AUTO_TEST_CASE(a_future_that_its_own_callable_keeps_may_be_cancelled)
{
    struct connection
    {
        manual_future<void> timeout;
    };
    for (const bool interrupt : {false, true})
    {
        auto owner = std::make_shared<connection>();
        const std::weak_ptr<connection> watch = owner;
        connection* const raw = owner.get();
        raw->timeout = pool.schedule(5s, [owner] {});
        owner.reset();
        BOOST_TEST(raw->timeout.cancel(interrupt));
        BOOST_TEST(watch.expired());
    }
}

// Two threads cancel one future object at once (its thread safety allows it), one of them
// interrupting: one wins, and the task goes once, with the future's reference (a sanitizer checks
// that nothing is freed twice or leaked).
BOOST_AUTO_TEST_CASE(two_threads_cancelling_one_future_object_let_go_of_the_task_once,
                     *boost::unit_test::timeout(120))
{
    for (int i = 0; i < 500; ++i)
    {
        auto f = pool.schedule(5s, [] {});
        std::atomic<int> won{0};
        std::latch start(2);
        {
            const auto cancel = [&](bool interrupt) {
                start.arrive_and_wait();
                if (f.cancel(interrupt))
                    won.fetch_add(1);
            };
            std::jthread a(cancel, false);
            std::jthread b(cancel, true);
        }
        BOOST_TEST_REQUIRE(won.load() == 1);
        BOOST_TEST_REQUIRE(f.is_cancelled());
    }
}

BOOST_AUTO_TEST_CASE(an_empty_future_throws_no_state)
{
    manual_future<int> empty;
    BOOST_TEST(!empty.valid());
    const auto no_state = [](const std::future_error& e) {
        return e.code() == std::future_errc::no_state;
    };
    BOOST_CHECK_EXCEPTION(empty.get(), std::future_error, no_state);
    BOOST_CHECK_EXCEPTION(empty.wait(), std::future_error, no_state);
    BOOST_CHECK_EXCEPTION(empty.cancel(), std::future_error, no_state);
    BOOST_CHECK_EXCEPTION(empty.is_done(), std::future_error, no_state);
    BOOST_CHECK_EXCEPTION(empty.delay(), std::future_error, no_state);
}

BOOST_AUTO_TEST_CASE(get_blocks_until_completion_from_another_thread,
                     *boost::unit_test::timeout(60))
{
    auto f = pool.schedule(5s, [] { return 11; });
    sched::test::blocking_call waiter([f] { return f.get(); });
    BOOST_TEST_REQUIRE(waiter.wait_until_blocked());
    manual_clock::advance(5s);
    BOOST_TEST(waiter.get() == 11);
}

BOOST_AUTO_TEST_CASE(get_of_a_cancelled_task_wakes_a_blocked_waiter, *boost::unit_test::timeout(60))
{
    auto f = pool.schedule(5s, [] { return 11; });
    sched::test::blocking_call waiter([f] {
        try
        {
            (void)f.get();
            return std::string("value");
        }
        catch (const sched::cancelled_error&)
        {
            return std::string("cancelled");
        }
    });
    BOOST_TEST_REQUIRE(waiter.wait_until_blocked());
    BOOST_TEST(f.cancel());
    BOOST_TEST(waiter.get() == "cancelled");
}

// A deadline a thousand years ahead on a clock coarser than nanoseconds: the standard library's
// wait on it overflowed, each wait ended at once, and the waiter spun.
BOOST_AUTO_TEST_CASE(wait_until_a_deadline_centuries_ahead_on_a_coarse_clock_sleeps,
                     *boost::unit_test::timeout(60))
{
    using clock = sched::test::millisecond_clock;
    auto f = pool.schedule(5s, [] { return 11; });
    sched::test::blocking_call waiter(
        [f] { return f.wait_until(clock::now() + sched::test::millennium); });
    BOOST_TEST_REQUIRE(waiter.wait_until_blocked(0, 10s));
    manual_clock::advance(5s);
    BOOST_TEST((waiter.get() == std::future_status::ready));
}

// A deadline in hours on the steady clock, near the end of its range: the standard library's
// conversion to nanoseconds overflowed there too.
BOOST_AUTO_TEST_CASE(wait_until_a_far_deadline_in_a_coarse_unit_of_the_steady_clock_sleeps,
                     *boost::unit_test::timeout(60))
{
    using hours_point = std::chrono::time_point<std::chrono::steady_clock, std::chrono::hours>;
    auto f = pool.schedule(5s, [] { return 11; });
    sched::test::blocking_call waiter(
        [f] { return f.wait_until(hours_point::max() - std::chrono::hours(1)); });
    BOOST_TEST_REQUIRE(waiter.wait_until_blocked(0, 10s));
    manual_clock::advance(5s);
    BOOST_TEST((waiter.get() == std::future_status::ready));
}

// A future's wait_until() takes no deadline on the manual clock (nothing would wake it as that
// clock moves: it waited in real time), and does take one on a real clock.
template <class Future, class TimePoint>
concept waits_until = requires(const Future& f, TimePoint t)
{
    f.wait_until(t);
};

BOOST_AUTO_TEST_CASE(wait_until_takes_no_deadline_on_the_manual_clock)
{
    constexpr bool real = waits_until<manual_future<int>, std::chrono::steady_clock::time_point>;
    constexpr bool manual = waits_until<manual_future<int>, manual_clock::time_point>;
    BOOST_TEST(real);
    BOOST_TEST(!manual);
}

#if defined(__linux__)
// A thread still waiting on a future as the process exits, its pool left running: the static
// destructors run and the process ends. Before, the table of the slots that waiters sleep in was
// destroyed with them, and destroying a condition variable that a thread waits on blocked exit()
// for ever (a review's probe).
BOOST_TEST_DECORATOR(*boost::unit_test::precondition(sched::test::child_starts_threads))
BOOST_AUTO_TEST_CASE(a_thread_waiting_on_a_future_does_not_hold_the_process_exit,
                     *boost::unit_test::timeout(120))
{
    BOOST_TEST(sched::test::in_child([] {
        // Static, so that the leak checker sees them reachable.
        static auto* const pool = new sched::scheduled_thread_pool(1);
        static const auto future = pool->schedule(1h, [] {});
        static auto* const waiter = new sched::test::blocking_call<int>([] {
            future.wait();
            return 0;
        });
        if (!waiter->wait_until_blocked())
            return 1;
        std::exit(0); // a hang here is killed after 20 s, and fails the test
    }));
}

// A child forked while threads of the parent wait for tasks waits for its own, and its pool's
// worker wakes it. The parent's threads wait in every slot that waiters park in. Before, the
// child's slots still counted the parent's waiters, which it does not have, and glibc's
// notify_all() waited for them for ever: a child's worker hung as it completed a task.
BOOST_TEST_DECORATOR(*boost::unit_test::precondition(sched::test::child_starts_threads))
BOOST_AUTO_TEST_CASE(a_child_forked_while_threads_wait_for_tasks_can_wait_for_its_own,
                     *boost::unit_test::timeout(120))
{
    std::set<sched::detail::parking_slot*> slots;
    for (std::uintptr_t address = 16; address <= 16 * 4096; address += 16)
        slots.insert(&sched::detail::parking_slot_for(reinterpret_cast<const void*>(address)));
    std::atomic<bool> released{false};
    std::vector<std::unique_ptr<sched::test::blocking_call<int>>> waiters;
    for (sched::detail::parking_slot* slot : slots)
    {
        waiters.push_back(std::make_unique<sched::test::blocking_call<int>>([slot, &released] {
            std::unique_lock lock(slot->mutex);
            slot->completed.wait(lock, [&] { return released.load(); });
            return 0;
        }));
    }
    for (const auto& waiter : waiters)
        BOOST_TEST_REQUIRE(waiter->wait_until_blocked());
    BOOST_TEST(sched::test::in_child([&slots] {
        for (sched::detail::parking_slot* slot : slots) // as each slot's next completion does
        {
            {
                const std::lock_guard lock(slot->mutex);
            }
            slot->completed.notify_all();
        }
        sched::scheduled_thread_pool pool(1);
        int ran = 0;
        for (int i = 0; i < 100; ++i)
            ran += pool.schedule(1ms, [] { return 1; }).get(); // it waits: the task is not due
        return ran == 100 ? 0 : 1;
    }));
    released = true;
    for (sched::detail::parking_slot* slot : slots)
    {
        {
            const std::lock_guard lock(slot->mutex);
        }
        slot->completed.notify_all();
    }
    for (const auto& waiter : waiters)
        BOOST_TEST(waiter->get() == 0);
}
#endif

BOOST_AUTO_TEST_SUITE_END()
