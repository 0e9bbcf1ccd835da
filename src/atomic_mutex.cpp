#include <sched/detail/atomic_mutex.hpp>
#include <sched/detail/spin_wait.hpp>

#include <pthread.h>
#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#endif

namespace sched::detail {

lock_waiter_count lock_waiters[lock_waiter_counts];

namespace {

// How many times a thread that finds the lock taken looks again, a cpu_relax() apart (about 0.2 to
// 10 µs, by the processor), before it sleeps: holds are short, and going to sleep costs a heavy
// fence (tens of µs under a hypervisor, which must interrupt another core) and two system calls.
constexpr int looks_before_sleeping = 128;

#if defined(__linux__)
int* futex_word(std::atomic<int>* word) noexcept
{
    static_assert(sizeof(std::atomic<int>) == sizeof(int));
    return reinterpret_cast<int*>(word);
}
#endif

// Whether an unlock may still free the lock with a plain store and not see this thread, counted
// as a waiter, before it sleeps: if so, its sleeps are bounded.
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

// Sleeps while `word` holds `value`, or until woken (or 1 ms has passed, if `bounded`). Returns at
// once if `word` no longer holds `value`.
void sleep_while(std::atomic<int>& word, int value, bool bounded) noexcept
{
#if defined(__linux__)
    const timespec timeout{0, 1'000'000};
    (void)syscall(SYS_futex, futex_word(&word), FUTEX_WAIT_PRIVATE, value,
                  bounded ? &timeout : nullptr, nullptr, 0);
#else
    (void)bounded; // the fence is never available here: no wake-up is missed
    word.wait(value, std::memory_order_relaxed);
#endif
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
    bool asked = false;
    bool bounded = true;
    while (!try_lock())
    {
        if (!asked) // once, before the first sleep: a thread woken again is counted already
        {
            asked = true;
            bounded = wake_up_may_be_missed();
        }
        sleep_while(state_, locked, bounded);
    }
    waiters.fetch_sub(1, std::memory_order_relaxed);
}

void atomic_mutex::wake_one(std::atomic<int>* word) noexcept
{
#if defined(__linux__)
    (void)syscall(SYS_futex, futex_word(word), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
#else
    word->notify_one();
#endif
}

} // namespace sched::detail
