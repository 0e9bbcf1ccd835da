#ifndef SCHED_DETAIL_TIMER_NODE_HPP
#define SCHED_DETAIL_TIMER_NODE_HPP

#include <sched/delayed_work_queue.hpp>
#include <sched/timer_task_state.hpp>

#include <atomic>
#include <memory>
#include <utility>

namespace sched::detail {

// How a timer task repeats.
enum class timer_period : unsigned char
{
    none,        // once
    fixed_delay, // next due = when this run started + period (java.util.Timer.schedule)
    fixed_rate,  // next due = this run's due time + period (scheduleAtFixedRate: catches up)
};

// A timer task's node in its timer's queue: its state, its schedule and its body. The timer
// keeps the node alive while it is queued or running (`keep`).
template <class Clock>
class timer_node : public basic_delayed_work_queue<Clock>::node
{
public:
    using time_point = typename Clock::time_point;
    using duration = typename Clock::duration;

    timer_node() = default;
    timer_node(const timer_node&) = delete;
    timer_node& operator=(const timer_node&) = delete;
    virtual ~timer_node() = default;

    timer_task_state state() const noexcept { return state_.load(std::memory_order_acquire); }

    bool cancel() noexcept
    {
        timer_task_state s = state_.load(std::memory_order_acquire);
        while (s != timer_task_state::cancelled &&
               !state_.compare_exchange_weak(s, timer_task_state::cancelled,
                                             std::memory_order_acq_rel))
        {}
        return s == timer_task_state::scheduled;
    }

    time_point scheduled_execution_time() const noexcept
    {
        return time_point(duration(last_due_.load(std::memory_order_acquire)));
    }

    // The timer, as it schedules the task: virgin → scheduled; false if it was not virgin.
    bool begin_schedule(timer_period kind, duration period) noexcept
    {
        timer_task_state expected = timer_task_state::virgin;
        if (!state_.compare_exchange_strong(expected, timer_task_state::scheduled,
                                            std::memory_order_acq_rel))
            return false;
        kind_ = kind;
        period_ = period;
        return true;
    }

    // The timer's thread, for a one-shot task about to run: scheduled → executed; false if it
    // was cancelled first.
    bool begin_last_run() noexcept
    {
        timer_task_state expected = timer_task_state::scheduled;
        return state_.compare_exchange_strong(expected, timer_task_state::executed,
                                              std::memory_order_acq_rel);
    }

    // The timer's thread, for a periodic task that threw: it ends, unless cancelled meanwhile.
    void end_by_failure() noexcept { (void)begin_last_run(); }

    // The timer's thread: runs the body once, for the run due at `due`.
    void run(time_point due)
    {
        last_due_.store(due.time_since_epoch().count(), std::memory_order_release);
        invoke();
    }

    timer_period kind() const noexcept { return kind_; }
    duration period() const noexcept { return period_; }

    // The reference that keeps the node alive while its timer has it (queued or running).
    std::shared_ptr<timer_node> keep;

private:
    virtual void invoke() = 0;

    std::atomic<timer_task_state> state_{timer_task_state::virgin};
    std::atomic<typename duration::rep> last_due_{time_point::min().time_since_epoch().count()};
    timer_period kind_ = timer_period::none; // set as it is scheduled, before it is queued
    duration period_{};
};

template <class Clock, class F>
class timer_node_for final : public timer_node<Clock>
{
public:
    template <class G>
    explicit timer_node_for(G&& f) : f_(std::forward<G>(f))
    {}

private:
    void invoke() override { f_(); }

    F f_;
};

} // namespace sched::detail

#endif // SCHED_DETAIL_TIMER_NODE_HPP
