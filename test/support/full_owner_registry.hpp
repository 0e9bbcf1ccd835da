#ifndef SCHED_TEST_FULL_OWNER_REGISTRY_HPP
#define SCHED_TEST_FULL_OWNER_REGISTRY_HPP

#include <sched/detail/owner_registry.hpp>

#include <cstddef>
#include <deque>
#include <stdexcept>

namespace sched::test {

// Fills the registry of task owners (each registration stands in for a pool alive) and holds
// it full until it frees numbers or goes.
class full_owner_registry
{
public:
    full_owner_registry()
    {
        try
        {
            for (;;)
                held_.emplace_back(&owner_);
        }
        catch (const std::length_error&) // full
        {}
    }

    // How many numbers it holds: those that other owners alive did not.
    std::size_t size() const noexcept { return held_.size(); }

    // Frees one of them and returns it.
    detail::owner_registry::number free_one()
    {
        const detail::owner_registry::number n = held_.back().number();
        held_.pop_back();
        return n;
    }

private:
    int owner_ = 0;
    std::deque<detail::registered_owner> held_;
};

} // namespace sched::test

#endif // SCHED_TEST_FULL_OWNER_REGISTRY_HPP
