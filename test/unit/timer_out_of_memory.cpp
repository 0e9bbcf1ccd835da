// sched::basic_timer when memory runs out: a scenario of every kind of timer task runs again and
// again, each time with one more of its allocations succeeding before one fails, on whichever
// thread it comes (the timer's thread too), until a run needs no more. Whatever fails, a schedule
// call that throws leaves its task virgin and unrun, no one-shot task runs twice, a periodic task
// that cannot go on ends and the error handler hears why, and the timer's thread lives on.

#include <sched/manual_clock.hpp>
#include <sched/timer.hpp>

#include <boost/test/unit_test.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <exception>
#include <memory>
#include <new>
#include <thread>
#include <vector>

#include "support/counter.hpp"
#include "support/failing_allocation.hpp"
#include "support/manual_clock_fixture.hpp"
#include "support/out_of_memory.hpp"
#include "support/wait.hpp"

using namespace std::chrono_literals;
using sched::manual_clock;
using sched::timer_task_state;
using sched::test::attempt;
using sched::test::retry;

namespace {

using manual_timer = sched::basic_timer<manual_clock>;
using manual_task = sched::basic_timer_task<manual_clock>;

constexpr std::size_t one_shots = 2;

struct outcome
{
    std::array<std::atomic<int>, one_shots> runs{};
    std::array<timer_task_state, one_shots> states{};
    std::array<bool, one_shots> scheduled{};           // the call returned
    std::array<timer_task_state, 2> periodic_states{}; // at fixed rate, with fixed delay
    std::atomic<int> errors{0};                        // what the error handler heard
    bool caught_up = false;                            // the timer's thread got past what fell due
    bool failed = false;                               // an allocation failed
};

void run_scenario(outcome& out, long succeeding)
{
    sched::test::manual_clock_fixture time;
    manual_task first([&runs = out.runs[0]] { ++runs; });
    manual_task second([&runs = out.runs[1]] { ++runs; });
    manual_task rate([] {});
    manual_task delay([] {});
    sched::test::counter caught_up;
    manual_task sentinel([&] { caught_up.increment(); });
    {
        manual_timer timer("oom", [&](std::exception_ptr) noexcept { ++out.errors; });
        sched::test::fail_allocation_after(succeeding);

        attempt([&] {
            timer.schedule(first, 0s);
            out.scheduled[0] = true;
        });
        attempt([&] {
            timer.schedule(second, 1s);
            out.scheduled[1] = true;
        });
        attempt([&] { timer.schedule_at_fixed_rate(rate, 0s, 1s); });
        attempt([&] { timer.schedule(delay, 500ms, 1s); });

        manual_clock::advance(3s);
        retry([&] { timer.schedule(sentinel, 0s); }); // after what fell due
        out.caught_up = caught_up.wait_for_at_least(1);
        out.states = {first.state(), second.state()};
        out.periodic_states = {rate.state(), delay.state()};
        timer.cancel();
    }
    out.failed = sched::test::disarm_allocation_failure();
}

} // namespace

BOOST_AUTO_TEST_SUITE(test_timer)

BOOST_AUTO_TEST_CASE(out_of_memory_anywhere_no_timer_task_runs_twice_and_the_thread_lives_on,
                     *boost::unit_test::timeout(300))
{
    sched::test::sweep_allocations([](long succeeding) {
        outcome out;
        run_scenario(out, succeeding);
        BOOST_TEST_CONTEXT("failing allocation " << succeeding)
        {
            for (std::size_t i = 0; i < one_shots; ++i)
            {
                if (out.scheduled[i]) // due by the end: it ran once
                {
                    BOOST_TEST(out.runs[i].load() == 1);
                    BOOST_TEST((out.states[i] == timer_task_state::executed));
                }
                else // the call threw: the task is as it was
                {
                    BOOST_TEST(out.runs[i].load() == 0);
                    BOOST_TEST((out.states[i] == timer_task_state::virgin));
                }
            }
            BOOST_TEST(out.caught_up); // the thread lives on
            for (const timer_task_state s : out.periodic_states)
            {
                // Virgin if its call threw; executed if it could not be queued again, and then
                // the error handler heard of it; else still scheduled.
                BOOST_TEST((s != timer_task_state::cancelled));
                if (s == timer_task_state::executed)
                    BOOST_TEST(out.errors.load() > 0);
            }
            if (!out.failed)
            {
                BOOST_TEST((out.periodic_states[0] == timer_task_state::scheduled));
                BOOST_TEST((out.periodic_states[1] == timer_task_state::scheduled));
                BOOST_TEST(out.errors.load() == 0);
            }
        }
        return out.failed;
    });
}

// A task cancelled while its schedule is under way, which then finds no memory to queue it, lets
// go of its callable as the schedule gives the task back: cancelled, it can never run.
BOOST_AUTO_TEST_CASE(a_task_cancelled_as_its_schedule_runs_out_of_memory_lets_go_of_its_callable)
{
    sched::test::manual_clock_fixture time;
    manual_timer timer;
    std::vector<manual_task> fillers; // the heap, filled to its capacity
    for (bool full = false; !full && fillers.size() < 100'000;)
    {
        fillers.emplace_back([] {});
        sched::test::fail_next_aligned_allocation(); // the heap's growth, and nothing else
        try
        {
            timer.schedule(fillers.back(), 1h);
        }
        catch (const std::bad_alloc&)
        {
            full = true;
        }
    }
    BOOST_TEST_REQUIRE(!sched::test::aligned_allocation_failure_armed());
    std::weak_ptr<int> seen;
    auto held = std::make_shared<int>(0);
    seen = held;
    manual_task task([held = std::move(held)] {});
    held.reset();
    std::atomic<bool> cancelled{false};
    bool threw = false;
    std::thread scheduling([&] {
        sched::test::fail_next_aligned_allocation(true, &cancelled); // the growth, once cancelled
        try
        {
            timer.schedule(task, 1h);
        }
        catch (const std::bad_alloc&)
        {
            threw = true;
        }
    });
    BOOST_TEST(sched::test::eventually(
        [&] { return task.state() == timer_task_state::scheduled; })); // under way
    const bool was_scheduled = task.cancel();
    cancelled = true;
    scheduling.join();
    BOOST_TEST(was_scheduled);
    BOOST_TEST(threw);
    BOOST_TEST((task.state() == timer_task_state::cancelled));
    BOOST_TEST(seen.expired());
}

BOOST_AUTO_TEST_SUITE_END()
