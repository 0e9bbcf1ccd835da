#ifndef SCHED_SCHED_HPP
#define SCHED_SCHED_HPP

/// Everything sched offers, in one include.

#include <sched/delayed_work_queue.hpp>
#include <sched/error.hpp>
#include <sched/future_state.hpp>
#include <sched/manual_clock.hpp>
#include <sched/pool_executor.hpp>
#include <sched/pool_options.hpp>
#include <sched/scheduled_future.hpp>
#include <sched/scheduled_thread_pool.hpp>
#include <sched/task_handle.hpp>

#endif // SCHED_SCHED_HPP
