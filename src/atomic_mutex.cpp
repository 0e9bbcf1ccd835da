#include <sched/detail/atomic_mutex.hpp>
#include <sched/detail/futex.hpp>
#include <sched/detail/spin_wait.hpp>

#include <pthread.h>

namespace sched::detail {

lock_waiter_count lock_waiters[lock_waiter_counts];

namespace {

// How many times a thread that finds the lock taken looks again, a cpu_relax() apart (about 0.2 to
// 10 µs, by the processor), before it sleeps: holds are short, and going to sleep costs a heavy
// fence (tens of µs under a hypervisor, which must interrupt another core) and two system calls.
constexpr int looks_before_sleeping = 128;

// Whether an unlock may still free the lock with a plain store and not see this thread, counted
// as a waiter, before it sleeps: if so, its sleeps last 1 ms at most.
bool wake_up_may_be_missed() noexcept
{
    const asymmetric_fence_support fences = asymmetric_fences.load(std::memory_order_relaxed);
    if (fences == asymmetric_fence_support::unavailable)
        return false; // every unlock exchanges the lock's word
#if defined(__linux__)
    if (fences == asymmetric_fence_support::available)
        return !heavy_fence(); // from here on, an unlock sees us counted or we see the lock freed
#endif
    return true; // an unlock may yet find the fence available: the program is starting
}

// The forking thread was in none of the parent's lock_contended(), and is the child's only one.
void forget_waiters_in_child() noexcept
{
    for (lock_waiter_count& count : lock_waiters)
        count.threads.store(0, std::memory_order_relaxed);
}

struct fork_handler
{
    fork_handler() noexcept { (void)pthread_atfork(nullptr, nullptr, &forget_waiters_in_child); }
};

__attribute__((init_priority(101))) const fork_handler handler;

} // namespace

void atomic_mutex::lock_contended() noexcept
{
    for (int i = 0; i < looks_before_sleeping; ++i)
    {
        cpu_relax();
        if (state_.load(std::memory_order_relaxed) == unlocked && try_lock())
            return;
    }
    std::atomic<int>& waiters = lock_waiters_for(this);
    waiters.fetch_add(1, std::memory_order_seq_cst);
    std::atomic_thread_fence(std::memory_order_seq_cst); // the count, then the lock's word
    if (!try_lock())
    {
        // Asked once, before the first sleep: a thread woken again is counted already.
        const std::uint64_t limit_ns = wake_up_may_be_missed() ? 1'000'000 : 0;
        do
            futex_wait(state_, locked, limit_ns);
        while (!try_lock());
    }
    waiters.fetch_sub(1, std::memory_order_relaxed);
}

} // namespace sched::detail
