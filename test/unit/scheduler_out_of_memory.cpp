// The Asio front when memory runs out: a scenario of every kind of operation runs again and again,
// each time with one more of its allocations succeeding before one fails, on whichever thread it
// comes (the worker's count too), until a run needs no more. Whatever fails, no handler is
// invoked twice, every handler is destroyed, the io_context runs out of work and the pool ends
// (the sanitizer builds look for leaks, and the test's timeout for a hang). The periodic
// operation's tick is bound to the io_context itself, not to a strand: Asio's strand keeps a
// function whose scheduling failed, and stays locked with it until it is destroyed.
#include <sched/cancel_after.hpp>
#include <sched/deadline.hpp>
#include <sched/scheduler.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/test/unit_test.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <type_traits>

#include "support/failing_allocation.hpp"
#include "support/io_fixture.hpp"
#include "support/out_of_memory.hpp"

using namespace std::chrono_literals;
using sched::manual_clock;
using sched::test::attempt;
using sched::test::retry;

namespace {

// What became of one handler.
struct fate
{
    std::atomic<int> calls{0};
    std::weak_ptr<int> watch; // expires when the handler is destroyed
    bool started = false;     // the initiating function returned

    // A handler for any completion signature.
    auto handler()
    {
        auto alive = std::make_shared<int>(0);
        watch = alive;
        return [this, alive](auto&&...) {
            ++calls;
        };
    }
};

constexpr std::size_t operations = 6;

// The scenario on `Clock`, with times in multiples of `unit`, and the allocation after
// `succeeding` others failing; returns whether one did. On the manual clock, the test moves
// time and the pool's worker waits; on the steady clock, the io_context's alarm waits.
template <class Clock>
bool run_scenario(std::array<fate, operations>& fates,
                  long succeeding,
                  typename Clock::duration unit)
{
    std::optional<sched::test::manual_clock_fixture> manual_time;
    if constexpr (std::is_same_v<Clock, manual_clock>)
        manual_time.emplace();
    std::array handlers{fates[0].handler(), fates[1].handler(), fates[2].handler(),
                        fates[3].handler(), fates[4].handler(), fates[5].handler()};
    boost::asio::cancellation_signal stop_periodic;
    boost::asio::cancellation_signal cancel_wait;
    {
        sched::basic_scheduled_thread_pool<Clock> pool(sched::test::pool_fixture::single_worker());
        boost::asio::io_context io;
        sched::basic_scheduler<Clock> scheduler(io, pool);
        sched::basic_deadline<Clock> deadline(scheduler);
        sched::test::fail_allocation_after(succeeding);

        attempt([&] {
            scheduler.async_wait(unit, std::move(handlers[0]));
            fates[0].started = true;
        });
        attempt([&] {
            scheduler.async_schedule(
                0s, [] { return 1; }, std::move(handlers[1]));
            fates[1].started = true;
        });
        attempt([&] {
            scheduler.async_schedule_at_fixed_rate(
                0s, unit, boost::asio::bind_executor(io, [] {}),
                boost::asio::bind_cancellation_slot(stop_periodic.slot(), std::move(handlers[2])));
            fates[2].started = true;
        });
        attempt([&] {
            deadline.expires_after(unit / 2);
            deadline.async_wait(std::move(handlers[3]));
            fates[3].started = true;
            deadline.expires_after(2 * unit); // lazily: it goes back in the queue once
        });
        attempt([&] {
            scheduler.async_wait(5 * unit,
                                 sched::cancel_after(scheduler, unit, std::move(handlers[4])));
            fates[4].started = true;
        });
        attempt([&] {
            scheduler.async_wait(5 * unit, boost::asio::bind_cancellation_slot(
                                               cancel_wait.slot(), std::move(handlers[5])));
            fates[5].started = true;
        });
        cancel_wait.emit(boost::asio::cancellation_type::terminal);

        if constexpr (std::is_same_v<Clock, manual_clock>)
        {
            manual_clock::advance(unit);
            retry([&] { pool.submit([] {}).get(); }); // what fell due has run
            manual_clock::advance(9 * unit);          // all due, even a wait that lost its timeout
            retry([&] { pool.submit([] {}).get(); });
        }
        stop_periodic.emit(boost::asio::cancellation_type::terminal);
        retry([&] {
            io.restart();
            io.run(); // returns once every operation has completed
        });
    }
    return sched::test::disarm_allocation_failure();
}

// Operations pending far ahead (and one completed, its handler not run yet) when the io_context
// is destroyed first: every handler goes unrun, with the context. Returns whether an allocation
// failed.
bool run_abandoned(std::array<fate, operations>& fates, long succeeding)
{
    sched::test::manual_clock_fixture time;
    std::array handlers{fates[0].handler(), fates[1].handler(), fates[2].handler(),
                        fates[3].handler(), fates[4].handler(), fates[5].handler()};
    {
        sched::test::manual_pool pool(sched::test::pool_fixture::single_worker());
        {
            boost::asio::io_context io;
            sched::test::manual_scheduler scheduler(io, pool);
            sched::basic_deadline<manual_clock> deadline(scheduler);
            sched::test::fail_allocation_after(succeeding);

            attempt([&] { scheduler.async_wait(1h, std::move(handlers[0])); });
            attempt([&] {
                scheduler.async_schedule(
                    1h, [] {}, std::move(handlers[1]));
            });
            attempt([&] {
                scheduler.async_schedule_at_fixed_rate(
                    1h, 1h, boost::asio::bind_executor(io, [] {}), std::move(handlers[2]));
            });
            attempt([&] {
                deadline.expires_after(1h);
                deadline.async_wait(std::move(handlers[3])); // cancelled as the deadline goes
            });
            attempt([&] {
                scheduler.async_wait(2h,
                                     sched::cancel_after(scheduler, 1h, std::move(handlers[4])));
            });
            attempt([&] {
                scheduler.async_schedule(
                    0s, [] {}, std::move(handlers[5]));
            });
            retry([&] { pool.submit([] {}).get(); }); // the last has run; its handler waits
        }                          // the io_context goes first, with all that pending
        manual_clock::advance(3h); // nothing left to fire into the dead context
        retry([&] { pool.submit([] {}).get(); });
    }
    return sched::test::disarm_allocation_failure();
}

// Sweeps `scenario` over its allocations. With memory enough, every handler is invoked once if
// `invoked`, else none is.
template <class Scenario>
void sweep(Scenario scenario, bool invoked)
{
    sched::test::sweep_allocations([&](long succeeding) {
        std::array<fate, operations> fates;
        const bool failed = scenario(fates, succeeding);
        for (std::size_t i = 0; i < operations; ++i)
        {
            BOOST_TEST_CONTEXT("operation " << i << ", failing allocation " << succeeding)
            {
                BOOST_TEST(fates[i].calls.load() <= (invoked ? 1 : 0));
                if (!fates[i].started) // the initiating function threw
                    BOOST_TEST(fates[i].calls.load() == 0);
                if (!failed && invoked)
                    BOOST_TEST(fates[i].calls.load() == 1);
                BOOST_TEST(fates[i].watch.expired());
            }
        }
        return failed;
    });
}

} // namespace

BOOST_AUTO_TEST_SUITE(test_scheduler)

BOOST_AUTO_TEST_CASE(out_of_memory_anywhere_no_handler_runs_twice_or_is_lost,
                     *boost::unit_test::timeout(300))
{
    sweep([](auto& fates, long n) { return run_scenario<manual_clock>(fates, n, 1s); }, true);
}

// The same on the steady clock, where the io_context's timers wait for the waits.
BOOST_AUTO_TEST_CASE(out_of_memory_anywhere_on_the_steady_clock_no_handler_is_lost,
                     *boost::unit_test::timeout(300))
{
    sweep(
        [](auto& fates, long n) {
            return run_scenario<std::chrono::steady_clock>(fates, n, std::chrono::milliseconds(1));
        },
        true);
}

BOOST_AUTO_TEST_CASE(out_of_memory_an_io_context_destroyed_first_takes_every_handler_unrun,
                     *boost::unit_test::timeout(300))
{
    sweep(run_abandoned, false);
}

BOOST_AUTO_TEST_SUITE_END()
