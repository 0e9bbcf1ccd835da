#include <sched/detail/owner_registry.hpp>

#include <algorithm>
#include <mutex>
#include <stdexcept>

#include <pthread.h>

namespace sched::detail {

namespace {

constinit std::mutex registry_mutex; // adders and removers; find() takes no lock
// No number below it is free. Guarded by registry_mutex.
constinit owner_registry::number lowest_free = 1;

// A child forked while another thread adds or removes an owner would find the mutex locked for
// good, and hang as it makes its first pool: the fork waits for it, and both processes let go of
// it after. Registered before the program's own static objects are made, as the recycler's
// handlers are (see there).
void lock_for_fork() noexcept
{
    registry_mutex.lock();
}

void unlock_after_fork() noexcept
{
    registry_mutex.unlock();
}

struct fork_handlers
{
    fork_handlers() noexcept
    {
        (void)pthread_atfork(&lock_for_fork, &unlock_after_fork, &unlock_after_fork);
    }
};

__attribute__((init_priority(101))) const fork_handlers handlers;

} // namespace

constinit std::atomic<void*> owner_registry::owners_[capacity + 1]{};
constinit char owner_registry::removing_ = 0;
constinit std::atomic<std::uint32_t> owner_registry::pins_[capacity + 1]{};

owner_registry::number owner_registry::add(void* owner)
{
    const std::lock_guard lock(registry_mutex);
    for (number n = lowest_free; n <= capacity; ++n)
        if (owners_[n].load(std::memory_order_relaxed) == nullptr)
        {
            owners_[n].store(owner, std::memory_order_release);
            lowest_free = number(n + 1);
            return n;
        }
    lowest_free = capacity + 1;
    throw std::length_error("sched: 8191 scheduled thread pools are alive already");
}

void owner_registry::remove(number n) noexcept
{
    owners_[n].store(&removing_); // sequentially consistent: see pin()
    for (std::uint32_t pins = pins_[n].load(); pins != 0; pins = pins_[n].load())
        pins_[n].wait(pins);
    const std::lock_guard lock(registry_mutex);
    owners_[n].store(nullptr, std::memory_order_relaxed);
    lowest_free = std::min(lowest_free, n);
}

} // namespace sched::detail
