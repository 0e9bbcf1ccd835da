#ifndef SCHED_DETAIL_ATOMIC_MUTEX_HPP
#define SCHED_DETAIL_ATOMIC_MUTEX_HPP

#include <sched/detail/asymmetric_fence.hpp>
#include <sched/detail/futex.hpp>
#include <sched/detail/visibility.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>

SCHED_VISIBILITY_BEGIN

namespace sched::detail {

// How many threads sleep, or are about to, on the library's locks, counted by the lock's address
// (a lock that shares its count with one slept on makes a futex call for nothing as it unlocks):
// a lock's unlock reads its count without touching the lock. A forked child, whose one thread
// waits on none, starts from zero. One table for the process: one copy of the library in it.
struct alignas(64) lock_waiter_count
{
    std::atomic<int> threads{0};
};

inline constexpr std::size_t lock_waiter_counts = 64;
extern lock_waiter_count lock_waiters[lock_waiter_counts];

inline std::atomic<int>& lock_waiters_for(const void* lock) noexcept
{
    const auto address = reinterpret_cast<std::uintptr_t>(lock);
    return lock_waiters[((address >> 6) ^ (address >> 12)) % lock_waiter_counts].threads;
}

// The library's lock. Taking it when free is an inline compare-and-swap (std::mutex costs a call
// into pthread_mutex_lock and unlock, about 100 instructions a pair, on a path taken twice per
// cancel-and-rearm); freeing it when nobody waits is a plain store, with no locked instruction to
// wait for the stores before it (where the system has the heavy fence of asymmetric_fence.hpp;
// else an exchange); a thread that finds it taken polls it briefly, then sleeps on a futex.
// Constant-initialized and trivially destructible; as with a POSIX mutex, a thread that takes it
// may destroy it while the thread that freed it is still in unlock().
class atomic_mutex
{
public:
    atomic_mutex() = default;
    atomic_mutex(const atomic_mutex&) = delete;
    atomic_mutex& operator=(const atomic_mutex&) = delete;

    void lock() noexcept
    {
        if (!try_lock())
            lock_contended();
    }

    bool try_lock() noexcept
    {
        std::uint32_t expected = unlocked;
        return state_.compare_exchange_strong(expected, locked, std::memory_order_acquire,
                                              std::memory_order_relaxed);
    }

    void unlock() noexcept
    {
        std::atomic<int>& waiters = lock_waiters_for(this);
        std::atomic<std::uint32_t>* const word = &state_;
        if (asymmetric_fences.load(std::memory_order_relaxed) ==
            asymmetric_fence_support::available)
        {
            word->store(unlocked, std::memory_order_release);
            light_fence();
        }
        else
        {
            (void)word->exchange(unlocked, std::memory_order_seq_cst);
        }
        if (waiters.load(std::memory_order_seq_cst) != 0)
            futex_wake_one(word); // no access to *this: it may be gone
    }

private:
    static constexpr std::uint32_t unlocked = 0;
    static constexpr std::uint32_t locked = 1;

    void lock_contended() noexcept;

    std::atomic<std::uint32_t> state_{unlocked};
};

} // namespace sched::detail

SCHED_VISIBILITY_END

#endif // SCHED_DETAIL_ATOMIC_MUTEX_HPP
