#include <sched/manual_clock.hpp>

#include <algorithm>
#include <mutex>
#include <stdexcept>
#include <vector>

#include <pthread.h>

namespace sched {
namespace {

// Lock order: registry_mutex, then a listener's own lock (taken inside on_clock_advanced).
constinit std::mutex registry_mutex;
std::vector<detail::clock_listener*>& registry()
{
    static std::vector<detail::clock_listener*> listeners;
    return listeners;
}

// A forked child has none of the parent's queues that listen (their workers stay behind, and the
// child must not use them), and would block on the lock of one that a thread of the parent held:
// it starts with no listener. The fork waits for the registry's lock, and both processes let go
// of it after. Made before the program's static objects, as the library's other fork handlers
// are (see recycler.cpp), and the registry with it, so that it outlives a static pool.
void lock_for_fork() noexcept
{
    registry_mutex.lock();
}

void unlock_after_fork() noexcept
{
    registry_mutex.unlock();
}

void forget_in_child() noexcept
{
    registry().clear();
    registry_mutex.unlock();
}

struct fork_handlers
{
    fork_handlers() noexcept
    {
        (void)registry();
        (void)pthread_atfork(&lock_for_fork, &unlock_after_fork, &forget_in_child);
    }
};

__attribute__((init_priority(101))) const fork_handlers handlers;

} // namespace

void manual_clock::add(duration d)
{
    constexpr rep end = end_of_time().time_since_epoch().count();
    rep current = ticks_.load();
    rep next;
    do // saturate at the end of time instead of wrapping into the past
        next = current > end - d.count() ? end : current + d.count();
    while (!ticks_.compare_exchange_weak(current, next));
    notify_listeners();
}

void manual_clock::move_to(time_point t)
{
    const rep next = std::min(t, end_of_time()).time_since_epoch().count();
    rep current = ticks_.load();
    do
    {
        if (t.time_since_epoch().count() < current)
            throw std::invalid_argument("manual_clock::advance_to: time point is in the past");
    } while (!ticks_.compare_exchange_weak(current, next));
    notify_listeners();
}

void manual_clock::reset() noexcept
{
    ticks_.store(0);
    notify_listeners();
}

void manual_clock::add_listener(detail::clock_listener& listener)
{
    std::lock_guard lock(registry_mutex);
    registry().push_back(&listener);
}

void manual_clock::remove_listener(detail::clock_listener& listener) noexcept
{
    std::lock_guard lock(registry_mutex);
    auto& listeners = registry();
    listeners.erase(std::remove(listeners.begin(), listeners.end(), &listener), listeners.end());
}

void manual_clock::notify_listeners() noexcept
{
    // Listeners lock their own mutex before notifying, so a waiter that read the old time under
    // that mutex is already blocked when it is notified: no wake-up is lost.
    std::lock_guard lock(registry_mutex);
    for (detail::clock_listener* listener : registry())
        listener->on_clock_advanced();
}

} // namespace sched
