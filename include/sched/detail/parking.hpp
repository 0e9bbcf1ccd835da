#ifndef SCHED_DETAIL_PARKING_HPP
#define SCHED_DETAIL_PARKING_HPP

#include <sched/detail/visibility.hpp>

#include <condition_variable>
#include <mutex>

SCHED_VISIBILITY_BEGIN

namespace sched::detail {

// Where threads block until a task completes. A fixed, process-wide table of slots shared by
// address, so a task carries no mutex or condition variable of its own and pays for waking only
// when somebody waits.
struct parking_slot
{
    std::mutex mutex;
    std::condition_variable completed;
};

parking_slot& parking_slot_for(const void* address) noexcept;

} // namespace sched::detail

SCHED_VISIBILITY_END

#endif // SCHED_DETAIL_PARKING_HPP
