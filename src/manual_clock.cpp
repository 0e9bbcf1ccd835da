#include <sched/manual_clock.hpp>

#include <algorithm>
#include <mutex>
#include <stdexcept>
#include <vector>

namespace sched {
namespace {

// Lock order: registry_mutex, then a listener's own lock (taken inside on_clock_advanced).
std::mutex registry_mutex;
std::vector<detail::clock_listener*>& registry()
{
    static std::vector<detail::clock_listener*> listeners;
    return listeners;
}

} // namespace

void manual_clock::add(duration d)
{
    rep current = ticks_.load();
    rep next;
    do // saturate at time_point::max() instead of wrapping into the past
        next = current > duration::max().count() - d.count() ? duration::max().count()
                                                             : current + d.count();
    while (!ticks_.compare_exchange_weak(current, next));
    notify_listeners();
}

void manual_clock::move_to(time_point t)
{
    rep current = ticks_.load();
    do
    {
        if (t.time_since_epoch().count() < current)
            throw std::invalid_argument("manual_clock::advance_to: time point is in the past");
    } while (!ticks_.compare_exchange_weak(current, t.time_since_epoch().count()));
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
