#ifndef SCHED_SCHED_HPP
#define SCHED_SCHED_HPP

/// Everything sched offers, in one include.

#include <sched/cancel_after.hpp>
#include <sched/deadline.hpp>
#include <sched/delayed_work_queue.hpp>
#include <sched/error.hpp>
#include <sched/future_state.hpp>
#include <sched/manual_clock.hpp>
#include <sched/periodic_options.hpp>
#include <sched/pool_executor.hpp>
#include <sched/pool_options.hpp>
#include <sched/scheduled_future.hpp>
#include <sched/scheduled_thread_pool.hpp>
#include <sched/scheduler.hpp>
#include <sched/task_handle.hpp>
#include <sched/tick.hpp>
#include <sched/timer.hpp>
#include <sched/timer_task.hpp>
#include <sched/timer_task_state.hpp>

#endif // SCHED_SCHED_HPP
