#include <sched/scheduled_thread_pool.hpp>

namespace sched {
template class basic_scheduled_thread_pool<std::chrono::steady_clock>;
} // namespace sched
