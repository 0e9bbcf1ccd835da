#include <sched/detail/asymmetric_fence.hpp>

#if defined(__linux__)
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace sched::detail {

constinit std::atomic<asymmetric_fence_support> asymmetric_fences{
    asymmetric_fence_support::unknown};

namespace {

#if defined(__linux__)
bool membarrier(int command) noexcept
{
    return syscall(SYS_membarrier, command, 0U, 0) == 0;
}
#endif

struct registration
{
    registration() noexcept
    {
#if defined(__linux__)
        const bool registered = membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED);
#else
        const bool registered = false;
#endif
        asymmetric_fences.store(registered ? asymmetric_fence_support::available
                                           : asymmetric_fence_support::unavailable,
                                std::memory_order_relaxed);
    }
};

__attribute__((init_priority(101))) const registration registered;

} // namespace

#if defined(__linux__)
bool heavy_fence() noexcept
{
    return membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED);
}
#endif

} // namespace sched::detail
