#ifndef SCHED_TEST_SUPPORT_COUNTER_HPP
#define SCHED_TEST_SUPPORT_COUNTER_HPP

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace sched::test {

// A count that a test can block on until it reaches a value. The real-time bound only keeps a
// broken test from hanging: it is far beyond anything a passing run needs.
class counter
{
public:
    void increment()
    {
        // Notify under the lock: a waiter that sees the new value may destroy the counter as
        // soon as it has the lock back, so nothing here may touch it after unlocking.
        std::lock_guard lock(mutex_);
        ++value_;
        changed_.notify_all();
    }

    int value() const
    {
        std::lock_guard lock(mutex_);
        return value_;
    }

    // Whether the count reached `target` (false only if that took absurdly long).
    bool wait_for_at_least(int target) const
    {
        std::unique_lock lock(mutex_);
        return changed_.wait_for(lock, std::chrono::seconds(60), [&] { return value_ >= target; });
    }

private:
    mutable std::mutex mutex_;
    mutable std::condition_variable changed_;
    int value_ = 0;
};

} // namespace sched::test

#endif
