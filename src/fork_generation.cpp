#include <sched/detail/fork_generation.hpp>

#include <pthread.h>

namespace sched::detail {

constinit std::atomic<std::uint32_t> forks{0};

namespace {

void count_in_child() noexcept
{
    forks.fetch_add(1, std::memory_order_relaxed);
}

// Made before the program's static objects, as the library's other fork handlers are (see
// recycler.cpp): a child handler that the program registers runs after this one, and sees the
// child's generation.
struct fork_handler
{
    fork_handler() noexcept { (void)pthread_atfork(nullptr, nullptr, &count_in_child); }
};

__attribute__((init_priority(101))) const fork_handler handler;

} // namespace
} // namespace sched::detail
