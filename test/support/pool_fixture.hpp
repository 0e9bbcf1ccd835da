#ifndef SCHED_TEST_SUPPORT_POOL_FIXTURE_HPP
#define SCHED_TEST_SUPPORT_POOL_FIXTURE_HPP

#include <sched/manual_clock.hpp>
#include <sched/scheduled_thread_pool.hpp>

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <future>
#include <utility>

#include "support/counter.hpp"
#include "support/manual_clock_fixture.hpp"

namespace sched::test {

using manual_pool = basic_scheduled_thread_pool<manual_clock>;

template <class R>
using manual_future = basic_scheduled_future<R, manual_clock>;

// Keeps a one-worker pool's worker busy with a task until release() (or its destruction): built
// once the task has started.
class occupied_worker
{
public:
    explicit occupied_worker(manual_pool& pool)
        : task_(pool.submit([this, released = released_.get_future().share()] {
              started_.increment();
              (void)released.wait_for(std::chrono::seconds(60)); // only its own copy from here
          }))
    {
        BOOST_TEST_REQUIRE(started_.wait_for_at_least(1));
    }
    occupied_worker(const occupied_worker&) = delete;
    occupied_worker& operator=(const occupied_worker&) = delete;
    ~occupied_worker() { release(); }

    void release()
    {
        if (!std::exchange(released_once_, true))
            released_.set_value();
    }

    // The busy task's future: ready once it has run to its end.
    manual_future<void>& task() noexcept { return task_; }

private:
    std::promise<void> released_;
    bool released_once_ = false;
    counter started_;
    manual_future<void> task_;
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
