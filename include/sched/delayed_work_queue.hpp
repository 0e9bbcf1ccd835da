#ifndef SCHED_DELAYED_WORK_QUEUE_HPP
#define SCHED_DELAYED_WORK_QUEUE_HPP

#include <sched/detail/atomic_mutex.hpp>
#include <sched/detail/clock_listener.hpp>
#include <sched/detail/heap_array.hpp>
#include <sched/detail/time.hpp>
#include <sched/detail/visibility.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <type_traits>
#include <vector>

SCHED_VISIBILITY_BEGIN

namespace sched {

namespace detail {
// Lets tests bring a queue's main heap to the end of its push orders (defined by the tests).
template <class Queue>
struct queue_access;
} // namespace detail

/// An unbounded blocking priority queue of tasks ordered by due time: Java's DelayedWorkQueue.
/**
 * Tasks come out in order of due time; tasks due at the same time come out in the order they were
 * pushed (with a far tier, see set_far_tier() for one exception). A task leaves through take(),
 * poll(), poll_for(), poll_until() or drain() once it is due, or at any time through remove(),
 * remove_if() or clear().
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
 * With a far tier (see set_far_tier()), tasks due far ahead wait in heaps of their own, one per
 * group of pushing threads, so that threads arming and cancelling far timeouts do not contend for
 * one lock; they move to the main heap shortly before they are due.
 *
 * A due time of `time_point::max()` means "never": such a task stays queued until removed, even
 * if the clock reaches that time.
 *
 * @tparam Clock A std::chrono clock, std::chrono::steady_clock by default, whose duration counts
 * ticks in a signed 64-bit integer (as every standard clock's does).
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
    static_assert(std::is_integral_v<typename duration::rep> &&
                      std::is_signed_v<typename duration::rep> &&
                      sizeof(typename duration::rep) == sizeof(std::int64_t),
                  "delayed_work_queue: the clock must count ticks in a signed 64-bit integer");

    /// Children per heap entry (entry i has children arity·i+1 … arity·i+arity). Chosen by
    /// measurement (docs/performance.md): eight keep the heap shallow, so arming and cancelling
    /// move fewer entries than with four (about 30% faster at 100k and 1M pending; 7% slower to
    /// pop).
    static constexpr std::size_t arity = 8;

    /// The part of a task that the queue orders: derive task types from it.
    class node
    {
    public:
        /// When the task was last due, once it has left the queue (taken, removed, cleared), or
        /// would have been due if push_if() refused it (the clock's epoch before its first push);
        /// nullopt while it is queued, here or elsewhere (ask its queue: due_time()). Exact, but
        /// for the 2^60 ticks from 2^62 ticks before the epoch (in nanoseconds, the 36.5 years
        /// from 146 years before it), which read as the tick before them.
        std::optional<time_point> last_due_time() const noexcept
        {
            const std::int64_t recorded = place_.load(std::memory_order_relaxed);
            if (is_place(recorded))
                return std::nullopt;
            return time_point(duration(recorded));
        }

    protected:
        node() = default;
        node(const node&) = delete;
        node& operator=(const node&) = delete;
        ~node() = default;

    private:
        friend class basic_delayed_work_queue;

        bool queued() const noexcept { return is_place(place_.load(std::memory_order_relaxed)); }

        // Where the task is queued (its heap's number, its position there and the high bits of
        // its push order: see place_of()), or when it was last due: one word, so that a queued
        // task's due time and the rest of its push order live in its heap's entry only (issue
        // 6's W2: bytes per pending task). Written under the lock of the heap that holds it;
        // atomic so that a remover may read it before taking that lock, another queue refuse the
        // task, and anyone read its last due time.
        std::atomic<std::int64_t> place_{0};
    };

    /// Where a task stood among the tasks due at the same time as it left the queue, for
    /// push_again_if(): take() and take_led() hand it to an `on_take` that accepts one. A
    /// default-constructed one keeps no place.
    class kept_place
    {
    public:
        kept_place() noexcept = default;

    private:
        friend class basic_delayed_work_queue;
        explicit kept_place(std::uint64_t value) noexcept : value_(value) {}
        // 0: none; else its heap's renumbering count and the push order (see heap::kept()).
        std::uint64_t value_ = 0;
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

    private:
        friend class basic_delayed_work_queue;
        // Under the queue's lock: when it last took a task (a leader working through a backlog
        // keeps it).
        time_point took_at_ = time_point::min();
    };

    /// Which external leader, if any, waits for @p task when it is at the head; null: the waiting
    /// threads. Called with or without the queue's lock, for tasks at the head or being pushed
    /// (a led task never goes to the far tier): it must not call into the queue.
    using leader_finder = external_leader* (*)(node& task) noexcept;

    /// Starts the thread that gives memory back to the system (see background_unmap.hpp), if it
    /// is not running yet.
    /** @throws std::invalid_argument if the queue is at an address that push() refuses: it
     * queues a node of its own. */
    basic_delayed_work_queue();

    /// Leaves any remaining tasks unqueued; the tasks themselves are not touched otherwise.
    ~basic_delayed_work_queue();

    basic_delayed_work_queue(const basic_delayed_work_queue&) = delete;
    basic_delayed_work_queue& operator=(const basic_delayed_work_queue&) = delete;

    /// Number of queued tasks, due or not (with a far tier, under every lock of the queue).
    std::size_t size() const;

    /// Whether no task is queued.
    bool empty() const;

    /// The head (the task that comes out next), due or not, or nullptr if the queue is empty.
    /** The pointer may leave the queue at once through another thread. */
    node* peek();
    const node* peek() const;

    /// When @p task is due, if it is queued here; nullopt if it is not (see
    /// node::last_due_time()). Takes the lock that guards it.
    std::optional<time_point> due_time(const node& task) const noexcept;

    /// Adds @p task, due at @p due (Java's offer/add/put: it never blocks; the queue grows).
    /**
     * @returns true if @p task became the head (the task peek() shows); only then is a waiting
     * thread woken. A task that goes to the far tier (see set_far_tier()) returns false.
     * @throws std::invalid_argument if @p task is already queued (here or elsewhere), or is at
     * an address above 2^48 or with a tagged top byte (AArch64's memory tagging), which the
     * queue's entries cannot hold.
     * @throws std::bad_alloc if the queue cannot grow, or the heap it goes to holds 2^28 tasks
     * already; the queue is then unchanged.
     */
    bool push(node& task, time_point due);

    /// Adds @p task, due @p delay from now: a negative delay means now, and delays too large for
    /// the clock saturate to `time_point::max()` ("never").
    template <class Rep, class Period>
    bool push(node& task, std::chrono::duration<Rep, Period> delay)
    {
        return push(task, detail::due_after<Clock>(delay));
    }

    /// Adds @p task as push() does, but only if @p allowed() returns true; it is called once,
    /// under the queue's lock or, for a task that goes to the far tier, perhaps under its
    /// shard's lock only. Either way a condition that its writer changes before taking every
    /// lock of the queue (a pool's shutdown, which then drains the queue) cannot change between
    /// the check and the push.
    /**
     * @returns whether @p task was added.
     * @throws std::invalid_argument, std::bad_alloc as push(); what @p allowed throws.
     */
    template <class Predicate>
    bool push_if(node& task, time_point due, Predicate allowed);

    /// Like push_if(), for a task that was queued before and has left (a periodic task's next
    /// run): among tasks due at the same time it takes @p place, the place it had when it left
    /// (as Java's periodic tasks keep their sequence number), rather than go after those pushed
    /// since. It takes a new place in a queue with a far tier (open or closed), as tasks do when
    /// they move out of the far tier, so that the order stays that of the pushes; and after the
    /// queue has renumbered its places (once every 2^44 pushes and moves, so that they never run
    /// out) since the task left. @p place must come from this queue.
    template <class Predicate>
    bool push_again_if(node& task, time_point due, kept_place place, Predicate allowed);

    /// Removes and returns the head once it is due, blocking until then.
    /**
     * @returns nullptr only if @p stop is requested before a task is due.
     */
    node* take(std::stop_token stop = {});

    /// Like take(), and calls @p on_take(task), or @p on_take(task, place) if it takes the task's
    /// kept_place too, under the queue's lock as the task leaves: whoever counts the tasks it
    /// holds outside the queue counts this one before anyone can see the queue without it (see
    /// under_locks()). @p on_take must not throw.
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

    /// Calls @p f(empty) under the queue's locks, `empty` saying whether no task is queued: no
    /// task is pushed or taken meanwhile.
    /** @returns what @p f returned. */
    template <class F>
    decltype(auto) under_locks(F f);

    /// Removes @p task if it is queued here: O(log n) through its recorded heap index.
    /** @returns true if it was removed; false if it was not in this queue. */
    bool remove(node& task) noexcept;

    /// Like remove(), and if it removes @p task, calls @p on_remove(emptied) under the lock it
    /// removed it under, emptied saying whether no task is left: whoever decides something on
    /// the queue being empty decides it before anyone can push or take. While the far tier is
    /// open (see set_far_tier()), emptied is false, which needs no other lock. @p on_remove must
    /// not throw.
    template <class OnRemove>
    bool remove(node& task, OnRemove on_remove) noexcept;

    /// Moves @p task, if it is queued here, to be due at @p due: O(log n) in place (it then comes
    /// after tasks already queued for the same time; a task that stays in the far tier counts as
    /// pushed again by the thread that first pushed it, for the exceptions in set_far_tier()).
    /// A task in the main heap moved past a far task goes where a push would put it: to the far
    /// tier, or it stays (see set_far_tier()).
    /**
     * @returns true if it was queued here and moved; false otherwise (it was never queued, has
     * been taken, or is queued elsewhere), and then nothing changes.
     */
    bool reschedule(node& task, time_point due) noexcept;

    /// For tasks whose due time moves later without the queue being told (a deadline pushed back
    /// lazily): while the main heap's head is due by @p before and `later_due(node&)` gives a later
    /// due time for it (a `std::optional<time_point>`; nullopt, or a time not later, stops), moves
    /// it there, as reschedule() does; at most @p max tasks, in one lock hold. Moving them early,
    /// together, saves a wake-up at each due time they no longer have. A head whose later due time
    /// is at or after a task in the far tier (see set_far_tier()) goes where a push would put it,
    /// as reschedule() moves it. @p later_due is called under the queue's lock and must not
    /// throw.
    /** @returns how many it moved. */
    template <class LaterDue>
    std::size_t defer_heads(time_point before, std::size_t max, LaterDue later_due) noexcept;

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

    /// Moves every queued task, due or not, for which `pred(node&)` (or `pred(node&, due)`, given
    /// the task's due time) holds to @p out, in the order they would have come out, in one lock
    /// hold.
    /**
     * Takes O(n + k log k) for n queued tasks of which k match; with a far tier, every far task
     * first moves to the main heap, O(f log n) for f of them. @p pred runs under the queue's
     * lock and must not call into the queue. If @p pred throws, nothing is removed; if writing
     * to @p out throws, the tasks not yet written stay queued; if the far tasks cannot all move
     * (std::bad_alloc), nothing is removed. The exception then propagates.
     * @returns The number of tasks moved.
     */
    template <class Predicate, class OutputIt>
    std::size_t remove_if(Predicate pred, OutputIt out);

    /// Lets external leaders wait for heads: whenever the head changes, @p find names the head's
    /// leader, which then sleeps instead of a waiting thread. The waiting threads leave a head to
    /// its leader until it is @p grace overdue (beyond the slack: see set_slack()) and, while the
    /// leader has kept the lead, it has taken none for @p grace (ten graces overdue at most), and
    /// then take it themselves (one of them wakes for that): a leader that is held up (its
    /// io_context is not running) delays the tasks behind it by no more, and one working through
    /// a backlog (tasks due together) is left to it, with no thread contending for each task. A
    /// thread asleep for a later head wakes for an earlier one at most once per ten graces (heads
    /// that move earlier over and over do not wake it each time), so a head that arrives within
    /// those may wait until they end. With a far tier, a leader waits for the first task behind
    /// the tier's marker (see set_far_tier()), and a waiting thread wakes for the marker, when it
    /// is due.
    /// Call it before the queue is used. A leader must outlive its leadership: until dismiss() or
    /// the queue's destruction (which steps it down).
    /** @throws std::invalid_argument if @p grace is negative. */
    void set_leader_finder(leader_finder find, duration grace)
    {
        check_not_negative(grace, "delayed_work_queue::set_leader_finder: negative grace");
        find_ = find;
        grace_ = grace;
    }

    /// Lets the thread that waits for the head sleep until up to @p slack after it is due, so
    /// that one wake-up takes every task that fell due meanwhile (timer coalescing); an external
    /// leader is asked to wake that much later too. A head with no other task due within the
    /// slack after it has nothing to share a wake-up with: it wakes on time. Tasks never run
    /// early; with a slack, up to that much later. Zero, the default, wakes on time. Call it
    /// before the queue is used: a thread already asleep keeps the time it went to sleep until.
    /** @throws std::invalid_argument if @p slack is negative. */
    void set_slack(duration slack)
    {
        check_not_negative(slack, "delayed_work_queue::set_slack: negative slack");
        std::lock_guard lock(mutex_);
        slack_ = slack;
    }

    /// Lets the thread that waits for the head (or its external leader) wake @p spin before it
    /// is due, and then poll the clock until it is due, so that it runs on time instead of a
    /// wake-up's delay late. Polling keeps that thread busy; the slack is not used meanwhile.
    /// Zero, the default: sleep until the head is due (plus the slack). A clock that notifies
    /// (manual_clock) never polls. Call it before the queue is used.
    /** @throws std::invalid_argument if @p spin is negative. */
    void set_spin(duration spin)
    {
        check_not_negative(spin, "delayed_work_queue::set_spin: negative spin");
        std::lock_guard lock(mutex_);
        if constexpr (!detail::notifying_clock<Clock>)
            spin_ = spin;
    }

    /// How late the queue may hand out a task on purpose: the slack, unless a spin is set (then
    /// the head is polled for, and handed out on time).
    duration deliberate_lateness() const noexcept
    {
        return spin_ == duration::zero() ? slack_ : duration::zero();
    }

    /// Gives the queue a far tier: a task due at least @p horizon ahead, with no external leader,
    /// goes to one of @p shards heaps, each with its own lock, chosen by the pushing thread; it
    /// moves to the main heap, with the other far tasks due within @p horizon, half a horizon or
    /// more before it is due (a waiting thread wakes for that, or a push, poll or take_led() that
    /// finds it time; an external leader keeps waiting for its head meanwhile), 64 at a time: the
    /// next 64 move when the last of those before them is due (so no later than they are). Tasks
    /// still come out in due order, and tasks due at the same time in the order they were pushed,
    /// except two pushed from different threads that were both in the far tier: they come out in
    /// either order; and a task that stays in the main heap though due beyond the horizon while
    /// the tier is open (one an external leader waits for, see set_leader_finder(), or one moved
    /// there by reschedule() or defer_heads() while its shard could not grow for want of memory)
    /// may come out before far tasks pushed before it and due at the same time.
    /// (Which tasks are far is judged from a recent clock reading; after a while with no thread
    /// looking at the clock, a task due sooner may count as far.) When memory runs out as far tasks
    /// move, those that could not leave the far tier try again a millisecond later (a tick of a
    /// coarser clock; on a clock that notifies, at the next take or poll), for as long as memory
    /// stays short: tasks due meanwhile come out, even before a far task that is overdue (which
    /// peek() may show all the same). Zero horizon or shards: none (the default). Call it before
    /// the queue is used.
    /**
     * @throws std::invalid_argument if @p horizon is negative or @p shards is above
     * max_far_shards.
     */
    void set_far_tier(duration horizon, std::size_t shards);

    /// Most shards a far tier can have.
    static constexpr std::size_t max_far_shards = 126;

    /// Sends later pushes to the main heap only; the far tier's tasks move there as before. Then
    /// remove()'s callback is told whether the queue is empty: for a queue being shut down. It
    /// waits for every lock of the queue.
    void close_far_tier() noexcept;

    /// How an external leader's thread polls the clock for a head due within the spin (see
    /// set_spin() and take_led()).
    struct led_poll
    {
        /// In: this thread has been polling for the leader. Out: it is to poll (on) until `until`.
        bool polling = false;
        /// When the head it polls for is due.
        time_point until = time_point::max();
    };

    /// For an external leader once it is woken: removes and returns the head if it is due and
    /// @p leader leads it, calling @p on_take(task) under the lock as take() does; otherwise
    /// returns nullptr, and the head (if any) gets its leader again, which may be @p leader. Far
    /// tasks due to move to the main heap (see set_far_tier()) move first, as for a waiting
    /// thread: with every waiting thread busy, nobody else would.
    /**
     * With a spin (see set_spin()) and @p poll given, a head that @p leader leads and that is not
     * due yet but is due within the spin stays with @p leader, and one of its threads polls the
     * clock for it: this one, if no other is (poll->polling on return, and poll->until says when
     * the head is due). It polls holding nothing that others wait for, then calls take_led()
     * again with the same @p poll.
     */
    template <class OnTake>
    node* take_led(external_leader& leader, OnTake on_take, led_poll* poll = nullptr) noexcept;

    /// Calls @p f() under the queue's lock, then, if @p leader led the head or polled for it,
    /// finds the head its leader again: for a leader that is going away (f marks it so that it
    /// refuses to lead), or one whose polling thread cannot go on (it may be asked again).
    template <class F>
    void dismiss(external_leader& leader, F f) noexcept;

    /// Unqueues every task and releases the queue's memory.
    /** @returns The number of tasks unqueued. */
    std::size_t clear() noexcept
    {
        return clear([](node&) noexcept {});
    }

    /// Unqueues every task, releases the queue's memory, then calls @p on_remove(node&) on each
    /// task, in no particular order, outside the lock.
    /**
     * Needs no memory, so it cannot fail (remove_if() needs some): for a destructor that must
     * let go of its tasks. @p on_remove must not throw.
     * @returns The number of tasks unqueued.
     */
    template <class OnRemove>
    std::size_t clear(OnRemove on_remove) noexcept;

private:
    template <class Queue>
    friend struct detail::queue_access;

    // A task's push order within its heap breaks ties of due time: 44 bits, 25 of them in the
    // task's place_ and 19 in its entry, where the task's address leaves them free. A heap that
    // runs out of them renumbers its tasks (see heap::renumber()).
    static constexpr int order_bits = 44;
    static constexpr int order_low_bits = 19;
    static constexpr int order_high_bits = order_bits - order_low_bits;
    static constexpr std::uint64_t order_limit = std::uint64_t(1) << order_bits;

    // The due time lives beside the task so that comparisons touch the tasks only for equal due
    // times (then the push order decides). Sixteen bytes: eight children fill two lines.
    struct entry
    {
        time_point due;
        // The task's address (48 bits, 8-aligned), with the low bits of its push order in its 16
        // top bits and its 3 bottom ones.
        std::uint64_t word;

        static constexpr std::uint64_t address_mask = 0x0000'ffff'ffff'fff8;
        static constexpr int top_shift = 48;
        static_assert(alignof(node) >= 8 && sizeof(std::uintptr_t) <= sizeof(std::uint64_t));

        node* task() const noexcept { return reinterpret_cast<node*>(word & address_mask); }
        std::uint64_t order_low() const noexcept { return (word & 7) | (word >> top_shift) << 3; }
        // `task`'s address (which must fit: see fits()) and the low bits of `order`.
        static std::uint64_t word_of(const node& task, std::uint64_t order) noexcept
        {
            return reinterpret_cast<std::uintptr_t>(&task) | (order & 7) |
                   (order >> 3 & 0xffff) << top_shift;
        }
        static bool fits(const node& task) noexcept
        {
            return (reinterpret_cast<std::uintptr_t>(&task) & ~address_mask) == 0;
        }
    };

    // A node's place_ holds a place or a time. The places are a window of 2^60 values, 2^62 ticks
    // before the clock's epoch (146 years in nanoseconds): a heap's number in the top 7 bits (0
    // for the main heap, 1 + i for shard i of the far tier), the position in that heap in the
    // next 28 (a heap holds at most 2^28 tasks: 4 GiB of entries), and the high bits of the
    // task's push order in the lowest 25. Every other value is the last due time's count of
    // ticks; a due time inside the window is recorded as the tick before it.
    static constexpr int position_bits = 28;
    static constexpr int heap_number_shift = position_bits + order_high_bits;
    static constexpr std::int64_t first_place = -(std::int64_t(1) << 62);
    static constexpr std::int64_t place_count = std::int64_t(1) << 60;
    static constexpr std::size_t max_heap_size = std::size_t(1) << position_bits;
    static_assert(max_far_shards < (std::size_t(place_count) >> heap_number_shift));

    static bool is_place(std::int64_t recorded) noexcept
    {
        return recorded >= first_place && recorded < first_place + place_count;
    }
    static std::int64_t
    place_of(std::size_t heap_number, std::size_t position, std::uint64_t order_high) noexcept
    {
        return first_place + std::int64_t(heap_number << heap_number_shift |
                                          position << order_high_bits | order_high);
    }
    // Of a place: the heap's number, the position, the high bits of the push order.
    static std::size_t heap_number_of(std::int64_t place) noexcept
    {
        return std::size_t(place - first_place) >> heap_number_shift;
    }
    static std::size_t position_of(std::int64_t place) noexcept
    {
        return std::size_t(place - first_place) >> order_high_bits & (max_heap_size - 1);
    }
    static std::uint64_t order_high_of(std::int64_t place) noexcept
    {
        return std::uint64_t(place - first_place) & ((std::uint64_t(1) << order_high_bits) - 1);
    }
    // The far heap (1 + i for shard i) that `task` is queued in; 0 if the main heap, or none.
    static std::size_t far_number(const node& task) noexcept
    {
        const std::int64_t recorded = task.place_.load(std::memory_order_relaxed);
        return is_place(recorded) ? heap_number_of(recorded) : 0;
    }
    static std::int64_t recorded_due(time_point due) noexcept
    {
        const std::int64_t ticks = due.time_since_epoch().count();
        return is_place(ticks) ? first_place - 1 : ticks;
    }

    // One d-ary min-heap of entries that records each task's index in it (see above).
    class heap
    {
    public:
        explicit heap(std::size_t number) noexcept : number_(number) {}

        std::size_t size() const noexcept { return entries_.size(); }
        bool empty() const noexcept { return entries_.empty(); }
        const entry& front() const noexcept { return entries_.front(); }
        const entry& operator[](std::size_t i) const noexcept { return entries_[i]; }

        // The position of `task` if this heap holds it (it may be in another heap or queue).
        std::optional<std::size_t> find(const node& task) const noexcept
        {
            const std::int64_t recorded = task.place_.load(std::memory_order_relaxed);
            if (!is_place(recorded) || heap_number_of(recorded) != number_)
                return std::nullopt;
            const std::size_t i = position_of(recorded);
            if (i >= entries_.size() || entries_[i].task() != &task)
                return std::nullopt;
            return i;
        }

        // Adds `task`, after the tasks due at the same time or at `place` among them if that
        // is one of this heap's current numbering; returns its position. Throws std::bad_alloc
        // (also when the heap is full), and then nothing changed.
        std::size_t push(node& task, time_point due, kept_place place = {});
        // Room for one more entry, so that the next push cannot throw (growing as pushes do).
        void make_room()
        {
            if (entries_.size() == max_heap_size)
                throw std::bad_alloc();
            entries_.make_room();
        }
        // Gives the entry at `i` a new due time and a new push order (after the tasks due at
        // the same time); returns its position.
        std::size_t move(std::size_t i, time_point due) noexcept;
        // For tests (see detail::queue_access): the next push or move takes order `next`.
        void set_next_order(std::uint64_t next) noexcept { next_order_ = next; }
        // The place the entry at `i` holds among those due at the same time.
        kept_place kept(std::size_t i) const noexcept
        {
            return kept_place(renumberings_ << order_bits | order_of(entries_[i]));
        }
        node* pop_front() noexcept;
        void remove_at(std::size_t i) noexcept;
        // The due time of the entry after the front (one of its children); max() if none.
        time_point second_due() const noexcept
        {
            const std::size_t at = second_position();
            return at == 0 ? time_point::max() : entries_[at].due;
        }
        // The due times of the entries after the front and after that (another of its children,
        // or a child of the second), max() for those missing.
        std::pair<time_point, time_point> second_and_third_due() const noexcept;
        // The entry that comes out first of those that `skip` does not name; null if none.
        const entry* first_except(const node* skip) const noexcept;
        // Moves out every entry that `pred` holds for, in due order (see remove_if()).
        template <class Predicate, class OutputIt>
        std::size_t remove_if(Predicate& pred, OutputIt& out);
        template <class Predicate>
        static bool matches(Predicate& pred, const entry& e)
        {
            if constexpr (std::is_invocable_v<Predicate&, node&, time_point>)
                return pred(*e.task(), e.due);
            else
                return pred(*e.task());
        }
        // Unqueues every task and hands over the array that held them (no memory needed).
        auto release() noexcept
        {
            for (entry& e : entries_)
                e.task()->place_.store(recorded_due(e.due), std::memory_order_relaxed);
            return std::exchange(entries_, {});
        }

    private:
        static std::uint64_t order_of(const entry& e) noexcept
        {
            const std::int64_t place = e.task()->place_.load(std::memory_order_relaxed);
            return order_high_of(place) << order_low_bits | e.order_low();
        }
        static bool earlier(const entry& a, const entry& b) noexcept
        {
            return a.due < b.due || (a.due == b.due && order_of(a) < order_of(b));
        }
        // The push order for the next push or move: the next number, after renumbering if
        // they have run out (which moves the entries).
        std::uint64_t next_order() noexcept
        {
            if (next_order_ == order_limit) [[unlikely]]
                renumber();
            return next_order_++;
        }
        // Gives the tasks the push orders 0, 1, 2… in the order of their pushes, and the next
        // push the one after (so that a place kept since ranks as Java's sequence number would):
        // sorts the entries by push order and makes them a heap again. Places kept before it no
        // longer hold (see push_again_if()).
        void renumber() noexcept;
        // Puts `task`, due at `due` with push order `order`, at `i`: the entry holds the task
        // and the low bits of the order, the task its position and the high bits.
        void set(std::size_t i, time_point due, node& task, std::uint64_t order) noexcept
        {
            entries_[i] = entry{due, entry::word_of(task, order)};
            task.place_.store(place_of(number_, i, order >> order_low_bits),
                              std::memory_order_relaxed);
        }

        // The position of the entry after the front: its earliest-due child; 0 if it has none.
        std::size_t second_position() const noexcept;
        // Puts `e` at `i`, and tells its task so (see record_place()).
        void place(std::size_t i, const entry& e) noexcept;
        // Tells the task at `i` its position (its push order's high bits kept).
        void record_place(std::size_t i) noexcept;
        // Sift the entry at `i` towards the front or the back; return where it ends.
        std::size_t sift_up(std::size_t i) noexcept;
        // A sift down takes the whole way down for a pop (the last entry fills the front): the
        // entries move first and their tasks learn their new places after, in a loop of their
        // own, so that the cache misses on the tasks (one a level) overlap instead of stalling
        // each step (a pop of a million: a quarter faster, measured). A sift up is short on
        // average, and places as it goes.
        std::size_t sift_down(std::size_t i) noexcept;
        // The most levels a heap has: the longest way a sift down moves.
        static constexpr std::size_t max_levels = [] {
            std::size_t levels = 0;
            for (std::size_t first = 0, width = 1; first < max_heap_size; first += width)
            {
                ++levels;
                width *= arity;
            }
            return levels;
        }();
        void rebuild() noexcept;
        void check_invariants(std::size_t touched) const noexcept;

        detail::heap_array<entry, arity> entries_;
        std::size_t number_;             // 0: the main heap; 1 + i: shard i of the far tier
        std::uint64_t next_order_ = 0;   // the next push's order
        std::uint64_t renumberings_ = 1; // 1 + how often it has renumbered (0: no kept place)
    };

    // A heap of the far tier, with its own lock; on a cache line of its own.
    struct alignas(64) shard
    {
        explicit shard(std::size_t number) : tasks(number) {}

        detail::atomic_mutex mutex;
        heap tasks;
    };

    // Holds the lock of every shard, taken in order after the main lock.
    class shards_lock
    {
    public:
        explicit shards_lock(const basic_delayed_work_queue& queue) noexcept;
        ~shards_lock();
        shards_lock(const shards_lock&) = delete;
        shards_lock& operator=(const shards_lock&) = delete;

    private:
        const basic_delayed_work_queue& queue_;
    };

    // What stands in the main heap for the far tier, due when its tasks must move.
    class far_marker final : public node
    {};

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

    static void check_not_negative(duration d, const char* what)
    {
        if (d < duration::zero())
            throw std::invalid_argument(what);
    }

    // time_point::max() is "never", even for a clock that has been advanced all the way.
    static bool is_due(time_point due, time_point now) noexcept
    {
        return due <= now && due != time_point::max();
    }

    // Pushes `task` if `allowed()`, called once under the lock the push takes: nullopt if it did
    // not; otherwise whether the task became the head. Among the tasks due at the same time it
    // goes last, or at `place` (see push_again_if()).
    template <class Predicate>
    std::optional<bool>
    push_checked(node& task, time_point due, Predicate& allowed, kept_place place);
    // Throws std::invalid_argument unless `task` may be pushed: not queued, and at an address
    // that an entry holds (below 2^48, untagged: see push()).
    static void check_pushable(const node& task);
    // push_checked()'s refusal: the task keeps the due time it would have had.
    static std::nullopt_t refused(node& task, time_point due) noexcept;
    // Under the lock: pushes `task`; `far` is what far_shard_for() said with the recent reading
    // (a task it did not send there stays near; one it did is judged again by the clock).
    bool push_locked(node& task, time_point due, shard* far, kept_place place);
    // Under the lock: removes and returns the main heap's front, calling on_take(task), or
    // on_take(task, place) if it takes the task's kept_place, as it leaves.
    template <class OnTake>
    node* take_front(OnTake& on_take) noexcept
    {
        if constexpr (std::is_invocable_v<OnTake&, node&, kept_place>)
        {
            const kept_place place = heap_.kept(0);
            node* const task = heap_.pop_front();
            on_take(*task, place);
            return task;
        }
        else
        {
            node* const task = heap_.pop_front();
            on_take(*task);
            return task;
        }
    }
    template <class OnTake>
    node* take_until(time_point deadline, std::stop_token& stop, OnTake on_take);
    void wait_until(std::unique_lock<detail::atomic_mutex>& lock, time_point t);
    // Under the lock: finds the head (led_head()) its leader (external or a waiting thread, woken
    // if `wake`), and the marker in front of it a waiting thread; returns whether an external
    // leader has the head.
    bool elect(bool wake) noexcept;
    // Under the lock: the head as leaders see it, the first task but the far tier's marker (null
    // if none). Only the waiting threads wake for the marker, so an external leader must not
    // lose a head to it: it leads the task behind it, and moves the marker if it finds it due.
    const entry* led_head() const noexcept { return heap_.first_except(&marker_); }
    // Under the lock: whether the entry at `at` in the main heap is led_head().
    bool is_led_head(std::size_t at) const noexcept
    {
        if (at == 0)
            return heap_.front().task() != &marker_;
        return at <= arity && heap_.front().task() == &marker_ && led_head() == &heap_[at];
    }
    // Under the lock: the task at `at` is a new, earlier led_head(), so whoever leads it sleeps
    // too long. Behind the marker, whoever leads the marker wakes in time for it: only an
    // external leader, the task's or the one that led the head before, needs telling.
    void new_head_at(std::size_t at) noexcept
    {
        if (at == 0 || leader_ == &external_ || leader_of(heap_[at]))
            head_moved_earlier();
    }
    // Under the lock, with a head: external_ leads it (see the definition).
    void follow_external(bool wake) noexcept;
    // How often at most the backup is woken for an earlier head: ten graces.
    duration hurry_interval() const noexcept
    {
        if (grace_ <= duration::zero())
            return duration::zero();
        return grace_ > duration::max() / 10 ? duration::max() : 10 * grace_;
    }
    // Under the lock: the head is new and earlier, so whoever leads sleeps too long.
    void head_moved_earlier() noexcept
    {
        leader_ = nullptr;
        elect(true);
    }
    // Under the lock: the head (led_head()) left without a take() (removed, moved later, polled),
    // so the new one is later. A thread that leads wakes early, once, and sleeps again; but an
    // external leader must know (its io_context would wait for a task that is gone), and with no
    // leader at all (every thread busy), the new head's external leader must be asked, or nobody
    // wakes for it.
    void head_left() noexcept
    {
        if (external_ || leader_ == nullptr)
            elect(true);
    }
    // The external leader that waits for `e`, if any (never for the far marker).
    external_leader* leader_of(const entry& e) const noexcept
    {
        return find_ && e.task() != &marker_ ? find_(*e.task()) : nullptr;
    }
    // Under the lock, with a due head: whether a waiting thread leaves it to its external leader
    // (it is not yet overdue by the grace).
    bool left_to_leader(time_point now) const noexcept;
    // When whoever leads a task due at `due` wakes for it (a waiting thread, or an external
    // leader asked to), if the task after it is due at `next`: with a spin, the spin before it is
    // due (then it polls until it is due), or on time if it is not `polled` (the far tier's
    // marker: its move keeps nobody waiting, and the task after it is polled for from there);
    // otherwise the slack after it, or on time if `next` is later than that (no wake-up is saved
    // by waiting for the slack).
    time_point wake_time(time_point due, time_point next, bool polled = true) const noexcept
    {
        if (spin_ == duration::zero())
        {
            const time_point latest = detail::saturating_add(due, slack_);
            return next > latest ? due : latest;
        }
        if (!polled || due == time_point::max())
            return due;
        return detail::saturating_subtract(due, spin_);
    }
    // Under the lock, with a head: when whoever leads it wakes for it.
    time_point head_wake_time() const noexcept
    {
        const entry& head = heap_.front();
        return wake_time(head.due, heap_.second_due(), head.task() != &marker_);
    }
    // Under the lock, with `head` the front or led_head() (a reference into the heap, not a copy:
    // its address says which): when whoever leads it wakes for it.
    time_point wake_time_of(const entry& head) const noexcept
    {
        return &head == &heap_.front() ? head_wake_time() : second_wake_time();
    }
    // Under the lock, with `head` as above: when whoever leads the task after it would wake for
    // it once it is the head (max(): there is none). Behind the marker, when it is due (with the
    // spin, the spin before), whatever its company: never later than it will be asked to.
    time_point next_wake_time(const entry& head) const noexcept
    {
        if (&head == &heap_.front())
            return second_wake_time();
        return wake_time(heap_.second_and_third_due().second, time_point::max());
    }
    // Under the lock: when whoever leads the task after the head would wake for it once it is the
    // head (max(): there is none).
    time_point second_wake_time() const noexcept
    {
        const auto [second, third] = heap_.second_and_third_due();
        return wake_time(second, third);
    }
    // Under the lock, with `head` as above, led by a waiting thread or external leader that woke
    // at `now`: whether it polls the clock until `head` is due rather than sleep again (never
    // for the marker: its move keeps nobody waiting).
    bool polls(const entry& head, time_point now) const noexcept
    {
        return spin_ != duration::zero() && head.task() != &marker_ && now >= wake_time_of(head);
    }
    // Under the lock, while external_ leads: when the waiting threads stop leaving a head due at
    // `due` to it: the grace after the latest it may be asked to wake for it (the slack after it
    // is due; with a spin, when it is due), or after its last take while it has kept the lead,
    // whichever is later; but no more than ten graces later than the first (a leader that takes
    // slowly, a hook holding up each take, is helped all the same).
    time_point leader_deadline(time_point due) const noexcept
    {
        const time_point woken = detail::saturating_add(
            spin_ == duration::zero() ? detail::saturating_add(due, slack_) : due, grace_);
        const time_point taking = detail::saturating_add(external_->took_at_, grace_);
        return std::max(woken, std::min(taking, detail::saturating_add(woken, hurry_interval())));
    }
    // Under the lock, while an external leader leads: when the backup wakes, to take the head
    // once it is overdue by the grace, or to move the far tier's marker in front of the led head
    // once it is due (no external leader wakes for it).
    time_point backup_deadline() const noexcept
    {
        const entry& front = heap_.front();
        return front.task() == &marker_ ? head_wake_time() : leader_deadline(front.due);
    }
    void wake_all() noexcept;
    // Calls found(tasks, at, main_locked) under the lock of the heap that holds `task`, `at`
    // being its position in `tasks`: its shard's lock only (main_locked false), or the main lock
    // and perhaps every shard's. Returns what found() returned; false if `task` is not queued.
    // `found` is taken by reference: a closure passed by value was built on the stack and read
    // back wider than it was written (a stalled store forward, about 4% of a cancel-and-rearm).
    template <class Self, class Found>
    static bool locate(Self& self, const node& task, Found&& found) noexcept;
    // Under the lock: the queue holds no task (the far tier counts only once closed).
    bool empty_locked() const noexcept;
    std::size_t size_locked() const noexcept;

    // The far tier.
    // The shard for a task due at `due` pushed by this thread, with the clock at `now` or later;
    // null: the main heap.
    shard* far_shard_for(node& task, time_point due, time_point now) const noexcept;
    time_point recent_now() const noexcept
    {
        return time_point(duration(recent_now_.load(std::memory_order_relaxed)));
    }
    // No far task is due before this: a bound, exact after each move.
    time_point far_earliest() const noexcept
    {
        return time_point(duration(far_earliest_.load(std::memory_order_relaxed)));
    }
    // Under the lock and the shard's: adds `task` to `s`, moving the marker earlier if need be.
    void push_far(shard& s, node& task, time_point due);
    // Under a shard's lock, and the main lock if `due` is before far_earliest(): a far task is
    // now due at `due`; the marker moves earlier if need be (room for it made beforehand).
    void far_task_due(time_point due) noexcept;
    // Under every shard's lock: the shard whose first task comes out first; null if all are
    // empty.
    shard* first_shard() const noexcept;
    // Under the lock: moves the far tasks due by `limit` (the earliest `most` of them) to the
    // main heap, in due order, and puts the marker where the rest must move.
    void move_far_tasks(time_point limit,
                        std::size_t most = std::numeric_limits<std::size_t>::max()) noexcept;
    // When the far tasks that could not move for want of memory try again.
    static time_point retry_after_out_of_memory() noexcept;
    // Under the lock: whether a task pushed or moved to `due` in the main heap would pass far
    // tasks (a task due "never" never comes out, so it passes nothing).
    bool passes_far_tasks(time_point due) const noexcept
    {
        return !shards_.empty() && due >= far_earliest() && due != time_point::max();
    }
    // Under the lock: moves the main heap's entry at `at`, for `task`, to `due` in the far tier,
    // as a push would put it there; false if a push would not (or, out of memory, could not), and
    // then nothing changes.
    bool move_to_far_tier(std::size_t at, node& task, time_point due) noexcept;
    // Under the lock: before a task is pushed or moved to `due` in the main heap, moves the far
    // tasks it would pass (those due within the horizon, while the tier is open); returns whether
    // it looked (the task's position may have changed).
    bool move_far_tasks_before(time_point due) noexcept;
    // Under the lock: moves the main heap's entry at `at`, for `task`, to `due`, where a push
    // would put it: to the far tier (then nullopt), or else its position in the main heap, after
    // the far tasks due within the horizon.
    std::optional<std::size_t> move_as_pushed(std::size_t at, node& task, time_point due) noexcept;
    // Under the lock, at `now`: moves the far tasks if the marker is due.
    void move_far_tasks_if_due(time_point now) noexcept;
    // Under the lock: puts the marker at far_earliest() less the lead; if that is before `after`,
    // at `after` instead, behind the tasks due then. If far_earliest() is max(), at max() if
    // `far_tasks_left` (all of them are due "never"), else out.
    void place_marker(time_point after = time_point::min(), bool far_tasks_left = true) noexcept;
    // Under the lock: notes a clock reading for far_shard_for().
    void note_now(time_point now) noexcept;

    mutable detail::atomic_mutex mutex_;
    std::condition_variable_any available_; // a new head, a leaving leader, a stop or a clock move
    heap heap_{0};                          // the main heap
    // The waiter sleeping until the head is due, if any; &external_ when that is external_.
    const void* leader_ = nullptr;
    // While external_ leads: the follower sleeping until the head is overdue by the grace, or the
    // far tier's marker in front of it is due, if any (the others sleep until woken), and when
    // it wakes (min(): woken for an earlier head).
    const void* backup_ = nullptr;
    time_point backup_until_{};
    time_point hurried_until_ = time_point::min(); // see follow_external()
    external_leader* external_ = nullptr;
    const external_leader* polling_ = nullptr; // whose thread polls for the head (see take_led())
    time_point external_due_{}; // what external_ sleeps until; max() once it has woken
    leader_finder find_ = nullptr;
    duration grace_{};
    duration slack_{};
    duration spin_{};

    std::vector<std::unique_ptr<shard>> shards_; // the far tier; none without one
    duration far_horizon_{};
    // Whether pushes may go to the far tier: written under every lock.
    std::atomic<bool> far_open_{false};
    // A bound on the far tasks' due times: lowered under the lock and a shard's, raised under
    // every lock, read under any.
    std::atomic<typename duration::rep> far_earliest_{duration::max().count()};
    // A clock reading no later than now, so that pushes need not read the clock: refreshed
    // (at most every quarter horizon) by whoever reads the clock under the lock to take tasks,
    // by a push that would give the far tier a new earliest task, and as a notifying clock
    // moves. A stale one sends more tasks to the far tier, never fewer; a task that should not
    // have gone there moves back as soon as a waiting thread, poll() or drain() finds the marker
    // due.
    std::atomic<typename duration::rep> recent_now_{0};
    far_marker marker_; // in the main heap whenever the far tier holds a task (or held one)

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

SCHED_VISIBILITY_END

#endif // SCHED_DELAYED_WORK_QUEUE_HPP
