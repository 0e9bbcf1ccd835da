#include <sched/detail/parking.hpp>

#include <cstddef>
#include <cstdint>
#include <new>

#include <pthread.h>

namespace sched::detail {
namespace {

constexpr std::size_t slot_count = 64; // the hash below yields 6 bits

struct alignas(64) padded_slot // one cache line each: waiters on distinct slots do not collide
{
    parking_slot slot;
};

struct slot_table
{
    padded_slot slots[slot_count];
};

// Made on first use and never destroyed: a thread may still wait in a slot as the process exits
// (a detached thread in a future's wait(), whose pool is left to the end), and destroying a
// condition variable that a thread waits on blocks for ever (glibc) or is undefined.
slot_table& table() noexcept
{
    alignas(slot_table) static std::byte storage[sizeof(slot_table)];
    static slot_table* const made = ::new (static_cast<void*>(storage)) slot_table();
    return *made;
}

// A child forked while a thread of the parent waits in a slot, or holds its mutex, gets none of
// those threads: the child makes the table again, over the old one (destroying that would block),
// as its slots' condition variables would still count the parent's waiters, and glibc's
// notify_all() waits for them for ever, and a mutex held at the fork stays locked.
void remake_in_child() noexcept
{
    ::new (static_cast<void*>(&table())) slot_table();
}

// Made before the program's static objects, as the library's other fork handlers are (see
// recycler.cpp): a child handler that the program registers runs after this one, and may wait
// for tasks. The table is made here too, before any thread might fork while another makes it.
struct fork_handler
{
    fork_handler() noexcept
    {
        (void)table();
        (void)pthread_atfork(nullptr, nullptr, &remake_in_child);
    }
};

__attribute__((init_priority(101))) const fork_handler handler;

} // namespace

parking_slot& parking_slot_for(const void* address) noexcept
{
    // Fibonacci hashing of the address, without the alignment bits that never differ.
    const auto bits = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(address));
    return table().slots[((bits >> 4) * 0x9E3779B97F4A7C15ull) >> 58].slot; // top 6 bits: 0..63
}

} // namespace sched::detail
