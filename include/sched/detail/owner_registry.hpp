#ifndef SCHED_DETAIL_OWNER_REGISTRY_HPP
#define SCHED_DETAIL_OWNER_REGISTRY_HPP

#include <atomic>
#include <cstdint>

namespace sched::detail {

// The task owners (pools) alive now, each by a number from 1 to `capacity`: a task names its
// owner by number, in a few bits of a word it has anyway, rather than by an 8-byte pointer
// (issue 6's W2: bytes per pending task). It lives in the compiled library: a process must link
// one copy of that (a shared libsched if several shared objects use sched), as for the parking
// slots that futures wait on.
class owner_registry
{
public:
    using number = std::uint16_t;

    // How many owners may be alive at once (a task keeps the number in 13 bits; 0 is no one).
    static constexpr number capacity = (1u << 13) - 1;

    // Gives `owner` the lowest free number. Throws std::length_error if `capacity` owners are
    // registered already.
    static number add(void* owner);

    // Frees `n`: no task names it any more.
    static void remove(number n) noexcept;

    // The owner registered as `n` (not 0), which is still registered.
    static void* find(number n) noexcept { return owners_[n].load(std::memory_order_acquire); }

private:
    static std::atomic<void*> owners_[capacity + 1];
};

// An owner's registration, for as long as it lives.
class registered_owner
{
public:
    explicit registered_owner(void* owner) : number_(owner_registry::add(owner)) {}
    registered_owner(const registered_owner&) = delete;
    registered_owner& operator=(const registered_owner&) = delete;
    ~registered_owner() { owner_registry::remove(number_); }

    owner_registry::number number() const noexcept { return number_; }

private:
    const owner_registry::number number_;
};

} // namespace sched::detail

#endif // SCHED_DETAIL_OWNER_REGISTRY_HPP
