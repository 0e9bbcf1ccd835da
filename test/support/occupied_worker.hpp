#ifndef SCHED_TEST_SUPPORT_OCCUPIED_WORKER_HPP
#define SCHED_TEST_SUPPORT_OCCUPIED_WORKER_HPP

#include <sched/scheduled_future.hpp>

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <future>
#include <memory>
#include <utility>

#include "support/counter.hpp"

namespace sched::test {

// Keeps a one-worker pool's worker busy with a task until release() (or its destruction): built
// once the task has started.
template <class Pool>
class occupied_worker
{
public:
    using future_type = basic_scheduled_future<void, typename Pool::clock_type>;

    explicit occupied_worker(Pool& pool)
        : task_(pool.submit([started = started_, released = released_.get_future().share()] {
              started->increment();
              (void)released.wait_for(std::chrono::seconds(60));
          }))
    {
        BOOST_TEST_REQUIRE(started_->wait_for_at_least(1));
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
    future_type& task() noexcept { return task_; }

private:
    std::promise<void> released_;
    bool released_once_ = false;
    std::shared_ptr<counter> started_ = std::make_shared<counter>(); // the task's own copy too
    future_type task_;
};

} // namespace sched::test

#endif
