#ifndef SCHED_DEADLINE_HPP
#define SCHED_DEADLINE_HPP

#include <sched/scheduler.hpp>

#include <sched/detail/async_task.hpp>
#include <sched/detail/deadline_wait.hpp>
#include <sched/detail/prefetch.hpp>
#include <sched/detail/time.hpp>
#include <sched/detail/visibility.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/error.hpp>
#include <boost/smart_ptr/intrusive_ptr.hpp>
#include <boost/system/error_code.hpp>

#include <chrono>
#include <concepts>
#include <utility>

SCHED_VISIBILITY_BEGIN

namespace sched {

/// A re-armable deadline for idle timeouts: one pending wait whose expiry moves.
/**
 * async_wait() arms the deadline: its handler runs when the expiry passes. expires_at() and
 * expires_after() move an armed deadline's expiry, later or earlier, with no handler invocation
 * and no cancel-and-wait-again (what steady_timer::expires_after costs), and say whether they
 * did: false means no wait was armed (it has fired, is firing, has been cancelled or otherwise
 * ended: a shutdown as below, out of memory or its io_context's destruction, see basic_scheduler;
 * or was never started), and the new expiry is then kept for the next async_wait(). Between a move
 * and the expiry there is one winner: a move that returns true has prevented the old expiry. So, as
 * with Asio's timers, a handler that gets success checks expiry() against the clock: a move after
 * the expiry fired, before the handler ran, calls for another async_wait().
 *
 * Pushing the expiry later (the idle-timeout case, on every message) is one compare-and-swap on
 * a word inside the deadline object, which touches no other memory: the queue entry stays put,
 * and when the old expiry comes, whoever waits for it (a worker, or the io_context's timer: see
 * basic_scheduler) finds the new one and puts the entry back at it, once, however many times it
 * was pushed; with it, the entries right behind it (due within 10 ms) of deadlines pushed back
 * too, so that they do not each wake a thread. Pulling it earlier moves the entry in place, in
 * O(log n); if a thread has just taken the entry out to put it back at a pushed expiry, the call
 * waits (yielding) until that thread has.
 *
 * The wait's handler completes through its associated executor (the deadline's executor by
 * default) with success when the expiry passes, `operation_aborted` if cancelled (cancel(), the
 * destructor, or its cancellation slot: any type), or sched::error::shutdown if the pool's
 * shutdown ended it: shutdown_now(), the pool's destruction, or a shutdown() whose policy drops
 * delayed tasks (by default, shutdown() keeps the wait, which still fires at its expiry, and
 * moves as before; except a wait whose expiry is "never", the default, which a shut-down pool
 * would hold for ever: it ends, as the pool's tasks due never do). A second async_wait() while
 * one is armed completes with `already_started`
 * and leaves the armed one alone.
 *
 * The wait's memory comes from the recycler, whatever the handler's associated allocator
 * (whose memory Asio frees before the handler runs): the deadline keeps the wait until it next
 * arms, or is destroyed.
 *
 * @par Thread safety
 * Distinct objects: Safe. Shared objects: Unsafe, as for Asio's timers: call its functions from
 * one thread or strand at a time, which should be where its handler completes.
 */
template <class Clock = std::chrono::steady_clock, class Executor = boost::asio::any_io_executor>
class basic_deadline
{
public:
    using clock_type = Clock;
    using duration = typename Clock::duration;
    using time_point = typename Clock::time_point;
    using executor_type = Executor;
    using pool_type = basic_scheduled_thread_pool<Clock>;

    /// The deadline type when rebound to another executor.
    template <class Executor1>
    struct rebind_executor
    {
        using other = basic_deadline<Clock, Executor1>;
    };

    /// A deadline completing through @p ex by default, waiting on @p pool; not armed, expiry
    /// "never".
    basic_deadline(const executor_type& ex, pool_type& pool) : scheduler_(ex, pool) {}

    /// A deadline completing through @p context's executor by default, waiting on @p pool.
    template <class ExecutionContext>
    requires std::convertible_to<ExecutionContext&, boost::asio::execution_context&>
    basic_deadline(ExecutionContext& context, pool_type& pool) : scheduler_(context, pool)
    {}

    /// A deadline with @p scheduler's executor and pool.
    explicit basic_deadline(const basic_scheduler<Clock, Executor>& scheduler) noexcept
        : scheduler_(scheduler)
    {}

    /// Takes over @p other's expiry and armed wait.
    basic_deadline(basic_deadline&& other) noexcept
        : scheduler_(other.scheduler_), expiry_(other.expiry_)
    {
        take_wait(other);
    }

    /// Takes over the expiry and armed wait of a deadline with another executor type (as
    /// `as_default_on` does); the armed wait completes as it was started to.
    template <class Executor1>
    requires(!std::same_as<Executor1, Executor> &&
             std::constructible_from<Executor, const Executor1&>)
        basic_deadline(basic_deadline<Clock, Executor1>&& other)
        : scheduler_(std::move(other.scheduler_)), expiry_(other.expiry_)
    {
        take_wait(other);
    }

    /// Cancels this deadline's armed wait, then takes over @p other's.
    basic_deadline& operator=(basic_deadline&& other) noexcept
    {
        if (this != &other)
        {
            cancel();
            let_go();
            scheduler_ = other.scheduler_;
            expiry_ = other.expiry_;
            take_wait(other);
        }
        return *this;
    }

    /// Cancels the armed wait, if any.
    ~basic_deadline()
    {
        cancel();
        let_go();
    }

    /// The default completion executor.
    executor_type get_executor() const noexcept { return scheduler_.get_executor(); }

    /// The expiry: of the armed wait, or for the next one.
    time_point expiry() const noexcept { return expiry_; }

    /// Whether a wait is armed: started, and neither fired nor cancelled.
    bool armed() const noexcept { return wait_ && !word_.has_fired(); }

    /// Sets the expiry to @p t, moving the armed wait in place.
    /** @returns true if it moved an armed wait; false if none was armed. */
    bool expires_at(time_point t) noexcept
    {
        expiry_ = t;
        if (!wait_)
            return false;
        const auto was = word_.move_to(t);
        if (was == word_type::fired)
            return false;
        if (word_type::ticks(t) < was)
            wait_->pull_in(scheduler_.pool(), t, word_);
        return true;
    }

    /// Sets the expiry to @p d from now (saturating; a NaN is rejected with
    /// std::invalid_argument), moving the armed wait in place.
    /** @returns true if it moved an armed wait; false if none was armed. */
    template <class Rep, class Period>
    bool expires_after(std::chrono::duration<Rep, Period> d)
    {
        // A deadline among many is likely out of cache: its miss can overlap the clock read.
        detail::prefetch_for_write(&expiry_);
        detail::prefetch_for_write(&word_);
        return expires_at(detail::due_after<Clock>(d));
    }

    /// Cancels the armed wait: its handler completes with `operation_aborted`.
    /** @returns true if it prevented the expiry; false if no wait was armed (as armed() says:
        once the expiry has fired, even while its completion is only beginning, the handler
        gets success, unless a shutdown that ends delayed tasks comes before its run starts
        (sched::error::shutdown, see docs/asio.md), and a move or a cancel reports false). */
    bool cancel() noexcept { return wait_ && wait_->cancel_unless_fired(); }

    /// Arms the deadline: completes when the expiry passes.
    /** Completion signature `void(boost::system::error_code)`. */
    template <class Token = boost::asio::default_completion_token_t<executor_type>>
    auto async_wait(Token&& token = boost::asio::default_completion_token_t<executor_type>())
    {
        return boost::asio::async_initiate<Token, void(boost::system::error_code)>(initiation{this},
                                                                                   token);
    }

private:
    struct initiation
    {
        using executor_type = Executor;

        basic_deadline* self;

        // The default completion executor, for tokens that ask (experimental::use_promise) and
        // for cancel_after's emission: the deadline's, as Asio's I/O objects give theirs.
        executor_type get_executor() const noexcept { return self->get_executor(); }

        template <class Handler>
        void operator()(Handler&& handler) const
        {
            using task = detail::async_task<Clock, detail::async_kind::deadline_wait,
                                            detail::no_work, std::decay_t<Handler>, Executor>;
            typename task::options opts;
            if (self->armed())
            {
                opts.rejected_input = std::make_exception_ptr(
                    boost::system::system_error(boost::asio::error::already_started));
            }
            else
            {
                self->let_go(); // the word is this wait's alone from now on
                self->word_.arm(self->expiry_);
                opts.held = true;
                opts.expiry = &self->word_;
                opts.leader = self->scheduler_.alarm();
            }
            auto wait = task::start(self->scheduler_.pool(), self->scheduler_.service(),
                                    self->scheduler_.get_executor(), std::forward<Handler>(handler),
                                    detail::no_work{}, self->expiry_, std::move(opts));
            if (wait)
                self->wait_ = std::move(wait);
        }
    };

    using word_type = detail::expiry_word<Clock>;

    // Lets go of the last wait, which keeps its expiry in a word of its own from now on.
    void let_go() noexcept
    {
        if (wait_)
        {
            wait_->relocate();
            wait_.reset();
        }
    }

    template <class, class>
    friend class basic_deadline;

    // Takes over other's wait, which finds its expiry in this deadline's word from now on.
    template <class Executor1>
    void take_wait(basic_deadline<Clock, Executor1>& other) noexcept
    {
        wait_ = std::move(other.wait_);
        if (wait_)
            wait_->relocate(&word_);
    }

    basic_scheduler<Clock, Executor> scheduler_;
    // Kept together: a move touches expiry_, wait_ and word_ (and, pulling the expiry in, the
    // pool), and expires_after() asks for their cache lines first.
    time_point expiry_ = time_point::max();
    boost::intrusive_ptr<detail::deadline_wait<Clock>> wait_; // the last wait started
    word_type word_; // the armed wait's expiry, or fired: see detail::deadline_wait
};

/// The deadline on std::chrono::steady_clock with a polymorphic I/O executor.
using deadline = basic_deadline<>;

} // namespace sched

SCHED_VISIBILITY_END

#endif // SCHED_DEADLINE_HPP
