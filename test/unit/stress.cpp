// Many threads at once on the real clock. Each test counts that every task ran exactly once or
// that its owner was told it did not; none asserts on timing.

#include <sched/error.hpp>
#include <sched/scheduled_thread_pool.hpp>

#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <memory>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "support/wait.hpp"

using namespace std::chrono_literals;

namespace {

sched::pool_options pool_of(std::size_t threads)
{
    sched::pool_options options;
    options.threads = threads;
    return options;
}

// A pool whose far tier takes tasks due 1 ms or more ahead, so that tasks due
// within a few milliseconds cross it: they go to the producers' shards and move back as they
// fall due, while the producers push and cancel around them.
sched::pool_options with_a_short_far_tier(std::size_t threads)
{
    sched::pool_options options = pool_of(threads);
    options.far_tier_horizon = 1ms;
    return options;
}

// Two producers schedule one-shot tasks due within `max_delay` and cancel every third: each runs
// exactly once, or its future says it was cancelled.
void check_one_shot_tasks_run_once_or_are_cancelled(const sched::pool_options& options,
                                                    std::chrono::microseconds max_delay)
{
    constexpr int producers = 2;
    constexpr int per_producer = 25000;
    constexpr int total = producers * per_producer;
    sched::scheduled_thread_pool pool(options);
    std::vector<std::atomic<int>> runs(total);
    std::vector<sched::scheduled_future<int>> futures(total);
    std::vector<char> cancelled(total, 0);
    std::vector<std::thread> threads;
    for (int p = 0; p < producers; ++p)
    {
        threads.emplace_back([&, p] {
            std::mt19937 random(static_cast<unsigned>(p));
            std::uniform_int_distribution<int> delay_us(0, static_cast<int>(max_delay.count()));
            for (int i = 0; i < per_producer; ++i)
            {
                const int id = p * per_producer + i;
                futures[static_cast<std::size_t>(id)] =
                    pool.schedule(std::chrono::microseconds(delay_us(random)), [&runs, id] {
                        runs[static_cast<std::size_t>(id)].fetch_add(1);
                        return id;
                    });
                if (i % 3 == 0)
                    cancelled[static_cast<std::size_t>(id)] =
                        futures[static_cast<std::size_t>(id)].cancel() ? 1 : 0;
            }
        });
    }
    for (auto& t : threads)
        t.join();
    int ran = 0, told_cancelled = 0;
    for (int id = 0; id < total; ++id)
    {
        auto& f = futures[static_cast<std::size_t>(id)];
        f.wait();
        const int count = runs[static_cast<std::size_t>(id)].load();
        BOOST_TEST_REQUIRE(count <= 1);
        if (cancelled[static_cast<std::size_t>(id)])
        {
            BOOST_TEST_REQUIRE(f.is_cancelled());
            ++told_cancelled;
        }
        else
        {
            BOOST_TEST_REQUIRE(f.get() == id); // not cancelled: it ran and completed
            BOOST_TEST_REQUIRE(count == 1);
            ++ran;
        }
    }
    BOOST_TEST(ran > 0); // both outcomes were checked
    BOOST_TEST(told_cancelled > 0);
    pool.shutdown();
    BOOST_TEST(pool.await_termination(60s));
    BOOST_TEST(pool.queue().empty());
}

// Two producers schedule tasks due within `max_delay` while the pool shuts down (once they are
// half-way), and cancel every seventh: every accepted task that was not cancelled runs exactly
// once (delayed tasks survive shutdown by default), a cancelled one at most once (a cancel that
// races with its start lets it finish, as Java's does), a rejected one never, and the pool
// terminates, also when a cancel takes its last task.
void check_tasks_scheduled_while_the_pool_shuts_down(const sched::pool_options& options,
                                                     int max_delay_us)
{
    constexpr int per_producer = 2000;
    int accepted_in_all = 0, rejected_in_all = 0;
    for (int round = 0; round < 20; ++round)
    {
        auto pool = std::make_unique<sched::scheduled_thread_pool>(options);
        std::vector<std::atomic<int>> runs(2 * per_producer);
        std::atomic<int> scheduled{0}; // calls made, accepted or not
        std::vector<std::vector<std::pair<int, sched::scheduled_future<void>>>> accepted(2);
        std::vector<std::vector<int>> rejected(2);
        std::vector<std::thread> producers;
        for (int p = 0; p < 2; ++p)
        {
            producers.emplace_back([&, p] {
                for (int i = 0; i < per_producer; ++i)
                {
                    const int id = p * per_producer + i;
                    try
                    {
                        auto& list = accepted[static_cast<std::size_t>(p)];
                        list.emplace_back(
                            id,
                            pool->schedule(std::chrono::microseconds(i * 7919 % (max_delay_us + 1)),
                                           [&runs, id] { runs[static_cast<std::size_t>(id)]++; }));
                        if (i % 7 == 0)
                            list.back().second.cancel();
                    }
                    catch (const sched::rejected_execution&)
                    {
                        rejected[static_cast<std::size_t>(p)].push_back(id);
                    }
                    ++scheduled;
                }
            });
        }
        BOOST_TEST_REQUIRE(sched::test::eventually([&] { return scheduled >= per_producer; }));
        pool->shutdown();
        for (auto& t : producers)
            t.join();
        BOOST_TEST_REQUIRE(pool->await_termination(60s));
        for (auto& list : accepted)
        {
            for (auto& [id, f] : list)
            {
                BOOST_TEST_REQUIRE(f.is_done());
                const int ran = runs[static_cast<std::size_t>(id)].load();
                if (f.is_cancelled())
                    BOOST_TEST_REQUIRE(ran <= 1);
                else
                {
                    f.get();
                    BOOST_TEST_REQUIRE(ran == 1);
                }
            }
            accepted_in_all += static_cast<int>(list.size());
        }
        for (const auto& list : rejected)
        {
            for (const int id : list)
                BOOST_TEST_REQUIRE(runs[static_cast<std::size_t>(id)].load() == 0);
            rejected_in_all += static_cast<int>(list.size());
        }
    }
    // Both sides of the race were exercised: tasks accepted before the shutdown, and tasks
    // rejected after it.
    BOOST_TEST(accepted_in_all > 0);
    BOOST_TEST(rejected_in_all > 0);
}

} // namespace

BOOST_AUTO_TEST_SUITE(test_stress)

BOOST_AUTO_TEST_CASE(one_shot_tasks_run_once_or_are_cancelled, *boost::unit_test::timeout(600))
{
    check_one_shot_tasks_run_once_or_are_cancelled(pool_of(4), 2000us);
}

BOOST_AUTO_TEST_CASE(one_shot_tasks_crossing_the_far_tier_run_once_or_are_cancelled,
                     *boost::unit_test::timeout(600))
{
    check_one_shot_tasks_run_once_or_are_cancelled(with_a_short_far_tier(4), 5000us);
}

BOOST_AUTO_TEST_CASE(periodic_tasks_cancelled_from_other_threads_stop_and_never_overlap,
                     *boost::unit_test::timeout(600))
{
    constexpr int tasks = 200;
    sched::scheduled_thread_pool pool(4);
    struct state
    {
        std::atomic<int> runs{0};
        std::atomic<int> active{0};
        std::atomic<bool> overlapped{false};
    };
    std::vector<state> states(tasks);
    std::vector<sched::scheduled_future<void>> futures;
    for (int i = 0; i < tasks; ++i)
    {
        auto body = [&s = states[static_cast<std::size_t>(i)]] {
            if (s.active.fetch_add(1) != 0)
                s.overlapped.store(true);
            s.runs.fetch_add(1);
            s.active.fetch_sub(1);
        };
        const auto period = std::chrono::microseconds(100 + 10 * i);
        futures.push_back(i % 2 == 0 ? pool.schedule_at_fixed_rate(0s, period, body)
                                     : pool.schedule_with_fixed_delay(0s, period, body));
    }
    // Let every task run a few times, then cancel them from two threads at once.
    for (auto& s : states)
        BOOST_TEST_REQUIRE(sched::test::eventually([&] { return s.runs.load() >= 3; }));
    std::atomic<int> cancels{0}; // Boost.Test's assertions are for the main thread only
    std::thread first([&] {
        for (int i = 0; i < tasks; i += 2)
            cancels += futures[static_cast<std::size_t>(i)].cancel() ? 1 : 0;
    });
    std::thread second([&] {
        for (int i = 1; i < tasks; i += 2)
            cancels += futures[static_cast<std::size_t>(i)].cancel(true) ? 1 : 0;
    });
    first.join();
    second.join();
    BOOST_TEST(cancels.load() == tasks);
    // They stop: once the runs in progress end, none is queued again. (Checked before shutdown(),
    // which would end them anyway.)
    BOOST_TEST_REQUIRE(sched::test::eventually([&] { return pool.queue().empty(); }));
    pool.shutdown(); // nothing left: terminates once the runs in progress end
    BOOST_TEST(pool.await_termination(60s));
    BOOST_TEST(pool.queue().empty());
    for (std::size_t i = 0; i < states.size(); ++i)
    {
        BOOST_TEST_REQUIRE(futures[i].is_cancelled());
        BOOST_TEST_REQUIRE(!states[i].overlapped.load());
    }
}

// A pool destroyed as soon as it has terminated, while other threads are still inside cancel()
// calls on its futures and releasing a tracked executor: each call is done with the pool before
// the pool can terminate (the sanitizer builds see any access after). Every task runs at most
// once and is done, ran or cancelled.
BOOST_AUTO_TEST_CASE(pools_destroyed_as_they_terminate_outlast_the_calls_under_way,
                     *boost::unit_test::timeout(600))
{
    constexpr int rounds = 200;
    constexpr int tasks = 8;
    for (int round = 0; round < rounds; ++round)
    {
        auto pool = std::make_unique<sched::scheduled_thread_pool>(1);
        std::vector<std::atomic<int>> runs(tasks);
        std::vector<sched::scheduled_future<void>> futures;
        for (int i = 0; i < tasks; ++i) // half due now, half in an hour
            futures.push_back(pool->schedule(i % 2 == 0 ? 0h : 1h, [&runs, i] { ++runs[i]; }));
        auto tracked = boost::asio::prefer(pool->get_executor(),
                                           boost::asio::execution::outstanding_work.tracked);
        std::atomic<bool> go{false};
        std::atomic<int> cancels{0};
        std::thread canceller([&] {
            while (!go.load())
                std::this_thread::yield();
            for (int i = 0; i < tasks; ++i)
                cancels +=
                    futures[static_cast<std::size_t>(i)].cancel((i + round) % 3 == 0) ? 1 : 0;
        });
        std::thread releaser([&go, executor = std::move(tracked)]() mutable {
            while (!go.load())
                std::this_thread::yield();
            const auto released = std::move(executor);
        });
        pool->shutdown(); // the tasks due in an hour keep it alive until cancelled
        go.store(true);
        pool->await_termination();
        pool.reset();
        canceller.join();
        releaser.join();
        int cancelled = 0;
        for (std::size_t i = 0; i < futures.size(); ++i)
        {
            BOOST_TEST_REQUIRE(futures[i].is_done());
            BOOST_TEST_REQUIRE(runs[i].load() <= 1);
            BOOST_TEST_REQUIRE((runs[i].load() == 1 || futures[i].is_cancelled()));
            cancelled += futures[i].is_cancelled() ? 1 : 0;
        }
        BOOST_TEST_REQUIRE(cancels.load() == cancelled);
    }
}

BOOST_AUTO_TEST_CASE(tasks_scheduled_while_the_pool_shuts_down_run_or_are_rejected,
                     *boost::unit_test::timeout(600))
{
    check_tasks_scheduled_while_the_pool_shuts_down(pool_of(2), 49);
}

BOOST_AUTO_TEST_CASE(tasks_crossing_the_far_tier_while_the_pool_shuts_down_run_or_are_rejected,
                     *boost::unit_test::timeout(600))
{
    check_tasks_scheduled_while_the_pool_shuts_down(with_a_short_far_tier(2), 5000);
}

BOOST_AUTO_TEST_SUITE_END()
