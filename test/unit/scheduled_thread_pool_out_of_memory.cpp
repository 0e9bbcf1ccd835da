// The pool when memory runs out: a scenario of every kind of task runs again and again, each time
// with one more of its allocations succeeding before one fails, on whichever thread it comes
// (the worker's count too), until a run needs no more. Whatever fails, a call that throws
// schedules nothing, every future obtained ends up done (none is left pending forever), no
// one-shot task runs twice, every executor function runs or is destroyed once, and the pool
// terminates (the sanitizer builds look for leaks, and the test's timeout for a hang).
#include <sched/scheduled_thread_pool.hpp>

#include <boost/asio/post.hpp>
#include <boost/test/unit_test.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <new>
#include <optional>
#include <vector>

#include "support/failing_allocation.hpp"
#include "support/out_of_memory.hpp"
#include "support/pool_fixture.hpp"

using namespace std::chrono_literals;
using sched::manual_clock;
using sched::test::attempt;
using sched::test::manual_future;
using sched::test::manual_pool;
using sched::test::retry;

namespace {

constexpr std::size_t one_shots = 4;

struct outcome
{
    std::vector<manual_future<void>> futures; // every one obtained
    std::array<std::atomic<int>, one_shots> runs{};
    std::array<bool, one_shots> scheduled{}; // the call returned
    std::atomic<int> function_runs{0};
    std::weak_ptr<int> function; // expires when the executor function is destroyed
    bool failed = false;         // an allocation failed
};

void run_scenario(outcome& out, long succeeding)
{
    sched::test::manual_clock_fixture time;
    out.futures.reserve(16);
    auto alive = std::make_shared<int>(0);
    out.function = alive;
    {
        manual_pool pool(sched::test::pool_fixture::single_worker());
        const auto one_shot = [&](std::size_t i) {
            return [&runs = out.runs[i]] {
                ++runs;
            };
        };
        const auto keep = [&](manual_future<void> f) {
            out.futures.push_back(std::move(f));
        };
        sched::test::fail_allocation_after(succeeding);

        attempt([&] {
            keep(pool.schedule(0s, one_shot(0)));
            out.scheduled[0] = true;
        });
        attempt([&] {
            keep(pool.schedule(1s, one_shot(1)));
            out.scheduled[1] = true;
        });
        attempt([&] {
            keep(pool.submit(one_shot(2)));
            out.scheduled[2] = true;
        });
        attempt([&] {
            manual_future<void> doomed = pool.schedule(2s, one_shot(3));
            out.scheduled[3] = true;
            doomed.cancel(false);
            keep(std::move(doomed));
        });
        attempt([&] { keep(pool.schedule(1h, [] {})); }); // handed back by shutdown_now()
        attempt([&] { keep(pool.schedule_at_fixed_rate(0s, 1s, [] {})); });
        attempt([&] { keep(pool.schedule_with_fixed_delay(500ms, 1s, [] {})); });
        attempt([&] {
            boost::asio::post(pool.get_executor(), [&runs = out.function_runs, alive] { ++runs; });
        });
        alive.reset();

        manual_clock::advance(1s);
        retry([&] { sched::test::pool_fixture::settle(pool); });
        manual_clock::advance(5s);
        retry([&] { sched::test::pool_fixture::settle(pool); });
        retry([&] { (void)pool.shutdown_now(); }); // the handles dropped cancel their tasks
        pool.await_termination();
    }
    out.failed = sched::test::disarm_allocation_failure();
}

} // namespace

BOOST_AUTO_TEST_SUITE(test_scheduled_thread_pool)

BOOST_AUTO_TEST_CASE(out_of_memory_anywhere_no_task_runs_twice_or_is_lost,
                     *boost::unit_test::timeout(300))
{
    sched::test::sweep_allocations([](long succeeding) {
        outcome out;
        run_scenario(out, succeeding);
        BOOST_TEST_CONTEXT("failing allocation " << succeeding)
        {
            for (const manual_future<void>& f : out.futures)
                BOOST_TEST(f.is_done());
            for (std::size_t i = 0; i < one_shots; ++i)
            {
                BOOST_TEST(out.runs[i].load() <= 1);
                if (!out.scheduled[i]) // the call threw: nothing was scheduled
                    BOOST_TEST(out.runs[i].load() == 0);
            }
            BOOST_TEST(out.runs[3].load() == 0); // cancelled before it was due
            BOOST_TEST(out.function_runs.load() <= 1);
            BOOST_TEST(out.function.expired());
            if (!out.failed) // with memory enough, everything ran (the cancelled one did not)
            {
                BOOST_TEST(out.futures.size() == 7u);
                BOOST_TEST(out.runs[0].load() + out.runs[1].load() + out.runs[2].load() == 3);
                BOOST_TEST(out.function_runs.load() == 1);
            }
        }
        return out.failed;
    });
}

// A worker that cannot start (the allocation of its thread fails) fails the constructor, after
// an earlier worker's on_thread_start has queued a task: the task is cancelled (its future told,
// its callable destroyed), not left pending for ever.
BOOST_AUTO_TEST_CASE(a_task_queued_while_the_constructor_fails_is_cancelled,
                     *boost::unit_test::timeout(60))
{
    using sched::scheduled_thread_pool;
    // The allocations this thread makes to construct a pool of one worker; the next, for a pool
    // of two, is the second worker's thread.
    int one_worker = 0;
    {
        sched::pool_options options;
        options.threads = 1;
        const std::size_t before = sched::test::allocations_on_this_thread();
        scheduled_thread_pool pool(std::move(options));
        one_worker = static_cast<int>(sched::test::allocations_on_this_thread() - before);
    }

    // The hook reaches the pool being constructed through the storage it is constructed in.
    alignas(scheduled_thread_pool) std::byte storage[sizeof(scheduled_thread_pool)];
    std::atomic<bool> queued{false};
    std::optional<sched::scheduled_future<void>> future;
    auto alive = std::make_shared<int>(0);
    std::weak_ptr<int> callable = alive;
    sched::pool_options options;
    options.threads = 2;
    options.on_thread_start = [&](std::size_t worker) {
        if (worker != 0)
            return;
        auto* pool = std::launder(reinterpret_cast<scheduled_thread_pool*>(storage));
        future = pool->schedule(1h, [alive = std::move(alive)] {});
        queued = true;
    };
    sched::test::fail_allocation_of_at_least(1, one_worker, &queued);
    BOOST_CHECK_THROW(new (storage) scheduled_thread_pool(std::move(options)), std::bad_alloc);
    BOOST_TEST(!sched::test::large_allocation_failure_armed());
    BOOST_REQUIRE(future.has_value());
    BOOST_TEST(future->is_done());
    BOOST_TEST((future->state() == sched::future_state::cancelled));
    BOOST_TEST(callable.expired());
}

BOOST_AUTO_TEST_SUITE_END()
