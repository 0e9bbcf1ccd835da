// The library's lock: exclusion, and no waiter left asleep, with the unlock's plain store where
// the kernel offers the heavy fence (asymmetric_fence.hpp) and its exchange where it does not.

#include <sched/detail/asymmetric_fence.hpp>
#include <sched/detail/atomic_mutex.hpp>

#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <latch>
#include <mutex>
#include <thread>
#include <vector>

#include "support/child_process.hpp"
#include "support/wait.hpp"

#if defined(__linux__)
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

using sched::detail::asymmetric_fence_support;
using sched::detail::atomic_mutex;
using sched::detail::lock_waiters_for;

namespace {

struct contention_result
{
    std::uint64_t count = 0;     // increments made under the lock
    std::uint64_t contended = 0; // acquisitions that found the lock taken
};

// `threads` threads each take the lock `rounds` times and add one to a plain counter; every 16th
// hold yields, so that the others find the lock taken, and poll it or sleep on it.
contention_result contend(atomic_mutex& mutex, int threads, int rounds)
{
    std::uint64_t count = 0;
    std::atomic<std::uint64_t> contended{0};
    std::latch start(threads);
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t)
        workers.emplace_back([&] {
            start.arrive_and_wait();
            for (int i = 0; i < rounds; ++i)
            {
                if (!mutex.try_lock())
                {
                    contended.fetch_add(1, std::memory_order_relaxed);
                    mutex.lock();
                }
                ++count;
                if (i % 16 == 0)
                    std::this_thread::yield();
                mutex.unlock();
            }
        });
    for (auto& worker : workers)
        worker.join();
    return {count, contended.load()};
}

// Each round, this thread frees the lock while another polls it, is on its way to sleep on it,
// or sleeps: every other round, the free waits until the other is counted as a waiter; the
// others come from 0 to 16 µs after it called lock(), across its polling and its count. That one
// unlock must wake it: no other follows until it has the lock. Returns how many rounds ended, up
// to the first whose waiter was not woken (it is then woken, and the test ends).
int rounds_woken(int rounds)
{
    atomic_mutex mutex;
    std::atomic<int> trying{-1}; // the round whose lock() the waiter is about to call
    std::atomic<int> got{-1};    // the round in which the waiter had the lock
    std::atomic<bool> held{false};
    std::atomic<bool> given_up{false};
    std::thread waiter([&] {
        for (int round = 0; round < rounds; ++round)
        {
            if (!sched::test::eventually([&] { return held.load() || given_up.load(); }) ||
                given_up.load())
                return;
            trying = round;
            mutex.lock();
            held = false;
            got = round;
            mutex.unlock();
        }
    });
    int ended = 0;
    for (int round = 0; round < rounds; ++round)
    {
        mutex.lock();
        held = true;
        bool ready = sched::test::eventually([&] { return trying.load() == round; });
        if (round % 2 == 0) // past its polling: about to sleep, or asleep
            ready = ready &&
                    sched::test::eventually([&] { return lock_waiters_for(&mutex).load() != 0; });
        else
        {
            const auto until =
                std::chrono::steady_clock::now() + std::chrono::nanoseconds(250 * (round % 64));
            while (std::chrono::steady_clock::now() < until)
            {}
        }
        mutex.unlock();
        if (!ready || !sched::test::eventually([&] { return got.load() == round; }))
            break;
        ++ended;
    }
    given_up = true;
    mutex.lock(); // a waiter left asleep sees this unlock
    mutex.unlock();
    waiter.join();
    return ended;
}

#if defined(__linux__)
// Runs `check` in a forked child whose library sees the heavy fence as `fences`: the child's one
// thread, holding no lock, may change that for the threads it then starts.
template <class Check>
bool in_child_with_fences(asymmetric_fence_support fences, Check check)
{
    return sched::test::in_child([&] {
        sched::detail::asymmetric_fences.store(fences);
        return check() ? 0 : 1;
    });
}
#endif

} // namespace

BOOST_AUTO_TEST_SUITE(test_atomic_mutex)

BOOST_AUTO_TEST_CASE(threads_that_contend_each_get_the_lock_alone)
{
    atomic_mutex mutex;
    const contention_result result = contend(mutex, 4, 20'000);
    BOOST_TEST(result.count == 4U * 20'000U);
    BOOST_TEST(result.contended > 0U); // the others found it taken
    BOOST_TEST(lock_waiters_for(&mutex).load() == 0);
}

BOOST_AUTO_TEST_CASE(every_unlock_wakes_a_thread_that_came_to_sleep_on_the_lock)
{
    BOOST_TEST(rounds_woken(10'000) == 10'000);
}

BOOST_AUTO_TEST_CASE(a_thread_asleep_on_the_lock_gets_it_when_it_is_freed)
{
    atomic_mutex mutex;
    mutex.lock();
    std::atomic<bool> taken{false};
    std::thread waiter([&] {
        std::lock_guard lock(mutex);
        taken = true;
    });
    BOOST_TEST(sched::test::eventually([&] { return lock_waiters_for(&mutex).load() != 0; }));
    BOOST_TEST(!sched::test::within(std::chrono::milliseconds(20), [&] { return taken.load(); }));
    mutex.unlock();
    BOOST_TEST(sched::test::eventually([&] { return taken.load(); }));
    waiter.join();
    BOOST_TEST(lock_waiters_for(&mutex).load() == 0);
}

#if defined(__linux__)
BOOST_AUTO_TEST_CASE(the_heavy_fence_is_available_where_the_kernel_offers_it)
{
    const long commands = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0U, 0);
    const bool offered = commands > 0 && (commands & MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0;
    BOOST_TEST(
        (sched::detail::asymmetric_fences.load() ==
         (offered ? asymmetric_fence_support::available : asymmetric_fence_support::unavailable)));
    if (offered)
        BOOST_TEST(sched::detail::heavy_fence());
}

// The parent's thread asleep on a lock is not the child's: the child's unlocks must not go on
// waking it, and a forked child keeps the heavy fence.
BOOST_AUTO_TEST_CASE(a_forked_child_counts_no_waiter_of_its_parents_and_keeps_the_fence)
{
    atomic_mutex mutex;
    mutex.lock();
    std::thread waiter([&] {
        mutex.lock();
        mutex.unlock();
    });
    BOOST_TEST(sched::test::eventually([&] { return lock_waiters_for(&mutex).load() != 0; }));
    const bool fences =
        sched::detail::asymmetric_fences.load() == asymmetric_fence_support::available;
    BOOST_TEST(sched::test::in_child([&] {
        if (lock_waiters_for(&mutex).load() != 0)
            return 1;
        mutex.unlock(); // held by this thread in the parent
        if (!mutex.try_lock())
            return 2;
        mutex.unlock();
        return fences && !sched::detail::heavy_fence() ? 3 : 0;
    }));
    mutex.unlock();
    waiter.join();
}

// Where the system has no heavy fence, every unlock exchanges the lock's word; before the library
// has asked for it, the unlocks exchange and the sleeps are bounded. Either way, nobody is left
// asleep.
BOOST_AUTO_TEST_CASE(without_the_heavy_fence_every_sleeper_is_woken_too,
                     *boost::unit_test::precondition(sched::test::child_starts_threads))
{
    for (const auto fences :
         {asymmetric_fence_support::unavailable, asymmetric_fence_support::unknown})
        BOOST_TEST(in_child_with_fences(fences, [] {
            atomic_mutex mutex;
            return contend(mutex, 2, 5'000).count == 2U * 5'000U && rounds_woken(2'000) == 2'000;
        }));
}
#endif

BOOST_AUTO_TEST_SUITE_END()
