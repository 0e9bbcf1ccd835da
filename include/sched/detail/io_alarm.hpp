#ifndef SCHED_DETAIL_IO_ALARM_HPP
#define SCHED_DETAIL_IO_ALARM_HPP

#include <sched/delayed_work_queue.hpp>
#include <sched/scheduled_thread_pool.hpp>

#include <sched/detail/atomic_mutex.hpp>
#include <sched/detail/clock_listener.hpp>
#include <sched/detail/completion_queue.hpp>
#include <sched/detail/pool_access.hpp>
#include <sched/detail/spin_wait.hpp>
#include <sched/detail/task.hpp>
#include <sched/detail/time.hpp>
#include <sched/detail/visibility.hpp>

#include <boost/asio/basic_waitable_timer.hpp>
#include <boost/asio/defer.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/system/error_code.hpp>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

SCHED_VISIBILITY_BEGIN

namespace sched::detail {

template <class Clock>
class scheduler_service;

// Whether an io_alarm can wait on Clock: not on a clock that tests move by hand (the workers
// wait on those, and wake when it moves).
template <class Clock>
inline constexpr bool has_io_alarm = !notifying_clock<Clock>;

// An io_context's timers that wait for a pool's tasks completing on that io_context (a
// scheduler's waits, and the ticks of its periodic operations bound to that io_context) when
// they are at the head of the pool's queue, instead of a worker, and run them on the
// io_context's thread that wakes, followed there by the waits' handlers (a tick is posted to its
// executor): one wake-up, as for a steady_timer, where a worker would wake and then wake an
// io_context's thread. The pool's queue calls it under its lock (see
// basic_delayed_work_queue::set_leader_finder()); its scheduler_service owns it and retires it
// before the io_context goes, or destroys it once its pool is gone and it is idle().
//
// Two timers take turns: one waits for the head, the other for the task after it, if it is idle.
// When the first fires, the io_context's reactor sets its clock for the second at once, and what
// the first then waits for is often not the reactor's earliest: it costs no system call.
//
// With the pool's spin_before_due, a timer wakes that long before the head is due, and the
// thread that wakes polls the clock for it (one thread at a time), in turns of a few microseconds
// posted one after the other, so that the io_context's other handlers run between them.
//
// Setting a timer for a new earliest time costs the reactor a system call, so the alarm keeps a
// timer that would wake in time rather than set it again, and when told to step down, it stops
// its timers only once its io_context gets to a handler it posts for that: an operation armed
// and cancelled at once, over and over (the last pending timeout of a connection), finds the
// timer still waiting and costs no system call. Each timer kept that way wakes early at most
// once, finds nothing due, and is set again; one kept past what is needed now is moved or
// stopped when the alarm next sets a timer. But a wake-up for nothing costs a thread far more
// than the system call: a timer that would wake before the head is due, and soon (within
// early_wake_horizon of the alarm's last wake-up), is moved or stopped rather than kept, and the
// second timer is not readied for a time that soon. Where waits fall due microseconds apart, the
// task after the head is mostly taken by the head's own wake-up, and a timer readied for it woke
// for nothing. (The reactor's earliest timer, moved later or stopped, still wakes the reactor at
// its old time, which Asio does not reset for that; but no handler runs, and no lock is taken.)
template <class Clock>
class io_alarm final : public basic_delayed_work_queue<Clock>::external_leader
{
public:
    using time_point = typename Clock::time_point;
    using led_poll = typename basic_delayed_work_queue<Clock>::led_poll;
    using duration = typename Clock::duration;
    using completions = completion_queue<scheduler_service<Clock>>;

    // `done` takes the completions of the tasks it runs (its service's).
    io_alarm(boost::asio::io_context& io,
             basic_scheduled_thread_pool<Clock>& pool,
             completions& done)
        : timers_{timer(io), timer(io)}, io_(&io), pool_(&pool), link_(pool_access::link(pool)),
          done_(&done)
    {}

    bool lead_until(time_point due, time_point then) noexcept override
    {
        if (!may_lead_)
            return false;
        std::lock_guard lock(timers_mutex_);
        const time_point soon = saturating_add(
            time_point(duration(woke_.load(std::memory_order_relaxed))), early_wake_horizon);
        // A timer that would wake before `due`, soon, for nothing: it is moved or stopped.
        const auto wakes_for_nothing = [&](const timer& t) noexcept {
            return t.at < due && t.at < soon;
        };
        try
        {
            timer* lead = waiting_by(due);
            if (lead && wakes_for_nothing(*lead))
                lead = nullptr; // it moves
            if (!lead)
            {
                // The idle one, or the one that waits for the later time.
                lead = &timers_[0];
                if (timers_[0].waiting() &&
                    (!timers_[1].waiting() || timers_[1].at > timers_[0].at))
                    lead = &timers_[1];
                lead->wait(this, due);
            }
            timer& other = lead == &timers_[0] ? timers_[1] : timers_[0];
            const bool get_ready = then != time_point::max() && then > due && then >= soon;
            // Moving a waiting timer ends its wait, which the io_context then completes as a
            // handler of its own, for nothing: only one that waits past what is needed now, or
            // that would wake for nothing before the lead.
            const bool stale = other.waiting() &&
                               (other.at > (get_ready ? then : due) || wakes_for_nothing(other));
            if (get_ready && (stale || !other.waiting()))
                other.wait(this, then);
            else if (stale)
                other.cancel();
            leads_ = true;
            return true;
        }
        catch (...) // out of memory: a worker leads instead
        {
            // Unless the queue steps it down now (it led), no settle may be coming.
            if (!leads_ && !settle_posted_)
                stop_timers();
            return false;
        }
    }

    void step_down() noexcept override
    {
        std::lock_guard lock(timers_mutex_);
        leads_ = false;
        if (settle_posted_)
            return;
        try
        {
            // On a thread of the io_context, a continuation: no other thread wakes for it.
            boost::asio::defer(*io_, settle{this});
            settle_posted_ = true;
            ++queued_;
        }
        catch (...) // out of memory: they stop now
        {
            stop_timers();
        }
    }

    // The io_context is going (its shutdown, so no settle runs after this): from now on the
    // pool's workers lead. The tasks must have left the pool already
    // (pool_access::abandon_context()); the alarm may be destroyed after this.
    void retire() noexcept
    {
        link_->with_owner(
            [this] { pool_access::dismiss(*pool_, *this, [this] { may_lead_ = false; }); });
    }

    // Whether no handler of its (a timer's wake, a poller, a settle) is queued or running on the
    // io_context. Only the pool's queue, and those handlers themselves, queue them: once the pool
    // is gone (its owner_link no longer alive()) and this is true, it stays true, and the alarm
    // may be destroyed.
    bool idle() noexcept
    {
        std::lock_guard lock(timers_mutex_);
        return queued_ == finished_.load(std::memory_order_acquire);
    }

private:
    // How soon after the alarm's last wake-up a timer must be due to wake for nothing rather
    // than be moved (see the class's comment).
    static constexpr duration early_wake_horizon =
        std::chrono::ceil<duration>(std::chrono::milliseconds(1));

    // In a handler the alarm queued, counts it finished as it returns or throws: the last thing
    // the handler does with the alarm (a handler destroyed unrun does nothing with it).
    struct finish
    {
        io_alarm* alarm;

        ~finish() { alarm->finished_.fetch_add(1, std::memory_order_release); }
    };

    struct timer
    {
        explicit timer(boost::asio::io_context& io) : clock(io) {}

        // Whether its last wait has not completed yet.
        bool waiting() const noexcept { return armed.load(std::memory_order_acquire) != 0; }

        void wait(io_alarm* alarm, time_point due)
        {
            clock.expires_at(due); // a wait still pending ends with operation_aborted
            // Known before the wait starts: it may end, and its handler run, at once.
            const std::uint64_t wait_id = ++alarm->waits_;
            at = due;
            armed.store(wait_id, std::memory_order_release);
            try
            {
                clock.async_wait(wake{alarm, this, wait_id});
            }
            catch (...)
            {
                armed.store(0, std::memory_order_relaxed);
                throw;
            }
            ++alarm->queued_; // under timers_mutex_, as every wait() is
        }

        void cancel() noexcept
        {
            armed.store(0, std::memory_order_relaxed); // its handler, if still to come, is not
            try
            {
                clock.cancel(); // so that the io_context does not wait for it
            }
            catch (...) // it wakes for nothing, and steps down then
            {}
        }

        boost::asio::basic_waitable_timer<Clock> clock;
        time_point at{};
        // The wait under way, or 0 once it has completed; its completion clears it.
        std::atomic<std::uint64_t> armed{0};
    };

    struct wake
    {
        io_alarm* alarm;
        timer* fired;
        std::uint64_t wait_id;

        void operator()(const boost::system::error_code& ec) const
        {
            const finish done{alarm};
            std::uint64_t expected = wait_id;
            fired->armed.compare_exchange_strong(expected, 0, std::memory_order_acq_rel);
            if (ec) // moved to another time, or stopped
                return;
            alarm->run();
        }
    };

    // Polls the clock for a head due within the pool's spin_before_due, one turn at a time, so
    // that the io_context's other handlers run between turns.
    struct poller
    {
        io_alarm* alarm;
        led_poll poll;

        void operator()() const
        {
            const finish done{alarm};
            (void)spin_until<Clock>(poll.until);
            alarm->run(poll);
        }
    };

    // Takes the polling that a thread running handlers has handed on, if it still has (see
    // run()), so that another thread of the io_context polls meanwhile.
    struct taker
    {
        io_alarm* alarm;

        void operator()() const
        {
            const finish done{alarm};
            alarm->taker_queued_.exchange(false, std::memory_order_acq_rel);
            const std::uint64_t turn = alarm->handed_on_.load(std::memory_order_relaxed);
            if (turn != 0 && alarm->claim(turn))
                alarm->run(led_poll{true, time_point::min()});
        }
    };

    // On a thread of the io_context, once woken: runs the due tasks it leads, and the handlers
    // of the waits among them after them, as Asio's timers' would (no other handler and no
    // other thread has to come first). A runner's share of tasks at most: with more due, it goes
    // on in a turn deferred to the io_context, after those handlers (waits due together by the
    // thousand have their first handlers run within a share, not once all are fired). Then, if
    // this thread is to poll the clock for the next head (see
    // basic_delayed_work_queue::take_led()), goes on polling, even if a handler threw (the
    // exception goes on out of the io_context's run()). While the handlers run (they may take
    // long, and no other thread wakes for a head this one polls for), the polling is handed on:
    // posted, so that another thread of the io_context may take it; this thread takes it back if
    // none has by the time they have run.
    void run(led_poll poll = {})
    {
        woke_.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
        bool ran_led = false;   // the pool was there: `poll` is this turn's
        bool more = false;      // it stopped at a share: more may be due
        std::uint64_t turn = 0; // the turn handed on while the handlers run, if any
        const auto go_on = [&]() noexcept {
            if (turn != 0 && claim(turn))
                poll_on(poll);
            else if (more && !poll.polling) // (polling, it goes on as it polls)
                poll_on(poll);
        };
        try
        {
            done_->run_here(
                *io_,
                [&] {
                    link_->with_owner([&] {
                        ran_led = true;
                        more = pool_access::run_led(*pool_, *this, poll, completions::share);
                    });
                },
                [&](bool handlers_follow) noexcept {
                    if (!ran_led || !poll.polling)
                        return;
                    if (handlers_follow)
                        turn = hand_on();
                    else
                        poll_on(poll);
                });
        }
        catch (...)
        {
            go_on();
            throw;
        }
        go_on();
    }

    // Goes on polling (or, not polling, taking what is due) in a continuation of this thread's;
    // out of memory, gives the head back to the queue, which asks its leader (this alarm, most
    // likely) to wake for it again.
    void poll_on(const led_poll& poll) noexcept
    {
        try
        {
            std::lock_guard lock(timers_mutex_);
            boost::asio::defer(*io_, poller{this, poll});
            ++queued_;
        }
        catch (...)
        {
            link_->with_owner([this] { pool_access::dismiss(*pool_, *this, [] {}); });
        }
    }

    // Hands the polling on: a taker posted to the io_context, unless one is queued already (each
    // post may wake a thread), takes it on another thread if this one has not taken it back by
    // then (see claim()). Returns the turn handed on. Out of memory, no taker is posted, and this
    // thread takes the turn back, unless a taker that was starting has found it first.
    std::uint64_t hand_on() noexcept
    {
        std::lock_guard lock(timers_mutex_);
        const std::uint64_t turn = ++turns_;
        handed_on_.store(turn, std::memory_order_relaxed);
        if (taker_queued_.exchange(true, std::memory_order_acq_rel))
            return turn; // the taker queued will find it
        try
        {
            boost::asio::post(*io_, taker{this});
            ++queued_;
        }
        catch (...)
        {
            taker_queued_.store(false, std::memory_order_relaxed);
        }
        return turn;
    }

    // Whether `turn`, handed on, is still to be taken: then the caller takes it (the thread that
    // handed it on, or a taker), and the other finds it gone.
    bool claim(std::uint64_t turn) noexcept
    {
        return handed_on_.compare_exchange_strong(turn, 0, std::memory_order_relaxed);
    }

    // After step_down(), once the io_context runs it: stops the timers, unless the alarm leads
    // again by then.
    struct settle
    {
        io_alarm* alarm;

        void operator()() const noexcept
        {
            const finish done{alarm}; // after the lock is free
            std::lock_guard lock(alarm->timers_mutex_);
            alarm->settle_posted_ = false;
            if (!alarm->leads_)
                alarm->stop_timers();
        }
    };

    // The timer that wakes by `due`, if one is waiting: the latest such.
    timer* waiting_by(time_point due) noexcept
    {
        timer* found = nullptr;
        for (timer& t : timers_)
        {
            if (t.waiting() && t.at <= due && (!found || t.at > found->at))
                found = &t;
        }
        return found;
    }

    // Their waits end, so that the io_context does not wait for them.
    void stop_timers() noexcept
    {
        for (timer& t : timers_)
            t.cancel();
    }

    std::array<timer, 2> timers_;
    boost::asio::io_context* io_;
    basic_scheduled_thread_pool<Clock>* pool_;
    std::shared_ptr<owner_link<Clock>> link_; // says whether the pool is still there
    completions* done_;
    bool may_lead_ = true; // guarded by the pool's queue lock
    // Guards the timers, which the pool's queue uses under its lock, and settle on its own.
    atomic_mutex timers_mutex_;
    std::uint64_t waits_ = 0;    // guarded by timers_mutex_, as are the rest
    bool leads_ = false;         // since the last lead_until() or step_down()
    bool settle_posted_ = false; // and settle has not run yet
    std::uint64_t queued_ = 0;   // handlers it has queued on the io_context
    // Of those, how many have finished: the last thing each does with the alarm, so that one
    // that sees it equal to queued_ (acquiring) may destroy it.
    std::atomic<std::uint64_t> finished_{0};
    std::uint64_t turns_ = 0; // guarded by timers_mutex_: polling turns handed on so far
    // The polling turn handed on and not taken yet, or 0 (see run()).
    std::atomic<std::uint64_t> handed_on_{0};
    std::atomic<bool> taker_queued_{false}; // a taker is queued and has not started
    // When a thread of the io_context last ran the alarm (the clock's count): lead_until() judges
    // "soon" from it (a reading that is old only errs towards keeping a timer).
    std::atomic<typename duration::rep> woke_{0};
};

} // namespace sched::detail

SCHED_VISIBILITY_END

#endif // SCHED_DETAIL_IO_ALARM_HPP
