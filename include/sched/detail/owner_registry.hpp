#ifndef SCHED_DETAIL_OWNER_REGISTRY_HPP
#define SCHED_DETAIL_OWNER_REGISTRY_HPP

#include <sched/detail/visibility.hpp>

#include <atomic>
#include <cstdint>

SCHED_VISIBILITY_BEGIN

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

    // Frees `n`: no task names it any more. New pins find no owner at once; the number is free
    // once the pins of it have ended.
    static void remove(number n) noexcept;

    // The owner registered as `n` (not 0), which is still registered.
    static void* find(number n) noexcept { return owners_[n].load(std::memory_order_acquire); }

    // The owner registered as `n` (not 0), which may be removed meanwhile: non-null, it stays
    // registered until unpin(n). Null: `n` is free (unpin() is not called then).
    static void* pin(number n) noexcept
    {
        // Sequentially consistent, as remove()'s: either this load sees the owner gone, or
        // remove() sees this pin.
        pins_[n].fetch_add(1);
        void* const owner = owners_[n].load();
        if (!owner || owner == &removing_)
        {
            unpin(n);
            return nullptr;
        }
        return owner;
    }

    static void unpin(number n) noexcept
    {
        if (pins_[n].fetch_sub(1, std::memory_order_release) == 1)
            pins_[n].notify_all();
    }

private:
    // Each number's owner: null if free, &removing_ while remove() waits for its pins (not free
    // yet, so that a new owner's pins cannot keep that wait going).
    static std::atomic<void*> owners_[capacity + 1];
    static char removing_;
    static std::atomic<std::uint32_t> pins_[capacity + 1];
};

// A pin of the owner that a task names (see owner_registry::pin()).
class pinned_owner
{
public:
    explicit pinned_owner(owner_registry::number n) noexcept
        : number_(n), owner_(owner_registry::pin(n))
    {}
    pinned_owner(const pinned_owner&) = delete;
    pinned_owner& operator=(const pinned_owner&) = delete;
    ~pinned_owner()
    {
        if (owner_)
            owner_registry::unpin(number_);
    }

    // Null: no owner has that number.
    void* get() const noexcept { return owner_; }

private:
    const owner_registry::number number_;
    void* const owner_;
};

// An owner's registration, until close() or its destruction.
class registered_owner
{
public:
    explicit registered_owner(void* owner) : number_(owner_registry::add(owner)) {}
    registered_owner(const registered_owner&) = delete;
    registered_owner& operator=(const registered_owner&) = delete;
    ~registered_owner() { close(); }

    owner_registry::number number() const noexcept { return number_; }

    // Frees the number, once no pin holds it: for an owner that must stay whole while pinned,
    // called before it starts to come apart. No task may name it any more.
    void close() noexcept
    {
        if (!closed_)
        {
            closed_ = true;
            owner_registry::remove(number_);
        }
    }

private:
    const owner_registry::number number_;
    bool closed_ = false;
};

} // namespace sched::detail

SCHED_VISIBILITY_END

#endif // SCHED_DETAIL_OWNER_REGISTRY_HPP
