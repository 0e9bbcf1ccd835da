#include <sched/detail/parking.hpp>

#include <cstddef>
#include <cstdint>

namespace sched::detail {
namespace {

constexpr std::size_t slot_count = 64; // the hash below yields 6 bits

struct alignas(64) padded_slot // one cache line each: waiters on distinct slots do not collide
{
    parking_slot slot;
};

padded_slot slots[slot_count];

} // namespace

parking_slot& parking_slot_for(const void* address) noexcept
{
    // Fibonacci hashing of the address, without the alignment bits that never differ.
    const auto bits = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(address));
    return slots[((bits >> 4) * 0x9E3779B97F4A7C15ull) >> 58].slot; // top 6 bits: 0..63
}

} // namespace sched::detail
