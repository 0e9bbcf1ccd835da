#include <sched/delayed_work_queue.hpp>

namespace sched {
template class basic_delayed_work_queue<std::chrono::steady_clock>;
} // namespace sched
