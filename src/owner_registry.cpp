#include <sched/detail/owner_registry.hpp>

#include <algorithm>
#include <mutex>
#include <stdexcept>

namespace sched::detail {

namespace {

constinit std::mutex registry_mutex; // adders and removers; find() takes no lock
// No number below it is free. Guarded by registry_mutex.
constinit owner_registry::number lowest_free = 1;

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
