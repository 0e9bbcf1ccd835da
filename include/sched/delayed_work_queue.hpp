#ifndef SCHED_DELAYED_WORK_QUEUE_HPP
#define SCHED_DELAYED_WORK_QUEUE_HPP

#include <sched/detail/atomic_mutex.hpp>
#include <sched/detail/clock_listener.hpp>
#include <sched/detail/heap_allocator.hpp>
#include <sched/detail/time.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <mutex>
#include <stop_token>
#include <vector>

namespace sched {

/// An unbounded blocking priority queue of tasks ordered by due time: Java's DelayedWorkQueue.
/**
 * Tasks come out in order of due time; tasks due at the same time come out in the order they were
 * pushed. A task leaves through take(), poll(), poll_for(), poll_until() or drain() once it is
 * due, or at any time through remove(), remove_if() or clear().
 *
 * The queue is intrusive and does not own its tasks: a task is any object derived from
 * basic_delayed_work_queue::node, which records where the task sits in the queue's heap, so
 * remove() takes O(log n) instead of a search. A task must outlive its stay in the queue and can
 * be in at most one queue at a time.
 *
 * Waiting follows the leader–follower pattern of Java's DelayedWorkQueue: of all threads waiting
 * for the head, one (the leader) sleeps until the head is due and the others sleep until woken.
 * A push wakes a waiter only when the new task became the head; a leaving waiter hands the
 * leadership on. The leader may also be an external_leader (see set_leader_finder()): an
 * io_context's timer that sleeps for its own tasks and takes them with take_led(), so that
 * nothing but the io_context wakes for them. Time is read from @p Clock; with
 * sched::manual_clock, waits end when the test advances the clock, never by real time passing.
 *
 * A due time of `time_point::max()` means "never": such a task stays queued until removed, even
 * if the clock reaches that time.
 *
 * @tparam Clock A std::chrono clock, std::chrono::steady_clock by default.
 *
 * @par Thread safety
 * Distinct objects: Safe. Shared objects: Safe; every member function may be called from any
 * thread.
 */
template <class Clock = std::chrono::steady_clock>
class basic_delayed_work_queue
{
public:
    using clock_type = Clock;
    using duration = typename Clock::duration;
    using time_point = typename Clock::time_point;

    /// Children per heap entry (entry i has children arity·i+1 … arity·i+arity). Chosen by
    /// measurement (docs/performance.md): eight keep the heap shallow, so arming and cancelling
    /// move fewer entries than with four (about 30% faster at 100k and 1M pending; 7% slower to
    /// pop).
    static constexpr std::size_t arity = 8;

    /// The part of a task that the queue orders: derive task types from it.
    class node
    {
    public:
        /// When the task is due if it is queued, or was last due if it has left the queue.
        time_point due_time() const noexcept
        {
            return time_point(duration(due_.load(std::memory_order_relaxed)));
        }

    protected:
        node() = default;
        node(const node&) = delete;
        node& operator=(const node&) = delete;
        ~node() = default;

    private:
        friend class basic_delayed_work_queue;

        // heap_[heap_index_].task == this while queued; not_queued otherwise. Written under the
        // queue's mutex; atomic so that another queue may read it to refuse the task.
        std::atomic<std::size_t> heap_index_{not_queued};
        std::atomic<typename duration::rep> due_{0};
        std::uint64_t seq_ = 0; // push order, breaking ties of due time; guarded by the mutex
    };

    /// Something other than a waiting thread that can sleep until a head is due: an Asio timer,
    /// whose io_context's threads then take their own tasks through take_led(). See
    /// set_leader_finder().
    class external_leader
    {
    public:
        /// Called under the queue's lock: wake at @p due, then call take_led() until it returns
        /// null. @p then is when the task after the head is due (max(): none), which it may get
        /// ready for. Returns false if it cannot (a waiting thread then leads instead).
        virtual bool lead_until(time_point due, time_point then) noexcept = 0;

        /// Called under the queue's lock: the head it was woken for is gone or led by another;
        /// it need not wake.
        virtual void step_down() noexcept = 0;

    protected:
        ~external_leader() = default;
    };

    /// Which external leader, if any, waits for a task at the head; null: the waiting threads.
    using leader_finder = external_leader* (*)(node& task) noexcept;

    basic_delayed_work_queue();

    /// Leaves any remaining tasks unqueued; the tasks themselves are not touched otherwise.
    ~basic_delayed_work_queue();

    basic_delayed_work_queue(const basic_delayed_work_queue&) = delete;
    basic_delayed_work_queue& operator=(const basic_delayed_work_queue&) = delete;

    /// Number of queued tasks, due or not.
    std::size_t size() const;

    /// Whether no task is queued.
    bool empty() const;

    /// The head (the task that comes out next), due or not, or nullptr if the queue is empty.
    /** The pointer may leave the queue at once through another thread. */
    node* peek();
    const node* peek() const;

    /// Adds @p task, due at @p due (Java's offer/add/put: it never blocks; the queue grows).
    /**
     * @returns true if @p task became the head; only then is a waiting thread woken.
     * @throws std::invalid_argument if @p task is already queued (here or elsewhere).
     * @throws std::bad_alloc if the queue cannot grow; the queue is then unchanged.
     */
    bool push(node& task, time_point due);

    /// Adds @p task, due @p delay from now: a negative delay means now, and delays too large for
    /// the clock saturate to `time_point::max()` ("never").
    template <class Rep, class Period>
    bool push(node& task, std::chrono::duration<Rep, Period> delay)
    {
        return push(task, detail::due_after<Clock>(delay));
    }

    /// Adds @p task as push() does, but only if @p allowed() returns true; it is called under the
    /// queue's lock, so a condition that its writer changes before taking the lock (a pool's
    /// shutdown, which then drains the queue) cannot change between the check and the push.
    /**
     * @returns whether @p task was added.
     * @throws std::invalid_argument, std::bad_alloc as push(); what @p allowed throws.
     */
    template <class Predicate>
    bool push_if(node& task, time_point due, Predicate allowed)
    {
        std::lock_guard lock(mutex_);
        if (!allowed())
            return false;
        (void)push_locked(task, due);
        return true;
    }

    /// Removes and returns the head once it is due, blocking until then.
    /**
     * @returns nullptr only if @p stop is requested before a task is due.
     */
    node* take(std::stop_token stop = {});

    /// Like take(), and calls @p on_take(task) under the queue's lock as the task leaves: whoever
    /// counts the tasks it holds outside the queue counts this one before anyone can see the
    /// queue without it (see if_empty()). @p on_take must not throw.
    template <class OnTake>
    node* take(std::stop_token stop, OnTake on_take)
    {
        return take_until(time_point::max(), stop, on_take);
    }

    /// Removes and returns the head if it is due; nullptr otherwise. Never blocks.
    node* poll();

    /// Like take(), but gives up and returns nullptr once @p timeout has passed on the clock.
    template <class Rep, class Period>
    node* poll_for(std::chrono::duration<Rep, Period> timeout, std::stop_token stop = {})
    {
        return poll_until(detail::due_after<Clock>(timeout), std::move(stop));
    }

    /// Like take(), but gives up and returns nullptr once the clock reaches @p deadline.
    node* poll_until(time_point deadline, std::stop_token stop = {});

    /// Calls @p f() under the queue's lock if no task is queued: no task is pushed or taken
    /// meanwhile.
    /** @returns what @p f returned; false, without calling it, if a task is queued. */
    template <class F>
    bool if_empty(F f)
    {
        std::lock_guard lock(mutex_);
        return heap_.empty() && f();
    }

    /// Removes @p task if it is queued here: O(log n) through its recorded heap index.
    /** @returns true if it was removed; false if it was not in this queue. */
    bool remove(node& task) noexcept;

    /// Like remove(), and if it removes @p task, calls @p on_remove(n) under the queue's lock,
    /// with n the number of tasks left: whoever decides something on the queue being empty
    /// decides it before anyone can push or take. @p on_remove must not throw.
    template <class OnRemove>
    bool remove(node& task, OnRemove on_remove) noexcept
    {
        std::lock_guard lock(mutex_);
        if (!remove_locked(task))
            return false;
        on_remove(heap_.size());
        return true;
    }

    /// Moves @p task, if it is queued here, to be due at @p due: O(log n) in place (it then comes
    /// after tasks already queued for the same time).
    /**
     * @returns true if it was queued here and moved; false otherwise (it was never queued, has
     * been taken, or is queued elsewhere), and then nothing changes.
     */
    bool reschedule(node& task, time_point due) noexcept;

    /// Moves every due task, at most @p max_tasks, to @p out in due order, in one lock hold
    /// (Java's drainTo).
    /**
     * @param out An output iterator accepting `node*`. If writing to it throws, the task being
     * written stays queued and the exception propagates.
     * @returns The number of tasks moved.
     */
    template <class OutputIt>
    std::size_t drain(OutputIt out,
                      std::size_t max_tasks = std::numeric_limits<std::size_t>::max());

    /// Moves every queued task, due or not, for which `pred(node&)` holds to @p out, in the
    /// order they would have come out, in one lock hold.
    /**
     * Takes O(n + k log k) for n queued tasks of which k match. @p pred runs under the queue's
     * lock and must not call into the queue. If @p pred throws, nothing is removed; if writing
     * to @p out throws, the tasks not yet written stay queued. The exception then propagates.
     * @returns The number of tasks moved.
     */
    template <class Predicate, class OutputIt>
    std::size_t remove_if(Predicate pred, OutputIt out);

    /// Lets external leaders wait for heads: whenever the head changes, @p find names the head's
    /// leader, which then sleeps instead of a waiting thread. The waiting threads leave a head to
    /// its leader until it is @p grace overdue (beyond the slack: see set_slack()), and then take
    /// it themselves (one of them wakes for that): a leader that is held up (its io_context is
    /// not running) delays the tasks behind it by no more. Call it before the queue is used. A
    /// leader must outlive its leadership: until dismiss() or the queue's destruction (which steps
    /// it down).
    void set_leader_finder(leader_finder find, duration grace) noexcept
    {
        find_ = find;
        grace_ = grace;
    }

    /// Lets the thread that waits for the head sleep until up to @p slack after it is due, so
    /// that one wake-up takes every task that fell due meanwhile (timer coalescing); an external
    /// leader is asked to wake that much later too. Tasks never run early; with a slack, up to
    /// that much later. Zero, the default, wakes on time. Call it before the queue is used: a
    /// thread already asleep keeps the slack it went to sleep with.
    void set_slack(duration slack) noexcept
    {
        std::lock_guard lock(mutex_);
        slack_ = slack;
    }

    /// For an external leader once it is woken: removes and returns the head if it is due and
    /// @p leader leads it, calling @p on_take(task) under the lock as take() does; otherwise
    /// returns nullptr, and the head (if any) gets its leader again, which may be @p leader.
    template <class OnTake>
    node* take_led(external_leader& leader, OnTake on_take) noexcept;

    /// Calls @p f() under the queue's lock, then finds the head another leader if @p leader
    /// led it: for a leader that is going away (f marks it so that it refuses to lead).
    template <class F>
    void dismiss(external_leader& leader, F f) noexcept;

    /// Unqueues every task and releases the queue's memory.
    /** @returns The number of tasks unqueued. */
    std::size_t clear() noexcept;

private:
    // The due time lives beside the pointer so that comparisons touch the tasks only for equal
    // due times (then the push order decides). Sixteen bytes: eight children fill two lines.
    struct entry
    {
        time_point due;
        node* task;
    };

    // Wakes this queue's waiters when a notifying clock (manual_clock) moves.
    class clock_waker final : public detail::clock_listener
    {
    public:
        explicit clock_waker(basic_delayed_work_queue& queue) noexcept : queue_(queue) {}
        void on_clock_advanced() noexcept override { queue_.wake_all(); }

    private:
        basic_delayed_work_queue& queue_;
    };

    struct stop_waker
    {
        basic_delayed_work_queue* queue;
        void operator()() const noexcept { queue->wake_all(); }
    };

    static constexpr std::size_t not_queued = std::numeric_limits<std::size_t>::max();
    static constexpr std::size_t min_capacity = 64;

    static bool earlier(const entry& a, const entry& b) noexcept
    {
        return a.due < b.due || (a.due == b.due && a.task->seq_ < b.task->seq_);
    }

    // time_point::max() is "never", even for a clock that has been advanced all the way.
    static bool is_due(time_point due, time_point now) noexcept
    {
        return due <= now && due != time_point::max();
    }

    bool push_locked(node& task, time_point due);
    template <class OnTake>
    node* take_until(time_point deadline, std::stop_token& stop, OnTake on_take);
    void wait_until(std::unique_lock<detail::atomic_mutex>& lock, time_point t);
    // Under the lock: finds the head its leader (external or a waiting thread, woken if `wake`);
    // returns whether an external leader has it.
    bool elect(bool wake) noexcept;
    // Under the lock, with a due head: whether a waiting thread leaves it to its external leader
    // (it is not yet overdue by the grace).
    bool left_to_leader(time_point now) const noexcept;
    // When whoever leads a task due at `due` wakes for it: a waiting thread, or an external
    // leader asked to.
    time_point wake_time(time_point due) const noexcept
    {
        return detail::saturating_add(due, slack_);
    }
    // When the waiting threads stop leaving a head due at `due` to its external leader: the
    // grace after the leader was asked to wake.
    time_point leader_deadline(time_point due) const noexcept
    {
        return detail::saturating_add(wake_time(due), grace_);
    }
    // The due time of the task after the head (the head's children hold it), or max().
    time_point second_due() const noexcept;
    void wake_all() noexcept;

    void place(std::size_t i, const entry& e) noexcept;
    std::size_t sift_up(std::size_t i) noexcept;
    std::size_t sift_down(std::size_t i) noexcept;
    void rebuild() noexcept;
    node* pop_head() noexcept;
    bool remove_locked(node& task) noexcept;
    void remove_at(std::size_t i) noexcept;
    void release_spare_capacity() noexcept;
    void check_invariants(std::size_t touched) const noexcept;

    mutable detail::atomic_mutex mutex_;
    std::condition_variable_any available_; // a new head, a leaving leader, a stop or a clock move
    // invariant: heap_[i].task->heap_index_ == i
    std::vector<entry, detail::heap_allocator<entry, arity>> heap_;
    std::uint64_t next_seq_ = 0;
    // The waiter sleeping until the head is due, if any; &external_ when that is external_.
    const void* leader_ = nullptr;
    // While external_ leads: the follower sleeping until the head is overdue by the grace, if any
    // (the others sleep until woken).
    const void* backup_ = nullptr;
    external_leader* external_ = nullptr;
    time_point external_due_{}; // what external_ sleeps until; max() once it has woken
    leader_finder find_ = nullptr;
    duration grace_{};
    duration slack_{};
    [[no_unique_address]] std::conditional_t<detail::notifying_clock<Clock>, clock_waker, std::byte>
        waker_;
};

/// The queue on std::chrono::steady_clock.
using delayed_work_queue = basic_delayed_work_queue<>;

} // namespace sched

#include <sched/impl/delayed_work_queue.hpp>

namespace sched {
extern template class basic_delayed_work_queue<std::chrono::steady_clock>;
} // namespace sched

#endif // SCHED_DELAYED_WORK_QUEUE_HPP
