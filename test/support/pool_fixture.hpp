#ifndef SCHED_TEST_SUPPORT_POOL_FIXTURE_HPP
#define SCHED_TEST_SUPPORT_POOL_FIXTURE_HPP

#include <sched/manual_clock.hpp>
#include <sched/scheduled_thread_pool.hpp>

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <exception>
#include <future>

#include "support/counter.hpp"
#include "support/gate.hpp"
#include "support/manual_clock_fixture.hpp"

namespace sched::test {

using manual_pool = basic_scheduled_thread_pool<manual_clock>;

template <class R>
using manual_future = basic_scheduled_future<R, manual_clock>;

// A one-worker pool's hooks: before_execute, once entered, blocks until leave is opened;
// after_execute counts its calls.
struct blocking_hooks
{
    counter entered;
    gate leave;
    counter after;

    pool_options options()
    {
        pool_options o;
        o.threads = 1;
        o.before_execute = [this] {
            entered.increment();
            leave.wait();
        };
        o.after_execute = [this](std::exception_ptr) {
            after.increment();
        };
        return o;
    }
};

struct pool_fixture : manual_clock_fixture
{
    // On a one-worker pool: returns once every task due before now has run. A task due now comes
    // out after every task due earlier (and every earlier push due now), and one worker runs
    // tasks one after another. A pool that never gets there fails the test rather than hang it.
    static void settle(manual_pool& pool)
    {
        const manual_future<void> settled = pool.submit([] {});
        BOOST_TEST_REQUIRE(
            (settled.wait_for(std::chrono::seconds(60)) == std::future_status::ready));
        settled.get();
    }

    static pool_options single_worker()
    {
        pool_options options;
        options.threads = 1;
        return options;
    }
};

} // namespace sched::test

#endif
