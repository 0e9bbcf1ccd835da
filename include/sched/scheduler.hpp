#ifndef SCHED_SCHEDULER_HPP
#define SCHED_SCHEDULER_HPP

#include <sched/periodic_options.hpp>
#include <sched/scheduled_thread_pool.hpp>
#include <sched/tick.hpp>

#include <sched/detail/async_task.hpp>
#include <sched/detail/scheduler_service.hpp>
#include <sched/detail/time.hpp>
#include <sched/detail/visibility.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/execution/context.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/query.hpp>
#include <boost/system/error_code.hpp>

#include <chrono>
#include <concepts>
#include <cstddef>
#include <exception>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <utility>

SCHED_VISIBILITY_BEGIN

namespace sched {
namespace detail {

template <class R>
struct schedule_signature
{
    using type = void(std::exception_ptr, R);
};

template <>
struct schedule_signature<void>
{
    using type = void(std::exception_ptr);
};

// Whether a periodic operation's argument is its options rather than its completion token.
template <class T>
inline constexpr bool is_periodic_options = std::is_same_v<std::decay_t<T>, periodic_options>;

template <class Initiation, class Clock, class Executor>
class timeout_initiation;

} // namespace detail

template <class Clock, class Executor>
class basic_deadline;

/// The completion signature of async_schedule() for work returning @p R: `void(std::exception_ptr,
/// R)`, or `void(std::exception_ptr)` for void, as co_spawn's.
template <class R>
using schedule_signature_t = typename detail::schedule_signature<R>::type;

/// The completion signature of the periodic operations: why it ended, and how many ticks ran.
using periodic_signature = void(std::exception_ptr, std::size_t);

/// An Asio I/O object that runs work and waits on a basic_scheduled_thread_pool and completes
/// through Asio's completion tokens: callbacks, futures, coroutines, deferred operations...
/**
 * Each operation is one queue entry in the pool, removed in O(log n) when it is cancelled. The
 * work runs on a pool worker; the completion handler runs through its associated executor,
 * which is the scheduler's executor unless the handler names another: with an io_context's
 * executor, work runs on the pool and completions come back to the io_context.
 *
 * With an io_context's executor (and a clock Asio's timers can wait on), a wait at the head of
 * the pool's queue, or a periodic operation's tick bound to that io_context, is waited for by a
 * timer on that io_context, not by a worker: the io_context's thread that wakes (up to the
 * pool's timer_slack after the due time, as a worker would; with its spin_before_due, that long
 * before, and then it polls the clock between other handlers) takes what fell due meanwhile, runs
 * the waits' handlers and posts the ticks: one wake-up for all of them. The pool's before_execute
 * hook runs there too (and after_execute, for waits). If the io_context does not run, or its
 * threads are busy, a free worker takes the wait or tick 10 ms after it is due plus the pool's
 * timer_slack (with a spin, 10 ms after it is due); until then, the pool's tasks due behind it
 * wait too (so they are held up at most that long, or, when earlier waits keep arriving, up to
 * 100 ms more). The other way round, a pool task due before a wait holds the wait up while every
 * worker is busy: the io_context takes only its own operations from the head of the queue. Give
 * timeouts a pool of their own when the pool also runs long work.
 *
 * The Asio contract holds for every operation: the handler is invoked exactly once, never inside
 * the initiating function or a cancellation emit; it runs through its associated executor, on
 * which outstanding work is counted until then (and on the scheduler's executor until the
 * completion has been posted to the handler's, as for Asio's own operations); the operation's
 * memory comes from the handler's associated allocator (a recycling allocator by default or for
 * std::allocator) and is freed before the handler runs; handlers may be move-only. The work (or
 * tick) goes with that memory, so it may hold the pool's last reference; unless it is bound to
 * the pool itself (its executor, or a strand of it): then it goes as its operation ends, on the
 * thread that ends it, while the pool is there, and must not own the pool. A tick bound to an
 * executor in another context than the handler's goes back to that executor as its operation
 * ends, and is destroyed there (docs/asio.md, Periodic ticks on a strand).
 *
 * When memory runs out, an initiating function that cannot start its operation throws
 * std::bad_alloc, and its handler is destroyed unrun, as for any initiation that throws. An
 * operation that can no longer go on (a periodic operation's next tick cannot be queued or
 * posted, a deadline's wait cannot go back in the queue) completes with that std::bad_alloc, or
 * `no_memory` for a wait. A completion that cannot be posted to the handler's executor (Asio's
 * post allocates) destroys the handler unrun, as a shut-down executor context would.
 *
 * Per-operation cancellation (the handler's associated cancellation slot) accepts terminal,
 * partial and total cancellation before the work runs: the operation leaves the queue and
 * completes with `operation_aborted`. Work that has started is not interrupted, unless it takes a
 * std::stop_token: terminal cancellation then requests stop. A cancellation that does not
 * prevent the run changes nothing: the operation completes with the work's outcome.
 *
 * When the pool shuts down, pending operations complete with sched::error::shutdown, or run, as
 * its after-shutdown policies say: shutdown() keeps delayed work and waits by default (they run
 * or complete when due) and ends periodic operations; shutdown_now() and the pool's destruction
 * end them all. Operations started on a shut-down pool complete with the error at once. The
 * error is reported as a boost::system::system_error in the exception_ptr of async_schedule()
 * and the periodic operations. A handler that would run on the pool itself (bound to its
 * executor) is destroyed unrun once the pool has stopped, as a stopped Asio context does.
 *
 * The pool must outlive the scheduler (operations are started on it). A deferred operation
 * (boost::asio::deferred, or any token that launches the initiation later) is started through
 * the scheduler object it was made from, as Asio's I/O objects do: launch it while that object
 * exists (cancel_after's token keeps a copy of its scheduler instead). As with Asio's own
 * operations, the context of an executor a handler or a tick is bound to (other than the
 * scheduler's I/O context and the pool) must outlive the operation until its handler has run
 * or been destroyed. Destroying the pool completes its pending operations with the shutdown
 * error; destroying the I/O context first takes its operations out of the pool's queue and
 * destroys their handlers unrun, as Asio does with a context's pending handlers (it waits for
 * work or a tick that a worker is running, or a tick posted to its own executor, to come back:
 * such work must not wait for that context).
 *
 * @tparam Clock The pool's clock (sched::manual_clock in tests).
 * @tparam Executor The I/O executor: the default completion executor.
 *
 * @par Thread safety
 * Distinct objects: Safe. Shared objects: Safe (operations may start from any thread).
 */
template <class Clock = std::chrono::steady_clock, class Executor = boost::asio::any_io_executor>
class basic_scheduler
{
public:
    using clock_type = Clock;
    using duration = typename Clock::duration;
    using time_point = typename Clock::time_point;
    using executor_type = Executor;
    using pool_type = basic_scheduled_thread_pool<Clock>;
    /// What each run of a periodic operation may be told.
    using tick_type = basic_tick<Clock>;

    /// The scheduler type when rebound to another executor.
    template <class Executor1>
    struct rebind_executor
    {
        using other = basic_scheduler<Clock, Executor1>;
    };

    /// Completes through @p ex by default; runs work on @p pool.
    basic_scheduler(const executor_type& ex, pool_type& pool)
        : executor_(ex), pool_(&pool), service_(&service_for(executor_)),
          alarm_(service_->attach(pool, io_context_of(executor_)))
    {}

    /// Completes through @p context's executor by default; runs work on @p pool.
    template <class ExecutionContext>
    requires std::convertible_to<ExecutionContext&, boost::asio::execution_context&>
    basic_scheduler(ExecutionContext& context, pool_type& pool)
        : basic_scheduler(context.get_executor(), pool)
    {}

    /// Moves from a scheduler with another executor type.
    template <class Executor1>
    requires std::constructible_from<Executor, const Executor1&>
    basic_scheduler(basic_scheduler<Clock, Executor1>&& other)
        : basic_scheduler(executor_type(other.get_executor()), other.pool())
    {}

    basic_scheduler(const basic_scheduler&) = default;
    basic_scheduler(basic_scheduler&&) noexcept = default;
    basic_scheduler& operator=(const basic_scheduler&) = default;
    basic_scheduler& operator=(basic_scheduler&&) noexcept = default;

    /// The I/O executor: handlers without an executor of their own complete through it.
    executor_type get_executor() const noexcept { return executor_; }

    /// The pool the work runs on.
    pool_type& pool() const noexcept { return *pool_; }

    /// Runs @p work on a pool worker @p delay from now; completes with what it returned or threw.
    /**
     * Completion signature schedule_signature_t<R>: `void(std::exception_ptr, R)` for work
     * returning R, `void(std::exception_ptr)` for void work. The exception_ptr holds what the
     * work threw, unchanged; a boost::system::system_error carrying `operation_aborted`
     * (cancelled) or sched::error::shutdown (the pool shut down) if it did not run; and
     * std::invalid_argument for an empty @p work, which is not scheduled. R must be default
     * constructible: the value that comes with an exception.
     */
    template <class Work,
              class Rep,
              class Period,
              class Token = boost::asio::default_completion_token_t<executor_type>>
    requires detail::task_body<Work>
    auto async_schedule(std::chrono::duration<Rep, Period> delay,
                        Work&& work,
                        Token&& token = boost::asio::default_completion_token_t<executor_type>())
    {
        return initiate_schedule(due_or_error(delay), std::forward<Work>(work),
                                 std::forward<Token>(token));
    }

    /// Runs @p work on a pool worker when the clock reaches @p due. @copydetails async_schedule
    template <class Work, class Token = boost::asio::default_completion_token_t<executor_type>>
    requires detail::task_body<Work>
    auto async_schedule(time_point due,
                        Work&& work,
                        Token&& token = boost::asio::default_completion_token_t<executor_type>())
    {
        return initiate_schedule(checked_due{{.at = due}, nullptr}, std::forward<Work>(work),
                                 std::forward<Token>(token));
    }

    /// Waits until @p delay from now: a timer that costs one queue entry and no timer object.
    /**
     * Completion signature `void(boost::system::error_code)`: success when due;
     * `operation_aborted` if cancelled; sched::error::shutdown if the pool shut down;
     * `invalid_argument` for a NaN delay.
     */
    template <class Rep,
              class Period,
              class Token = boost::asio::default_completion_token_t<executor_type>>
    auto async_wait(std::chrono::duration<Rep, Period> delay,
                    Token&& token = boost::asio::default_completion_token_t<executor_type>())
    {
        return initiate_wait(due_or_error(delay), std::forward<Token>(token));
    }

    /// Waits until the clock reaches @p due. @copydetails async_wait
    template <class Token = boost::asio::default_completion_token_t<executor_type>>
    auto async_wait(time_point due,
                    Token&& token = boost::asio::default_completion_token_t<executor_type>())
    {
        return initiate_wait(checked_due{{.at = due}, nullptr}, std::forward<Token>(token));
    }

    /// Runs @p tick first @p initial_delay from now, then every @p period on a fixed grid (the
    /// k-th run due at first + k·period); completes once, when the operation ends.
    /**
     * @p tick runs on a pool worker, or through the executor it is bound to with
     * boost::asio::bind_executor (a connection's strand, say); it never runs concurrently with
     * itself. It takes nothing, a std::stop_token, a `const tick_type&` (when the run was due,
     * when it started, its index, the runs missed before it), or the tick and then a stop token.
     * @p options sets the missed-tick and failure policies and the jitter (by default, Java's:
     * missed runs come back to back, and the first exception ends the operation).
     *
     * Completion signature periodic_signature, `void(std::exception_ptr, std::size_t)`: why it
     * ended — a system_error with `operation_aborted` (cancelled) or sched::error::shutdown, or
     * what the tick threw, which ends it as its failure policy says — and how many ticks ran
     * (failed ones included). A period that is not positive, an empty @p tick or options that do
     * not fit (a jitter larger than the period) complete with std::invalid_argument and 0 ticks
     * without scheduling anything. Failures that do not end the operation go to the pool's
     * error_sink.
     *
     * Terminal and partial cancellation end the operation after any running tick; total
     * cancellation only before the first tick begins (refused from then on: it has effects).
     */
    template <class Tick,
              class Rep1,
              class Period1,
              class Rep2,
              class Period2,
              class Token = boost::asio::default_completion_token_t<executor_type>>
    requires detail::periodic_body<Tick, tick_type>
    auto async_schedule_at_fixed_rate(
        std::chrono::duration<Rep1, Period1> initial_delay,
        std::chrono::duration<Rep2, Period2> period,
        Tick&& tick,
        const periodic_options& options,
        Token&& token = boost::asio::default_completion_token_t<executor_type>())
    {
        return initiate_periodic(detail::period_kind::fixed_rate, due_or_error(initial_delay),
                                 period, std::forward<Tick>(tick), options,
                                 std::forward<Token>(token));
    }

    /// As above, with the default options.
    template <class Tick,
              class Rep1,
              class Period1,
              class Rep2,
              class Period2,
              class Token = boost::asio::default_completion_token_t<executor_type>>
    requires detail::periodic_body<Tick, tick_type> &&
        (!detail::is_periodic_options<Token>)auto async_schedule_at_fixed_rate(
            std::chrono::duration<Rep1, Period1> initial_delay,
            std::chrono::duration<Rep2, Period2> period,
            Tick&& tick,
            Token&& token = boost::asio::default_completion_token_t<executor_type>())
    {
        return async_schedule_at_fixed_rate(initial_delay, period, std::forward<Tick>(tick),
                                            periodic_options{}, std::forward<Token>(token));
    }

    /// Runs @p tick first @p initial_delay from now, then again @p delay after each tick ends.
    /** @copydetails async_schedule_at_fixed_rate
     *  A missed-tick policy other than delay() completes with std::invalid_argument too. */
    template <class Tick,
              class Rep1,
              class Period1,
              class Rep2,
              class Period2,
              class Token = boost::asio::default_completion_token_t<executor_type>>
    requires detail::periodic_body<Tick, tick_type>
    auto async_schedule_with_fixed_delay(
        std::chrono::duration<Rep1, Period1> initial_delay,
        std::chrono::duration<Rep2, Period2> delay,
        Tick&& tick,
        const periodic_options& options,
        Token&& token = boost::asio::default_completion_token_t<executor_type>())
    {
        return initiate_periodic(detail::period_kind::fixed_delay, due_or_error(initial_delay),
                                 delay, std::forward<Tick>(tick), options,
                                 std::forward<Token>(token));
    }

    /// As above, with the default options.
    template <class Tick,
              class Rep1,
              class Period1,
              class Rep2,
              class Period2,
              class Token = boost::asio::default_completion_token_t<executor_type>>
    requires detail::periodic_body<Tick, tick_type> &&
        (!detail::is_periodic_options<Token>)auto async_schedule_with_fixed_delay(
            std::chrono::duration<Rep1, Period1> initial_delay,
            std::chrono::duration<Rep2, Period2> delay,
            Tick&& tick,
            Token&& token = boost::asio::default_completion_token_t<executor_type>())
    {
        return async_schedule_with_fixed_delay(initial_delay, delay, std::forward<Tick>(tick),
                                               periodic_options{}, std::forward<Token>(token));
    }

private:
    template <class C, class E>
    friend class basic_deadline;
    template <class I, class C, class E>
    friend class detail::timeout_initiation;

    detail::scheduler_service<Clock>& service() const noexcept { return *service_; }

    // What waits for this scheduler's waits (and ticks bound to its io_context) when they are
    // due next in the pool: an Asio timer on its io_context, or null (the pool's workers).
    detail::io_alarm<Clock>* alarm() const noexcept { return alarm_; }

    static detail::scheduler_service<Clock>& service_for(const executor_type& ex)
    {
        return detail::scheduler_service<Clock>::of(
            boost::asio::query(ex, boost::asio::execution::context), detail::io_context_behind(ex));
    }

    static boost::asio::io_context* io_context_of(const executor_type& ex) noexcept
    {
        const auto io = detail::io_executor_of(ex);
        return io ? &io->context() : nullptr;
    }

    // A due time, or why the input was rejected.
    struct checked_due
    {
        detail::due_spec<Clock> due;
        std::exception_ptr error;
    };

    // A delay counts from the initiation: a deferred operation's from when it is launched.
    template <class Rep, class Period>
    static checked_due due_or_error(std::chrono::duration<Rep, Period> delay)
    {
        if (detail::is_nan(delay))
            return {{},
                    std::make_exception_ptr(std::invalid_argument("scheduler: a delay is NaN"))};
        return {detail::due_spec<Clock>::in(delay), nullptr};
    }

    template <class Work>
    static std::exception_ptr empty_work_error(const Work& work)
    {
        if (detail::is_empty_callable(work))
            return std::make_exception_ptr(std::invalid_argument("scheduler: empty work or tick"));
        return nullptr;
    }

    template <detail::async_kind Kind, class Work>
    struct initiation
    {
        using executor_type = Executor;

        basic_scheduler* self;

        // The default completion executor, for tokens that ask (experimental::use_promise).
        executor_type get_executor() const noexcept { return self->executor_; }

        // `schedule`: a periodic operation's (empty if its input was rejected), or no_work.
        template <class Handler, class W, class Schedule>
        void operator()(Handler&& handler,
                        W&& work,
                        checked_due due,
                        Schedule schedule,
                        detail::period_kind kind) const
        {
            if constexpr (Kind != detail::async_kind::wait)
            {
                if (!due.error) // the pool's decorate_task hook wraps accepted work and ticks
                {
                    return detail::pool_access::decorate(
                        *self->pool_, std::forward<W>(work), [&]<class Body>(Body&& body) {
                            start<std::decay_t<Body>>(std::forward<Handler>(handler),
                                                      std::forward<Body>(body), due,
                                                      std::move(schedule), kind);
                        });
                }
            }
            start<Work>(std::forward<Handler>(handler), std::forward<W>(work), due,
                        std::move(schedule), kind);
        }

        template <class Body, class Handler, class W, class Schedule>
        void start(Handler&& handler,
                   W&& work,
                   const checked_due& due,
                   Schedule schedule,
                   detail::period_kind kind) const
        {
            using task =
                detail::async_task<Clock, Kind, Body, std::decay_t<Handler>, executor_type>;
            typename task::options opts;
            opts.kind = kind;
            opts.leader = self->alarm_;
            opts.rejected_input = due.error;
            time_point first = due.due.resolve();
            if constexpr (Kind == detail::async_kind::periodic)
            {
                if (schedule)
                    first = schedule->first_due(first);
                opts.schedule = std::move(schedule);
            }
            task::start(*self->pool_, *self->service_, self->executor_,
                        std::forward<Handler>(handler), std::forward<W>(work), first,
                        std::move(opts));
        }
    };

    template <class Token>
    auto initiate_wait(checked_due due, Token&& token)
    {
        return boost::asio::async_initiate<Token, void(boost::system::error_code)>(
            initiation<detail::async_kind::wait, detail::no_work>{this}, token, detail::no_work{},
            due, detail::no_work{}, detail::period_kind::one_shot);
    }

    template <class Work, class Token>
    auto initiate_schedule(checked_due due, Work&& work, Token&& token)
    {
        using result = detail::task_result_t<Work>;
        static_assert(std::is_void_v<result> || std::is_default_constructible_v<result>,
                      "async_schedule: the work's result must be default constructible");
        if (!due.error)
            due.error = empty_work_error(work);
        return boost::asio::async_initiate<Token, schedule_signature_t<result>>(
            initiation<detail::async_kind::schedule, std::decay_t<Work>>{this}, token,
            std::forward<Work>(work), due, detail::no_work{}, detail::period_kind::one_shot);
    }

    template <class Tick, class Rep, class Period, class Token>
    auto initiate_periodic(detail::period_kind kind,
                           checked_due due,
                           std::chrono::duration<Rep, Period> period,
                           Tick&& tick,
                           const periodic_options& options,
                           Token&& token)
    {
        static_assert(std::is_void_v<detail::periodic_result_t<Tick, tick_type>>,
                      "a periodic tick returns void");
        if (!due.error && !(period > std::chrono::duration<Rep, Period>::zero()))
        {
            due.error = std::make_exception_ptr(
                std::invalid_argument("scheduler: period must be positive"));
        }
        if (!due.error)
            due.error = empty_work_error(tick);
        std::optional<detail::periodic_schedule<Clock>> schedule;
        if (!due.error)
        {
            try
            {
                schedule.emplace(kind, detail::checked_period<duration>(period), options,
                                 pool_->queue().deliberate_lateness());
            }
            catch (...) // options that do not fit: std::invalid_argument
            {
                due.error = std::current_exception();
            }
        }
        return boost::asio::async_initiate<Token, periodic_signature>(
            initiation<detail::async_kind::periodic, std::decay_t<Tick>>{this}, token,
            std::forward<Tick>(tick), due, std::move(schedule), kind);
    }

    executor_type executor_;
    pool_type* pool_;
    detail::scheduler_service<Clock>* service_;
    detail::io_alarm<Clock>* alarm_;
};

/// The scheduler on std::chrono::steady_clock with a polymorphic I/O executor.
using scheduler = basic_scheduler<>;

} // namespace sched

SCHED_VISIBILITY_END

#endif // SCHED_SCHEDULER_HPP
