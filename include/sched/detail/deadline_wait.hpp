#ifndef SCHED_DETAIL_DEADLINE_WAIT_HPP
#define SCHED_DETAIL_DEADLINE_WAIT_HPP

#include <sched/scheduled_thread_pool.hpp>

#include <sched/detail/pool_access.hpp>
#include <sched/detail/task.hpp>
#include <sched/detail/visibility.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>
#include <optional>
#include <thread>

SCHED_VISIBILITY_BEGIN

namespace sched::detail {

// The expiry of a deadline's wait: one word, kept in the deadline object itself, so that pushing
// the expiry back touches the deadline and not its queued node (at 100,000 connections each is a
// cache miss). Holds the expiry's ticks, or `fired` once the wait has fired or ended otherwise
// (cancelled, or failed: out of memory, it could not go back in the queue).
template <class Clock>
class expiry_word
{
public:
    using time_point = typename Clock::time_point;
    using rep = typename Clock::duration::rep;
    static constexpr rep fired = std::numeric_limits<rep>::min();
    static constexpr rep never = std::numeric_limits<rep>::max(); // time_point::max()

    static rep ticks(time_point t) noexcept
    {
        return std::max(t.time_since_epoch().count(), fired + 1);
    }

    // Before a wait that uses this word is queued: it expires at `t`.
    void arm(time_point t) noexcept { value.store(ticks(t), std::memory_order_relaxed); }

    // Sets the expiry to `t`, unless the wait has fired; returns the expiry it replaced, or
    // `fired`.
    rep move_to(time_point t) noexcept
    {
        const rep wanted = ticks(t);
        rep was = value.load(std::memory_order_acquire);
        while (was != fired && !value.compare_exchange_weak(was, wanted, std::memory_order_acq_rel,
                                                            std::memory_order_acquire))
        {}
        return was;
    }

    bool has_fired() const noexcept { return value.load(std::memory_order_acquire) == fired; }

    std::atomic<rep> value{fired};
};

// The wait of a basic_deadline: a queue node whose expiry moves without a handler invocation.
//
// Moving it later is lazy: one atomic exchange on the deadline's expiry word, and the node stays
// where it is in the queue. When it comes due there, the runner finds the expiry still ahead
// (due_after_all()) and queues it again at the expiry, so a deadline pushed back a thousand times
// before it falls costs one extra pass through the queue. That runner also moves the waits queued
// right behind it, due soon, that have been pushed back too (lazy_due()), so that they do not each
// wake a thread for a time they no longer have. Moving it earlier moves the node in place
// (O(log n)), since the queue would otherwise wake too late.
//
// Moving and firing have one winner: the runner fires only by swapping the expiry for `fired`
// while it is due, and a move succeeds only if it swaps in its time before that. So do cancelling
// and firing: a cancel first swaps in `fired` itself (cancel_unless_fired()), and the runner
// begins the completion while it still holds the word it fired.
//
// The word lives in the deadline, which may move or go while a runner or a canceller reaches
// it through the node: they hold the node's link to it (a tag bit) while they use it, and the
// deadline moves the link (to its new place, or to the node's own word as it lets go) only
// while nobody holds it. A wait not attached to a deadline (the scheduler's async_wait) is due
// when it is queued.
template <class Clock>
class deadline_wait : public task<Clock>
{
public:
    using time_point = typename Clock::time_point;
    using duration = typename Clock::duration;
    using word_type = expiry_word<Clock>;

    // Owner only, before the node is queued: its expiry is `word`.
    void attach(word_type& word) noexcept
    {
        link_.store(reinterpret_cast<std::uintptr_t>(&word), std::memory_order_release);
    }

    // Owner only: the deadline's word moves to `to` (its value with it), or the deadline lets go
    // of the node (to its own word).
    void relocate(word_type* to = nullptr) noexcept
    {
        if (!to)
            to = &own_;
        std::uintptr_t at = link_.load(std::memory_order_acquire);
        for (;;)
        {
            if ((at & held) != 0)
            {
                std::this_thread::yield();
                at = link_.load(std::memory_order_acquire);
            }
            else if (link_.compare_exchange_weak(at, at | held, std::memory_order_acquire))
                break;
        }
        to->value.store(as_word(at).value.load(std::memory_order_relaxed),
                        std::memory_order_relaxed);
        link_.store(reinterpret_cast<std::uintptr_t>(to), std::memory_order_release);
    }

    // Owner only, after `word` moved earlier: moves the node to `t` in its pool's queue. A runner
    // holding it (to queue it again at the old expiry) puts it back in a moment; then move it.
    void pull_in(basic_scheduled_thread_pool<Clock>& pool, time_point t, const word_type& word)
    {
        while (!pool_access::reschedule(pool, *this, t) && !word.has_fired() &&
               this->state() == future_state::pending)
            std::this_thread::yield();
    }

    bool due_after_all() noexcept override
    {
        if (link_.load(std::memory_order_relaxed) == 0)
            return true;
        const typename word_type::rep now = Clock::now().time_since_epoch().count();
        bool ended = false;
        const bool due = with_word([&](word_type& word) {
            typename word_type::rep expiry = word.value.load(std::memory_order_acquire);
            if (expiry == word_type::fired)
            {
                ended = true; // a cancel has claimed the word (cancel_unless_fired())
                return true;
            }
            // time_point::max() is "never", as in the queue, even once the clock gets there.
            while (expiry <= now && expiry != word_type::never)
            {
                if (word.value.compare_exchange_weak(expiry, word_type::fired,
                                                     std::memory_order_acq_rel,
                                                     std::memory_order_acquire))
                {
                    // Fired: the completion begins in the same hold, so that a cancel, which
                    // holds the word to claim it, finds it begun once the word reads `fired`.
                    completion_begun_ = this->begin_completing();
                    return true;
                }
            }
            requeue_at_ = time_point(duration(expiry));
            return false;
        });
        // The canceller is about to cancel the task; the run must find it cancelled, not
        // complete it with success before its expiry.
        while (ended && this->state() == future_state::pending)
            std::this_thread::yield();
        return due;
    }

    // The deadline's cancel() and the wait's cancellation slot: cancels the wait unless it has
    // fired; returns whether it did. The word decides, as between a move and the expiry: once it
    // reads `fired`, the completion with success is under way and the cancel is too late.
    bool cancel_unless_fired() noexcept
    {
        if (link_.load(std::memory_order_relaxed) == 0)
            return this->cancel(false);
        const bool claimed = with_word([](word_type& word) {
            return word.value.exchange(word_type::fired, std::memory_order_acq_rel) !=
                   word_type::fired;
        });
        return claimed && this->cancel(false);
    }

    bool end_moves(bool only_if_never) noexcept override
    {
        if (link_.load(std::memory_order_relaxed) == 0)
            return true;
        // A move succeeds only while the word is not `fired`: none does after this.
        return with_word([&](word_type& word) {
            if (!only_if_never)
            {
                word.value.store(word_type::fired, std::memory_order_release);
                return true;
            }
            typename word_type::rep expected = word_type::never;
            return word.value.compare_exchange_strong(
                expected, word_type::fired, std::memory_order_acq_rel, std::memory_order_acquire);
        });
    }

    std::optional<time_point> lazy_due() noexcept override
    {
        if (link_.load(std::memory_order_relaxed) == 0)
            return std::nullopt;
        std::optional<time_point> due;
        with_word([&](word_type& word) {
            const typename word_type::rep expiry = word.value.load(std::memory_order_acquire);
            if (expiry != word_type::fired)
                due = time_point(duration(expiry));
            return true;
        });
        return due;
    }

protected:
    using task<Clock>::task;

    // Runner only, when due_after_all() said no: when it is due after all.
    time_point expiry() const noexcept { return requeue_at_; }

    // Runner only, after due_after_all() said yes: whether it began the completion (else the
    // run begins it, unless a cancel came first).
    bool completion_begun() const noexcept { return completion_begun_; }

    // The wait has ended (cancelled, or failed): its deadline's word reads `fired`.
    void mark_fired() noexcept
    {
        if (link_.load(std::memory_order_relaxed) != 0)
        {
            with_word([](word_type& word) {
                word.value.store(word_type::fired, std::memory_order_release);
                return true;
            });
        }
    }

private:
    static constexpr std::uintptr_t held = 1;

    static word_type& as_word(std::uintptr_t at) noexcept
    {
        return *reinterpret_cast<word_type*>(at & ~held);
    }

    void note_cancelled() noexcept override { mark_fired(); }

    // Runs f on the word, which cannot move meanwhile.
    template <class F>
    bool with_word(F f) noexcept
    {
        std::uintptr_t at = link_.fetch_or(held, std::memory_order_acquire);
        while ((at & held) != 0)
        {
            std::this_thread::yield();
            at = link_.fetch_or(held, std::memory_order_acquire);
        }
        const bool result = f(as_word(at));
        link_.store(at, std::memory_order_release);
        return result;
    }

    std::atomic<std::uintptr_t> link_{0}; // the word, or 0 for a wait with no deadline
    word_type own_;                       // the word once the deadline has let go
    time_point requeue_at_{};             // runner only
    bool completion_begun_ = false;       // runner only
};

} // namespace sched::detail

SCHED_VISIBILITY_END

#endif // SCHED_DETAIL_DEADLINE_WAIT_HPP
