#ifndef SCHED_DETAIL_ATOMIC_MUTEX_HPP
#define SCHED_DETAIL_ATOMIC_MUTEX_HPP

#include <sched/detail/visibility.hpp>

#include <atomic>

SCHED_VISIBILITY_BEGIN

namespace sched::detail {

// The queue's lock: an inline compare-and-swap when free (std::mutex costs a call into
// pthread_mutex_lock and unlock, about 100 instructions per pair, on a path taken twice per
// cancel-and-rearm), else blocking through std::atomic::wait (a futex on Linux).
// The three states are Drepper's "Futexes Are Tricky" mutex: unlocked, locked, locked with
// waiters (so that unlocking wakes somebody only if somebody may be asleep).
class atomic_mutex
{
public:
    atomic_mutex() = default;
    atomic_mutex(const atomic_mutex&) = delete;
    atomic_mutex& operator=(const atomic_mutex&) = delete;

    void lock() noexcept
    {
        int expected = unlocked;
        if (!state_.compare_exchange_strong(expected, locked, std::memory_order_acquire))
            lock_contended(expected);
    }

    bool try_lock() noexcept
    {
        int expected = unlocked;
        return state_.compare_exchange_strong(expected, locked, std::memory_order_acquire);
    }

    void unlock() noexcept
    {
        if (state_.exchange(unlocked, std::memory_order_release) == contended)
            state_.notify_one();
    }

private:
    static constexpr int unlocked = 0;
    static constexpr int locked = 1;
    static constexpr int contended = 2;

    void lock_contended(int seen) noexcept
    {
        // No spinning: measured with two producers on one queue, sleeping at once (as glibc's
        // default mutex does) lets the owner run uncontended and beats every spin count tried.
        if (seen != contended)
            seen = state_.exchange(contended, std::memory_order_acquire);
        while (seen != unlocked)
        {
            state_.wait(contended, std::memory_order_relaxed);
            seen = state_.exchange(contended, std::memory_order_acquire);
        }
    }

    std::atomic<int> state_{unlocked};
};

} // namespace sched::detail

SCHED_VISIBILITY_END

#endif // SCHED_DETAIL_ATOMIC_MUTEX_HPP
