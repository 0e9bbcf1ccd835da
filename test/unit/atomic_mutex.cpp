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
// hold yields, so that the others find the lock taken and go to sleep on it.
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

void spin(unsigned iterations)
{
    for (unsigned i = 0; i < iterations; ++i)
        std::atomic_signal_fence(std::memory_order_seq_cst); // kept by the compiler
}

} // namespace

BOOST_AUTO_TEST_SUITE(test_atomic_mutex)

BOOST_AUTO_TEST_CASE(threads_that_contend_each_get_the_lock_alone)
{
    atomic_mutex mutex;
    const contention_result result = contend(mutex, 4, 20'000);
    BOOST_TEST(result.count == 4U * 20'000U);
    BOOST_TEST(result.contended > 0U); // the sleeping path ran
    BOOST_TEST(lock_waiters_for(&mutex).load() == 0);
}

// Each round, one thread frees the lock while the other polls it, is on its way to sleep on it,
// or sleeps (every other round, the free waits until the other is counted as a waiter; then comes
// after a varying spin): that one unlock must wake it, since no other follows until it has the
// lock. A wake-up missed leaves the round unfinished.
BOOST_AUTO_TEST_CASE(every_unlock_wakes_a_thread_that_came_to_sleep_on_the_lock)
{
    constexpr int rounds = 10'000;
    atomic_mutex mutex;
    std::atomic<int> trying{-1}; // the round whose lock() the waiter is about to call
    std::atomic<int> got{-1};    // the round in which the waiter had the lock
    std::atomic<bool> held{false};
    std::thread waiter([&] {
        for (int round = 0; round < rounds; ++round)
        {
            while (!held.load())
                std::this_thread::yield();
            trying = round;
            mutex.lock();
            held = false;
            got = round;
            mutex.unlock();
        }
    });
    int finished = 0;
    for (int round = 0; round < rounds; ++round)
    {
        mutex.lock();
        held = true;
        while (trying.load() != round)
            std::this_thread::yield();
        if (round % 2 == 0) // past its polling: about to sleep, or asleep
            while (lock_waiters_for(&mutex).load() == 0)
                std::this_thread::yield();
        spin(static_cast<unsigned>(round % 64) * 50U);
        mutex.unlock();
        if (!sched::test::eventually([&] { return got.load() == round; }))
            break;
        ++finished;
    }
    mutex.lock(); // a waiter left asleep sees this unlock
    mutex.unlock();
    waiter.join();
    BOOST_TEST(finished == rounds);
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
    BOOST_TEST(sched::test::eventually([&] { return lock_waiters_for(&mutex).load() == 1; }));
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
    BOOST_TEST(sched::test::eventually([&] { return lock_waiters_for(&mutex).load() == 1; }));
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

BOOST_AUTO_TEST_CASE(a_forked_childs_locks_wake_their_waiters,
                     *boost::unit_test::precondition(sched::test::child_starts_threads))
{
    BOOST_TEST(sched::test::in_child([] {
        atomic_mutex mutex;
        const contention_result result = contend(mutex, 2, 5'000);
        return result.count == 2U * 5'000U ? 0 : 1;
    }));
}
#endif

BOOST_AUTO_TEST_SUITE_END()
