#include <sched/detail/atomic_mutex.hpp>
#include <sched/detail/background_unmap.hpp>
#include <sched/detail/futex.hpp>
#include <sched/detail/mapped_memory.hpp>
#include <sched/detail/recycler.hpp>
#include <sched/detail/sanitizers.hpp>
#include <sched/detail/thread_name.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <new>
#include <utility>

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <time.h>

namespace sched::detail {
namespace {

// How many bytes may wait for the thread: memory freed faster than the thread gives it back (a
// million tasks cancelled in a loop) then still goes back as it is freed, on the freeing thread.
// A burst of spans emptied at once (4 to 8 in W3), or a heap array's step, fits many times over.
constexpr std::size_t max_pending_bytes = std::size_t(1) << 20;

// A block waiting to be unmapped, written over its start.
struct pending_block
{
    pending_block* next;
    std::size_t bytes;
    std::size_t alignment;
};

enum class thread_state
{
    not_started,
    running,
    ended, // or ending: blocks are unmapped at once
};

// Trivially destructible, so that it can still be used as the program ends.
struct unmapper
{
    atomic_mutex mutex; // guards all but `wake` and `unmapped`
    // Held by the thread while it unmaps what it took, so that a fork waits for that: the child
    // would not unmap those blocks.
    atomic_mutex unmapping;
    pending_block* pending = nullptr;
    std::size_t pending_bytes = 0;
    thread_state state = thread_state::not_started;
    bool asleep = false;    // the thread waits for `wake` to change
    bool ticking = false;   // ... or for its next decay tick (idle spans exist)
    bool fork_safe = false; // the fork handlers are registered: else no thread is started
    pthread_t thread{};
    std::atomic<std::uint32_t> wake{0};
    std::atomic<std::size_t> unmapped{0};
    std::atomic<unsigned> epoch{0}; // decay ticks so far
#if defined(__linux__)
    // The CPUs the program's threads may run on, read as it starts: the thread does not keep
    // those of the thread that started it (which may be pinned to a core that runs timers).
    cpu_set_t cpus{};
    bool cpus_known = false;
#endif
};

constinit unmapper background{};

// Returns how many blocks it unmapped.
std::size_t unmap_all(pending_block* taken) noexcept
{
    std::size_t count = 0;
    for (; pending_block* b = taken; ++count)
    {
        taken = b->next;
        unmap_memory(b, b->bytes, b->alignment);
    }
    return count;
}

// The thread's time, for its decay ticks.
std::uint64_t now_ns() noexcept
{
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    return std::uint64_t(now.tv_sec) * 1'000'000'000u + std::uint64_t(now.tv_nsec);
}

void* run(void*)
{
    name_this_thread("sched-unmap");
#if defined(__linux__)
    if (background.cpus_known)
        (void)pthread_setaffinity_np(pthread_self(), sizeof background.cpus, &background.cpus);
#endif
    constexpr std::uint64_t tick_ns = std::uint64_t(decay_tick_ms) * 1'000'000u;
    std::uint64_t next_tick = 0; // while ticking
    for (;;)
    {
        std::unique_lock unmapping(background.unmapping);
        background.mutex.lock();
        background.asleep = false; // woken, or the wait timed out
        pending_block* taken = std::exchange(background.pending, nullptr);
        background.pending_bytes = 0;
        if (!taken)
        {
            const bool ending = background.state == thread_state::ended;
            // Under the mutex: a span that goes idle after this check finds `asleep` set, and
            // wakes the thread unless it ticks already.
            const bool ticking = span_decay_available && !ending && idle_spans_exist();
            if (!ticking)
                next_tick = 0;
            else if (next_tick == 0)
                next_tick = now_ns() + tick_ns;
            std::uint64_t now = 0;
            if (ticking && (now = now_ns()) >= next_tick)
            {
                background.mutex.unlock();
                // Holding `unmapping` (a fork waits until the spans taken are unmapped); the
                // spans' locks are only tried.
                const unsigned epoch = background.epoch.fetch_add(1, std::memory_order_relaxed) + 1;
                background.unmapped.fetch_add(decay_idle_spans(epoch), std::memory_order_relaxed);
                next_tick = std::max(next_tick + tick_ns, now_ns());
                continue;
            }
            background.asleep = !ending;
            background.ticking = ticking;
            const std::uint32_t seen = background.wake.load();
            background.mutex.unlock();
            if (ending)
                return nullptr;
            unmapping.unlock();
            // A wake-up after the unlock changes `wake` first, so the wait returns.
            futex_wait(background.wake, seen, ticking ? next_tick - now : 0);
            continue;
        }
        background.mutex.unlock();
        background.unmapped.fetch_add(unmap_all(taken), std::memory_order_relaxed);
    }
}

// Under the mutex. The thread runs with every signal blocked (a process's signal handlers are
// not run on it) and with the default scheduling, not its starter's (a real-time policy, say).
bool start_thread() noexcept
{
    pthread_attr_t attributes;
    if (pthread_attr_init(&attributes) != 0)
        return false;
    sched_param priority{};
    priority.sched_priority = 0;
    bool started = pthread_attr_setinheritsched(&attributes, PTHREAD_EXPLICIT_SCHED) == 0 &&
                   pthread_attr_setschedpolicy(&attributes, SCHED_OTHER) == 0 &&
                   pthread_attr_setschedparam(&attributes, &priority) == 0;
    if (started)
    {
        sigset_t all;
        sigset_t old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old); // the thread inherits the mask
        started = pthread_create(&background.thread, &attributes, &run, nullptr) == 0;
        pthread_sigmask(SIG_SETMASK, &old, nullptr);
    }
    pthread_attr_destroy(&attributes);
    if (started)
        background.state = thread_state::running;
    return started;
}

// Unlocked: if the thread was asleep (whoever set `asleep` to false under the mutex wakes it).
// Sequentially consistent, as the load of `seen` and the wait: the waiter's side of
// notify_one() must see the change, or the thread would sleep with blocks pending.
void wake_thread() noexcept
{
    background.wake.fetch_add(1);
    futex_wake_one(&background.wake);
}

void lock_for_fork() noexcept
{
    background.unmapping.lock();
    background.mutex.lock();
}

void unlock_in_parent() noexcept
{
    background.mutex.unlock();
    background.unmapping.unlock();
}

// The child has no thread: it unmaps what was pending (munmap may be called in a forked child),
// and the next call starts a thread of its own. ThreadSanitizer cannot start threads in a child
// of a process with threads: there, the child unmaps at once.
void unlock_in_child() noexcept
{
    (void)unmap_all(std::exchange(background.pending, nullptr));
    background.pending_bytes = 0;
    if (under_thread_sanitizer)
        background.state = thread_state::ended;
    else if (background.state == thread_state::running)
        background.state = thread_state::not_started;
    background.asleep = false;
    background.ticking = false;
    unlock_in_parent();
}

// Registers the fork handlers and reads the program's CPUs as it starts, and ends the thread as
// it ends (after the thread has unmapped what is pending).
struct thread_lifetime
{
    thread_lifetime() noexcept
    {
        // Without memory for the handlers, a child would wait for a thread it does not have.
        const bool fork_safe =
            pthread_atfork(&lock_for_fork, &unlock_in_parent, &unlock_in_child) == 0;
#if defined(__linux__)
        cpu_set_t cpus;
        const bool cpus_known = sched_getaffinity(0, sizeof cpus, &cpus) == 0;
#endif
        // Under the mutex: a pool constructed before this (a user's static one) may already be
        // freeing memory on its threads.
        std::lock_guard lock(background.mutex);
        background.fork_safe = fork_safe;
#if defined(__linux__)
        background.cpus = cpus;
        background.cpus_known = cpus_known;
#endif
    }

    ~thread_lifetime()
    {
        background.mutex.lock();
        const bool running = background.state == thread_state::running;
        background.state = thread_state::ended;
        background.asleep = false;
        background.mutex.unlock();
        if (running)
        {
            wake_thread();
            pthread_join(background.thread, nullptr);
        }
    }

    thread_lifetime(const thread_lifetime&) = delete;
    thread_lifetime& operator=(const thread_lifetime&) = delete;
};

// Made before the program's own static objects (and destroyed after them), so that the fork
// handlers of the program's that those register run their prepare first, before this one holds
// the thread's locks (prepare handlers run in the reverse order of registration).
__attribute__((init_priority(101))) thread_lifetime lifetime;

// Under the mutex: whether the thread runs, started now if need be.
bool running() noexcept
{
    return background.state == thread_state::running ||
           (background.state == thread_state::not_started && background.fork_safe &&
            start_thread());
}

} // namespace

void unmap_in_background(void* block, std::size_t bytes, std::size_t alignment) noexcept
{
    if constexpr (maps_memory)
    {
        bool handed_over = false;
        bool wake = false;
        {
            std::lock_guard lock(background.mutex);
            if (background.pending_bytes + bytes <= max_pending_bytes && running())
            {
                background.pending =
                    ::new (block) pending_block{background.pending, bytes, alignment};
                background.pending_bytes += bytes;
                handed_over = true;
                wake = std::exchange(background.asleep, false);
            }
        }
        if (wake)
            wake_thread();
        if (handed_over)
            return;
    }
    unmap_memory(block, bytes, alignment);
}

void unmap_tail_in_background(void* block,
                              std::size_t old_bytes,
                              std::size_t new_bytes,
                              std::size_t alignment) noexcept
{
    const auto start = reinterpret_cast<std::uintptr_t>(block);
    const std::uintptr_t tail = whole_pages(start + new_bytes);
    const std::uintptr_t end = whole_pages(start + old_bytes);
    if (tail < end) // a whole page or more: room for a pending_block
        unmap_in_background(reinterpret_cast<void*>(tail), end - tail, alignment);
}

void start_unmapping_thread() noexcept
{
    if constexpr (maps_memory)
    {
        std::lock_guard lock(background.mutex);
        (void)running();
    }
}

unsigned decay_epoch() noexcept
{
    return background.epoch.load(std::memory_order_relaxed);
}

bool start_span_decay() noexcept
{
    if constexpr (!maps_memory || !span_decay_available)
        return false;
    bool wake = false;
    {
        std::lock_guard lock(background.mutex);
        if (!running())
            return false;
        if (background.asleep && !background.ticking)
        {
            background.asleep = false;
            wake = true;
        }
    }
    if (wake)
        wake_thread();
    return true;
}

bool unmapping_thread_idle() noexcept
{
    std::lock_guard lock(background.mutex);
    return !background.pending && (background.state != thread_state::running || background.asleep);
}

std::size_t blocks_unmapped_in_background() noexcept
{
    return background.unmapped.load(std::memory_order_relaxed);
}

} // namespace sched::detail
