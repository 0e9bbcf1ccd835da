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
#include <memory>
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

BOOST_AUTO_TEST_SUITE_END()
