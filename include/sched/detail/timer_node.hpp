#ifndef SCHED_DETAIL_TIMER_NODE_HPP
#define SCHED_DETAIL_TIMER_NODE_HPP

#include <sched/delayed_work_queue.hpp>
#include <sched/tick.hpp>
#include <sched/timer_task_state.hpp>

#include <sched/detail/periodic_schedule.hpp>
#include <sched/detail/visibility.hpp>

#include <atomic>
#include <concepts>
#include <memory>
#include <optional>
#include <utility>

SCHED_VISIBILITY_BEGIN

namespace sched::detail {

// A timer task's node in its timer's queue: its state, its schedule and its body. The timer
// keeps the node alive while it is queued or running (`keep`).
template <class Clock>
class timer_node : public basic_delayed_work_queue<Clock>::node
{
public:
    using time_point = typename Clock::time_point;
    using duration = typename Clock::duration;
    using tick_type = basic_tick<Clock>;

    timer_node() = default;
    timer_node(const timer_node&) = delete;
    timer_node& operator=(const timer_node&) = delete;
    virtual ~timer_node() = default;

    timer_task_state state() const noexcept
    {
        const stage s = state_.load(std::memory_order_acquire);
        return s == stage::running ? timer_task_state::scheduled : static_cast<timer_task_state>(s);
    }

    // A task never scheduled lets go of its body at once (no timer has it to let go of).
    bool cancel() noexcept
    {
        stage s = state_.load(std::memory_order_acquire);
        while (s != stage::cancelled &&
               !state_.compare_exchange_weak(s, stage::cancelled, std::memory_order_acq_rel))
        {}
        if (s == stage::virgin)
            release_body();
        return s == stage::scheduled || s == stage::running;
    }

    time_point scheduled_execution_time() const noexcept
    {
        return time_point(duration(last_due_.load(std::memory_order_acquire)));
    }

    // The timer, as it schedules the task (a periodic one with its schedule): virgin →
    // scheduled; false if it was not virgin.
    bool begin_schedule(std::optional<periodic_schedule<Clock>>& schedule) noexcept
    {
        if (!change(stage::virgin, stage::scheduled))
            return false;
        schedule_ = std::move(schedule);
        return true;
    }

    // The timer, as the task it began to schedule could not be queued: scheduled → virgin, so
    // that it may be scheduled again; or, if cancelled meanwhile, it lets go of its body. Not
    // under the timer's lock (see let_go()).
    void abandon_schedule() noexcept
    {
        schedule_.reset(); // first: once virgin, another timer may schedule the task
        if (!change(stage::scheduled, stage::virgin))
            release_body();
    }

    // The timer's thread, for a one-shot task about to run: scheduled → executed; false if it
    // was cancelled first.
    bool begin_last_run() noexcept { return change(stage::scheduled, stage::executed); }

    // The timer's thread, for a periodic task about to run: false if it was cancelled first. A
    // cancel() from then on lets this run finish and prevents the next (no run begins after a
    // cancel() that returned true).
    bool begin_run() noexcept { return change(stage::scheduled, stage::running); }

    // The timer's thread, after a periodic task's run that did not end it.
    void end_run() noexcept { (void)change(stage::running, stage::scheduled); }

    // The timer's thread, for a periodic task that ends (it threw, or its next run cannot be
    // queued): it has executed, unless cancelled meanwhile.
    void end_by_failure() noexcept
    {
        if (!change(stage::running, stage::executed))
            (void)change(stage::scheduled, stage::executed);
    }

    // The timer's thread: runs the body once, for the run that `tick` describes.
    void run(const tick_type& tick)
    {
        last_due_.store(tick.scheduled.time_since_epoch().count(), std::memory_order_release);
        invoke(tick);
    }

    // A periodic task's schedule (the timer's thread only); empty for a one-shot task.
    std::optional<periodic_schedule<Clock>>& schedule() noexcept { return schedule_; }

    // The timer lets go of a node that will not run again: its body goes first, so that what it
    // holds goes now even while task objects keep the node, a copy of the task in its own
    // callable included (that cycle would keep both for ever). Not under the timer's lock: the
    // body's destructor may call the timer.
    static void let_go(std::shared_ptr<timer_node> keep) noexcept { keep->release_body(); }

    // The reference that keeps the node alive while its timer has it (queued or running).
    std::shared_ptr<timer_node> keep;
    // Links the nodes a timer takes out of its queue at once, without allocating.
    timer_node* next_taken = nullptr;

private:
    // timer_task_state, and a periodic task's run under way (which state() reads as scheduled).
    enum class stage
    {
        virgin = static_cast<int>(timer_task_state::virgin),
        scheduled = static_cast<int>(timer_task_state::scheduled),
        executed = static_cast<int>(timer_task_state::executed),
        cancelled = static_cast<int>(timer_task_state::cancelled),
        running,
    };

    bool change(stage from, stage to) noexcept
    {
        return state_.compare_exchange_strong(from, to, std::memory_order_acq_rel);
    }

    virtual void invoke(const tick_type& tick) = 0;
    virtual void release_body() noexcept = 0;

    std::atomic<stage> state_{stage::virgin};
    std::atomic<typename duration::rep> last_due_{time_point::min().time_since_epoch().count()};
    std::optional<periodic_schedule<Clock>> schedule_; // set before it is queued
};

template <class Clock, class F>
class timer_node_for final : public timer_node<Clock>
{
public:
    template <class G>
    explicit timer_node_for(G&& f) : f_(std::in_place, std::forward<G>(f))
    {}

private:
    void invoke(const basic_tick<Clock>& tick) override
    {
        if constexpr (std::invocable<F&, const basic_tick<Clock>&>)
            (*f_)(tick);
        else
            (*f_)();
    }

    void release_body() noexcept override { f_.reset(); }

    std::optional<F> f_; // until the timer lets go of the task for good
};

} // namespace sched::detail

SCHED_VISIBILITY_END

#endif // SCHED_DETAIL_TIMER_NODE_HPP
