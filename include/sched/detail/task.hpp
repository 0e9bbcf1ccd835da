#ifndef SCHED_DETAIL_TASK_HPP
#define SCHED_DETAIL_TASK_HPP

#include <sched/delayed_work_queue.hpp>
#include <sched/future_state.hpp>

#include <sched/detail/deferred_completions.hpp>
#include <sched/detail/owner_registry.hpp>
#include <sched/detail/parking.hpp>
#include <sched/detail/periodic_schedule.hpp>
#include <sched/detail/timed_wait.hpp>
#include <sched/detail/visibility.hpp>

#include <atomic>
#include <cassert>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <mutex>
#include <new>
#include <optional>
#include <stop_token>
#include <thread>
#include <utility>

SCHED_VISIBILITY_BEGIN

namespace sched::detail {

// What a task that is not periodic keeps instead of a place among equal due times (see
// task::keep_place()): nothing, and a type of its own, so that it takes no room beside the other
// empty members.
struct no_kept_place
{};

template <class Clock>
class task;

// What one run of a task leaves to its runner.
struct run_outcome
{
    std::exception_ptr error; // what the body (or its result's move constructor) threw, if anything
    // The run goes on elsewhere (a tick posted to the executor it is bound to): the task took the
    // runner's reference with it and hands it back through owner_link::finish_run().
    bool detached = false;
};

// Whoever queued a task, told when it is cancelled so it can take the task out of its queue.
template <class Clock>
class task_owner
{
public:
    // Called by t.cancel() on the cancelling thread, with t in its transient state: whoever holds
    // t waits for that state to end before letting go of it (see task::await_canceller()). Must
    // end it (t.end_cancel()) once it touches nothing of the owner's any more, and before it lets
    // go of t. `caller_holds`: the cancelling thread holds a reference of its own, which nothing
    // but the body's destructor may let go of during the call (see task::release_beside_own()).
    virtual void on_cancelled(task<Clock>& t, bool caller_holds) noexcept = 0;

    // A detached run has ended: takes back the runner's reference to `t`, which is not queued.
    virtual void finish_run(task<Clock>& t, std::exception_ptr error) noexcept = 0;

    // When `t` is due if the owner's queue holds it; nullopt if not (see task::due_time()).
    virtual std::optional<typename Clock::time_point>
    queued_due_time(const task<Clock>& t) const noexcept = 0;

    // Whether `t`, taken from the owner's queue, may start a run now: not once the owner's
    // shutdown has ended such tasks (Java's canRunInCurrentRunState).
    virtual bool may_run(const task<Clock>& t) const noexcept = 0;

protected:
    ~task_owner() = default;
};

// One scheduled item: a queue node, the shared state of its futures, and its body; one allocation
// (Java's ScheduledFutureTask). Reference-counted: each future or handle holds a reference, and
// so does the "runner" - the queue while the task is queued, then whoever took it out. Only the
// runner runs the body, re-queues it, or drops it.
template <class Clock>
class task : public basic_delayed_work_queue<Clock>::node
{
public:
    using time_point = typename Clock::time_point;

    void add_ref() noexcept { refs_.fetch_add(1, std::memory_order_relaxed); }

    void release() noexcept
    {
        // Only a holder adds references, so a sole holder can skip the atomic decrement.
        if (refs_.load(std::memory_order_acquire) == 1 ||
            refs_.fetch_sub(1, std::memory_order_acq_rel) == 1)
            destroy();
    }

    // Lets go of a reference held beside another of the same thread's, which outlives the call:
    // with no holder but that thread, no other can add one, and the count drops by a plain store.
    void release_beside_own() noexcept
    {
        assert(refs_.load(std::memory_order_relaxed) >= 2);
        if (refs_.load(std::memory_order_acquire) == 2)
            refs_.store(1, std::memory_order_release);
        else
            release(); // the last only if a caller broke the promise (asserted above)
    }

    // Runner only: whether anything besides the runner (a future, a handle) still holds the task.
    bool held_elsewhere() const noexcept { return refs_.load(std::memory_order_acquire) > 1; }

    friend void intrusive_ptr_add_ref(task* t) noexcept { t->add_ref(); }
    friend void intrusive_ptr_release(task* t) noexcept { t->release(); }

    // Sequentially consistent: see set_owner() and disown().
    future_state state() const noexcept { return state_.load(); }
    bool is_done() const noexcept { return state() != future_state::pending; }
    bool is_cancelled() const noexcept { return state() >= future_state::cancelling; }
    bool is_periodic() const noexcept { return kind() != period_kind::one_shot; }

    // When the task is due if it is queued (read under its queue's lock, so never called under
    // it), or was last due if not.
    time_point due_time() const noexcept
    {
        for (;;)
        {
            if (const std::optional<time_point> last = this->last_due_time())
                return *last;
            // Queued: by its owner, which disowns it only once it has left the queue, and closes
            // its registration only once it has disowned every task. If the task still names the
            // owner once pinned, the owner is its own and is there until unpinned.
            if (const auto owner = owner_registry::number(owner_word_.load() >> owner_shift))
            {
                const pinned_owner pinned(owner);
                if (pinned.get() && owner_word_.load() >> owner_shift == owner)
                {
                    if (const std::optional<time_point> due =
                            static_cast<const task_owner<Clock>*>(pinned.get())
                                ->queued_due_time(*this))
                        return *due;
                }
            }
            // It left the queue meanwhile: its last due time is there now.
        }
    }
    period_kind kind() const noexcept
    {
        return period_kind((owner_word_.load(std::memory_order_relaxed) & kind_mask) >> kind_shift);
    }

    // A detached run hands the task (which has no owner) back to the owner registered as
    // `owner`, which then reads the state: a cancel() either finds the owner or is seen there
    // (both sequentially consistent, as cancel() is).
    void set_owner(owner_registry::number owner) noexcept
    {
        assert((owner_word_.load(std::memory_order_relaxed) & owner_mask) == 0);
        owner_word_.fetch_or(std::uint16_t(owner << owner_shift));
    }

    // The owner lets go of a task that may outlive it, pending or not: a cancel() from now on
    // tells no one. Returns once a cancel() that found the owner has finished with it.
    void disown() noexcept
    {
        // Sequentially consistent, as cancel()'s transition and load: either that load sees no
        // owner, or await_canceller() sees the transition.
        owner_word_.fetch_and(std::uint16_t(~owner_mask));
        await_canceller();
    }

    // pending → cancelling → cancelled, or pending → interrupting → interrupted (then a running
    // body that takes a std::stop_token sees stop requested). Wakes waiters, then tells the
    // owner, which ends the transient state. Interrupting needs a reference to the task.
    // `caller_holds`: the caller holds a reference, which nothing but the body's destructor lets
    // go of or copies during the call (a future does: see on_cancelled()).
    bool cancel(bool may_interrupt, bool caller_holds = false) noexcept
    {
        future_state expected = future_state::pending;
        if (!state_.compare_exchange_strong(expected, may_interrupt ? future_state::interrupting
                                                                    : future_state::cancelling))
            return false;
        // The stop is requested once the cancel has ended, which may have let go of the caller's
        // reference (the body kept alive what held it): the cancel that won keeps its own.
        if (may_interrupt)
            add_ref();
        note_cancelled();
        wake_waiters();
        if (const auto owner = owner_registry::number(owner_word_.load() >> owner_shift))
        {
            // Still registered: the owner disowns the task before it goes, and waits for this.
            void* const found = owner_registry::find(owner);
            assert(found != nullptr);
            static_cast<task_owner<Clock>*>(found)->on_cancelled(*this, caller_holds);
            // Without a reference, the task may be gone now.
        }
        else
            end_cancel();
        // Only once the cancel has ended: a stop callback may shut the pool down or destroy it,
        // which waits for cancels under way.
        if (may_interrupt)
        {
            request_stop();
            release();
        }
        return true;
    }

    // The cancelling thread only: the transient state ends (cancelling → cancelled,
    // interrupting → interrupted). No lock: a holder polls for it (await_canceller()).
    void end_cancel() noexcept
    {
        state_.store(state_.load(std::memory_order_relaxed) == future_state::interrupting
                         ? future_state::interrupted
                         : future_state::cancelled,
                     std::memory_order_release);
    }

    // Before a holder lets go of a task that is not pending (its owner may be gone once it has,
    // or the task itself): returns once a cancel() on another thread has finished with its owner
    // (Java's runner waits for an interrupting cancel likewise). The wait is short: no user code
    // runs in it, only the library's bookkeeping (the queue's and its timers' locks, say).
    void await_canceller() const noexcept
    {
        for (future_state s = state_.load();
             s == future_state::cancelling || s == future_state::interrupting;
             s = state_.load(std::memory_order_acquire))
            std::this_thread::yield();
    }

    // Runner only: runs the body once on this thread. A one-shot task completes; a periodic task
    // stays pending unless the body threw (then it is exceptional). `runner_stop` asks a running
    // body that takes a std::stop_token to stop.
    virtual run_outcome run(std::stop_token runner_stop) noexcept = 0;

    // Runner only: for a periodic task, when the next run is due given that the last one ended
    // (or was skipped) at `ended`; saturates at time_point::max(). For a task that is not due
    // after all (see due_after_all()), when it is.
    virtual time_point next_due(time_point ended) noexcept = 0;

    // Runner only, as the task comes out of the queue: false if its due time has moved later
    // meanwhile without the queue being told (a deadline pushed back lazily); the runner then
    // queues it again at next_due().
    virtual bool due_after_all() noexcept { return true; }

    // Under its queue's lock, while queued: for a task whose due time moves later without the
    // queue being told (see due_after_all()), when it is due now, so that the queue can move it
    // there early (delayed_work_queue::defer_heads()); nullopt for other tasks, or once it has
    // ended.
    virtual std::optional<time_point> lazy_due() noexcept { return std::nullopt; }

    // As a shut-down pool ends the task, before anything else runs (its runner, as it would put
    // it back due "never", under its queue's lock; a shutdown, as it drops it): no move of its
    // due time succeeds from now on, and true; unless `only_if_never` and it is not due "never"
    // now (a deadline's wait moved since it was read, or ended otherwise): then false, and
    // nothing changes. A task whose due time moves only through its queue has none to end.
    virtual bool end_moves(bool only_if_never) noexcept
    {
        (void)only_if_never;
        return true;
    }

    using kept_place = typename basic_delayed_work_queue<Clock>::kept_place;

    // For a periodic task, as it leaves its pool's queue to run (under the queue's lock): where
    // it stood among the tasks due at the same time, so that its next run goes back there, as
    // Java's periodic tasks keep their sequence number. Other tasks keep no place.
    virtual void keep_place(kept_place) noexcept {}
    // Runner only: the place that keep_place() kept.
    virtual kept_place place_kept() const noexcept { return {}; }

    // Runner only: ends a pending task with `e` (a periodic task that cannot be re-queued),
    // releasing its body.
    virtual void fail(std::exception_ptr e) noexcept = 0;

    // Whether the task reports its end to a completion handler rather than to futures: it is
    // never handed out by shutdown_now(), which ends it with the shutdown error instead.
    virtual bool completes_handler() const noexcept { return false; }

    // Runner only: the pool cancelled the task because it was shut down (the handler of an
    // asynchronous operation is then told error::shutdown rather than operation_aborted).
    void mark_shut_down() noexcept { shut_down_ = true; }
    bool shut_down() const noexcept { return shut_down_; }

    // Runner only: a completion begun before the run (a deadline's wait that fired: see
    // deadline_wait::due_after_all()), which the pool's shutdown then kept from running, ends as
    // cancelled by the shutdown; no effect on a task in any other state.
    void shut_down_begun_completion() noexcept
    {
        if (state_.load() != future_state::completing)
            return;
        mark_shut_down();
        end_completing(future_state::cancelled);
    }

    // Before it is queued: no future was made for the task (execute()), so no one but the pool's
    // error sink can learn what it throws.
    void mark_unobserved() noexcept { unobserved_ = true; }
    bool unobserved() const noexcept { return unobserved_; }

    // Whether the task is a function submitted through the pool's Asio executor, which runs
    // after shutdown() whatever the policies say, and which a stopped pool destroys unrun.
    virtual bool is_executor_function() const noexcept { return false; }

    // The I/O execution context (its scheduler service) that an asynchronous operation completes
    // in; null for other tasks.
    virtual const void* context() const noexcept { return nullptr; }

    // Whether that context is shutting down: the task must not be queued again (the context
    // waits for it to end).
    virtual bool context_closing() const noexcept { return false; }

    // Who waits for the task when it is at the head of its pool's queue instead of a worker, and
    // then runs it: an io_context's timer (see io_alarm). Null: the workers.
    virtual typename basic_delayed_work_queue<Clock>::external_leader* leader() const noexcept
    {
        return nullptr;
    }

    // Runner only: whether release_body() runs no code of the user's (the body is gone already,
    // or its destructor is trivial: a callable that captures pointers, say).
    bool body_goes_quietly() const noexcept { return body_released_ || trivial_body_; }

    // Runner only, once it will not run the body again: destroys the body now, so that what it
    // captured is freed even while futures keep the task's state alive (Java nulls the callable).
    // A task with a completion handler delivers its outcome to the handler here.
    void release_body() noexcept
    {
        if (!body_released_)
        {
            body_released_ = true;
            destroy_body();
        }
    }

    void wait() const
    {
        if (!settled())
        {
            owner_word_.fetch_or(waiting_bit);
            parking_slot& slot = parking_slot_for(this);
            std::unique_lock lock(slot.mutex);
            slot.completed.wait(lock, [this] { return settled(); });
        }
    }

    // Waits on a real clock; returns whether the task completed.
    template <class WaitClock, class WaitDuration>
    bool wait_until(const std::chrono::time_point<WaitClock, WaitDuration>& deadline) const
    {
        if (settled())
            return true;
        owner_word_.fetch_or(waiting_bit);
        parking_slot& slot = parking_slot_for(this);
        std::unique_lock lock(slot.mutex);
        while (!settled())
            if (!timed_wait(slot.completed, lock, deadline))
                return settled();
        return true;
    }

protected:
    // `owner` is the number of the owner's registration (see owner_registry).
    task(period_kind kind, std::uint32_t refs, owner_registry::number owner) noexcept
        : refs_(refs),
          owner_word_(std::uint16_t(owner << owner_shift | std::uint16_t(kind) << kind_shift))
    {}

    virtual ~task() = default;

    // pending → completing → `final`: runs `store` (which puts the outcome in place) only if the
    // task was still pending, so a cancelled task drops its outcome.
    template <class Store>
    bool complete(future_state final, Store&& store) noexcept
    {
        if (!begin_completing())
            return false;
        end_completing(std::forward<Store>(store)() ? final : future_state::exceptional);
        return true;
    }

    // pending → completing, unless a cancel came first; a task that completes through a handler
    // does this before its run, so that a cancel can win only by preventing the run.
    bool begin_completing() noexcept
    {
        future_state expected = future_state::pending;
        return state_.compare_exchange_strong(expected, future_state::completing);
    }

    // completing → `final` (normal or exceptional; cancelled: see shut_down_begun_completion()).
    void end_completing(future_state final) noexcept
    {
        state_.store(final);
        wake_waiters();
    }

    virtual void request_stop() noexcept {}

    bool body_released() const noexcept { return body_released_; }

    // Before the task is queued: destroying its body runs no code (see body_goes_quietly()).
    void note_trivial_body() noexcept { trivial_body_ = true; }

private:
    // Just cancelled, before waiters and the owner are told.
    virtual void note_cancelled() noexcept {}

    virtual void destroy_body() noexcept = 0;
    virtual void destroy() noexcept = 0;

    // Done for waiting purposes: the outcome is fixed (completing is about to store it; a
    // transient cancel has fixed it as cancelled, and wakes no one again as it ends). A
    // sequentially consistent load: see wake_waiters().
    bool settled() const noexcept
    {
        const future_state s = state_.load();
        return s != future_state::pending && s != future_state::completing;
    }

    void wake_waiters() const noexcept
    {
        // With wait(): the waiter sets waiting_bit then loads state_, we store state_ then load
        // the bit (all sequentially consistent), so one of us sees the other's store.
        if (owner_word_.load() & waiting_bit)
        {
            parking_slot& slot = parking_slot_for(this);
            {
                std::lock_guard lock(slot.mutex); // a waiter between its check and its wait
            }
            slot.completed.notify_all();
        }
    }

    // Three parts in one atomic word, so that the task stays small (issue 6's W2): waiting_bit,
    // set once a thread waits for the outcome; the kind, which never changes; the owner's number
    // (0: none), which only the runner sets and clears. Not bit-fields beside the runner's: those
    // are written without atomics, and other threads write here.
    static constexpr std::uint16_t waiting_bit = 1;
    static constexpr int kind_shift = 1;
    static constexpr std::uint16_t kind_mask = 3 << kind_shift;
    static constexpr int owner_shift = 3;
    static constexpr std::uint16_t owner_mask = std::uint16_t(~0u << owner_shift);
    static_assert(owner_registry::capacity <= owner_mask >> owner_shift);

    std::atomic<std::uint32_t> refs_;
    std::atomic<future_state> state_{future_state::pending};
    bool body_released_ : 1 = false; // runner only
    bool shut_down_ : 1 = false;     // runner only
    bool unobserved_ : 1 = false;    // set before the task is queued
    bool trivial_body_ : 1 = false;  // set before the task is queued
    mutable std::atomic<std::uint16_t> owner_word_;
};

// A task's outcome: the value or the exception. It is stored where the body was (the derived
// class's storage): the runner destroys the body before it completes the task, so the two never
// live at once, and the state says which outcome, if any, is there.
template <class R, class Clock>
class result_task : public task<Clock>
{
public:
    // state() == normal
    const R& value() const noexcept { return *std::launder(static_cast<const R*>(outcome())); }

    // state() == exceptional
    const std::exception_ptr& error() const noexcept
    {
        return *std::launder(static_cast<const std::exception_ptr*>(outcome()));
    }

protected:
    result_task(period_kind kind, std::uint32_t refs, owner_registry::number owner) noexcept
        : task<Clock>(kind, refs, owner)
    {}

    // Runner only, after release_body(). Returns what R's move constructor threw, if it did:
    // that is then the task's outcome, and its run's failure.
    std::exception_ptr set_value(R&& v) noexcept
    {
        std::exception_ptr thrown;
        this->complete(future_state::normal, [&]() noexcept {
            try
            {
                ::new (outcome()) R(std::move(v));
                return true;
            }
            catch (...)
            {
                thrown = std::current_exception();
                ::new (outcome()) std::exception_ptr(thrown);
                return false;
            }
        });
        return thrown;
    }

    // Runner only, after release_body().
    bool set_exception(std::exception_ptr e) noexcept
    {
        return this->complete(future_state::exceptional, [&]() noexcept {
            ::new (outcome()) std::exception_ptr(std::move(e));
            return true;
        });
    }

    void destroy_outcome() noexcept
    {
        if (this->state() == future_state::normal)
            std::launder(static_cast<R*>(outcome()))->~R();
        else if (this->state() == future_state::exceptional)
            std::launder(static_cast<std::exception_ptr*>(outcome()))->~exception_ptr();
    }

private:
    virtual void* outcome() noexcept = 0;
    const void* outcome() const noexcept { return const_cast<result_task*>(this)->outcome(); }
};

template <class Clock>
class result_task<void, Clock> : public task<Clock>
{
public:
    // state() == exceptional
    const std::exception_ptr& error() const noexcept
    {
        return *std::launder(static_cast<const std::exception_ptr*>(outcome()));
    }

protected:
    result_task(period_kind kind, std::uint32_t refs, owner_registry::number owner) noexcept
        : task<Clock>(kind, refs, owner)
    {}

    bool set_value() noexcept
    {
        return this->complete(future_state::normal, []() noexcept { return true; });
    }

    // Runner only, after release_body().
    bool set_exception(std::exception_ptr e) noexcept
    {
        return this->complete(future_state::exceptional, [&]() noexcept {
            ::new (outcome()) std::exception_ptr(std::move(e));
            return true;
        });
    }

    void destroy_outcome() noexcept
    {
        if (this->state() == future_state::exceptional)
            std::launder(static_cast<std::exception_ptr*>(outcome()))->~exception_ptr();
    }

private:
    virtual void* outcome() noexcept = 0;
    const void* outcome() const noexcept { return const_cast<result_task*>(this)->outcome(); }
};

// The way back to a task's owner for a detached run, which may end after the owner is gone: then
// the task ends as if the owner had been shut down. No lock of the link is held while the owner's
// code runs (its hooks, which may run an io_context whose handlers end runs of this owner or of
// others): the owner is pinned instead, and cannot leave until it is let go.
template <class Clock>
class owner_link
{
    // The owner, if it is still there, pinned until let go of (at the latest, when this is
    // destroyed). On its thread's list of pins while it lives.
    class pinned
    {
    public:
        explicit pinned(owner_link& link) noexcept : link_(link), outer_(pins_here_)
        {
            pins_here_ = this;
            // A pin taken once the owner is gone is given back at once, and nobody waits for it.
            if (link.state_.fetch_add(1, std::memory_order_acquire) & gone)
                link.state_.fetch_sub(1, std::memory_order_relaxed);
            else
                owner_ = link.owner_;
        }
        pinned(const pinned&) = delete;
        pinned& operator=(const pinned&) = delete;
        ~pinned()
        {
            let_go();
            pins_here_ = outer_;
        }

        void let_go() noexcept
        {
            if (!std::exchange(owner_, nullptr))
                return;
            if (link_.state_.fetch_sub(1, std::memory_order_release) & severing)
            {
                const std::lock_guard lock(link_.mutex_); // sever() is waiting, or about to
                link_.pins_released_.notify_all();
            }
        }

        task_owner<Clock>* get() const noexcept { return owner_; }

    private:
        friend owner_link;
        owner_link& link_;
        pinned* const outer_;
        task_owner<Clock>* owner_ = nullptr;
        bool run_ = false; // a started_run's, which sever() on its thread does not wait for
    };

public:
    explicit owner_link(task_owner<Clock>& owner) noexcept : owner_(&owner) {}

    // Takes over the runner's reference to `t`.
    void finish_run(task<Clock>& t, std::exception_ptr error) noexcept
    {
        const deferred_completions after_unpin; // a handler may own the owner: see there
        const pinned owner(*this);
        end_run(owner.get(), t, std::move(error));
    }

    // Calls f() if the owner is still there; it cannot leave meanwhile. The completions of the
    // operations that f() ends go on once the owner may leave again.
    template <class F>
    void with_owner(F f)
    {
        const deferred_completions after_unpin; // a handler may own the owner: see there
        const pinned owner(*this);
        if (owner.get())
            f();
    }

    // A run that the owner lets start now, if it is still there (see task_owner::may_run()):
    // until it has finished, the owner cannot leave. sever() waits for it, unless sever() is
    // called within it (a tick that destroys its own pool). Whether it started or not, the run
    // ends with finish().
    class started_run
    {
    public:
        started_run(owner_link& link, const task<Clock>& t) noexcept : owner_(link)
        {
            owner_.run_ = owner_.get() && owner_.get()->may_run(t);
        }
        started_run(const started_run&) = delete;
        started_run& operator=(const started_run&) = delete;

        explicit operator bool() const noexcept { return owner_.run_; }

        // As finish_run(), through this run's pin, which it then lets go of.
        void finish(task<Clock>& t, std::exception_ptr error) noexcept
        {
            const deferred_completions after_unpin; // as in finish_run()
            owner_.run_ = false; // the owner's own code from here on: see sever()
            end_run(owner_.get(), t, std::move(error)); // none if the run destroyed its owner
            owner_.let_go();
        }

    private:
        pinned owner_;
    };

    // Whether the owner is still there. Once false, it stays so, and whatever the owner did
    // before sever() (and f() in with_owner()) happened before this returned.
    bool alive() const noexcept { return !(state_.load(std::memory_order_acquire) & gone); }

    // The owner is leaving (it lets no run start any more); returns once no finish_run() or
    // with_owner() is inside it, and no started_run is left but this thread's own, which it lets
    // go of (they end without the owner). The others end while the owner is still there, so that
    // it sees their ends (its hooks run for them). Called by the owner's own code inside
    // finish_run() or with_owner(), which would wait for itself for ever, it ends the process
    // with a message instead.
    void sever() noexcept
    {
        for (pinned* p = pins_here_; p; p = p->outer_)
        {
            if (&p->link_ != this || !p->owner_) // another link's, or let go of
                continue;
            if (!p->run_)
                waits_for_itself();
            p->owner_ = nullptr;
            state_.fetch_sub(1, std::memory_order_relaxed);
        }
        std::unique_lock lock(mutex_);
        std::uint32_t s = state_.fetch_or(severing) | severing;
        for (;;)
        {
            if ((s & pin_count) != 0)
            {
                pins_released_.wait(lock);
                s = state_.load();
            }
            // A pin taken since `s` was read fails the exchange, and is waited for in turn.
            else if (state_.compare_exchange_weak(s, s | gone))
                return;
        }
    }

private:
    // Ends a run, through `owner` if it is still there.
    static void end_run(task_owner<Clock>* owner, task<Clock>& t, std::exception_ptr error) noexcept
    {
        if (owner)
            owner->finish_run(t, std::move(error));
        else
        {
            if (t.cancel(false))
                t.mark_shut_down();
            t.await_canceller(); // one from the operation's slot holds no reference
            t.release_body();
            t.release();
        }
    }

    [[noreturn]] static void waits_for_itself() noexcept
    {
        std::fputs("sched: a pool is being destroyed by code that it runs or ends (a hook, its "
                   "error sink, a work bound to it); it would wait for itself for ever\n",
                   stderr);
        std::terminate();
    }

    // The innermost pinned object of this thread, of any link.
    static inline thread_local pinned* pins_here_ = nullptr;

    // state_: the pins alive (pinned objects, and those of started_run), and two flags.
    static constexpr std::uint32_t severing = std::uint32_t(1) << 31; // sever() waits for them
    static constexpr std::uint32_t gone = std::uint32_t(1) << 30;     // the owner has left
    static constexpr std::uint32_t pin_count = gone - 1;

    task_owner<Clock>* const owner_;
    std::atomic<std::uint32_t> state_{0};
    std::mutex mutex_; // for sever()'s wait only
    std::condition_variable pins_released_;
};

} // namespace sched::detail

SCHED_VISIBILITY_END

#endif // SCHED_DETAIL_TASK_HPP
