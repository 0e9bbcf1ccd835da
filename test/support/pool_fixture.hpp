#ifndef SCHED_TEST_SUPPORT_POOL_FIXTURE_HPP
#define SCHED_TEST_SUPPORT_POOL_FIXTURE_HPP

#include <sched/manual_clock.hpp>
#include <sched/scheduled_thread_pool.hpp>

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <future>

#include "support/manual_clock_fixture.hpp"

namespace sched::test {

using manual_pool = basic_scheduled_thread_pool<manual_clock>;

template <class R>
using manual_future = basic_scheduled_future<R, manual_clock>;

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
