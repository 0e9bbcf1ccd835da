#ifndef SCHED_CANCEL_AFTER_HPP
#define SCHED_CANCEL_AFTER_HPP

#include <sched/scheduler.hpp>

#include <sched/detail/handler_work.hpp>
#include <sched/detail/recycler.hpp>
#include <sched/detail/scheduler_service.hpp>
#include <sched/detail/time.hpp>
#include <sched/detail/timeout_task.hpp>
#include <sched/detail/visibility.hpp>

#include <boost/asio/associated_allocator.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/execution/context.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/query.hpp>

#include <chrono>
#include <type_traits>
#include <utility>

SCHED_VISIBILITY_BEGIN

namespace sched {

/// A completion token adapter that bounds an asynchronous operation in time: see cancel_after()
/// and cancel_at().
template <class Token, class Clock, class Executor>
class cancel_at_t
{
public:
    using time_point = typename Clock::time_point;
    using duration = typename Clock::duration;

    /// Cancellation of type @p type is emitted when @p due resolves: at a time point, or a
    /// delay after the operation starts.
    cancel_at_t(const basic_scheduler<Clock, Executor>& scheduler,
                detail::due_spec<Clock> due,
                Token token,
                boost::asio::cancellation_type type)
        : token_(std::move(token)), scheduler_(scheduler), due_(due), type_(type)
    {}

    /// When the timeout falls.
    const detail::due_spec<Clock>& due() const noexcept { return due_; }

    /// The token of the operation it bounds.
    Token& token() noexcept { return token_; }
    const Token& token() const noexcept { return token_; }
    /// Whose pool holds the timeout (a copy of the scheduler given).
    const basic_scheduler<Clock, Executor>& scheduler() const noexcept { return scheduler_; }
    /// The type of cancellation emitted when the timeout falls.
    boost::asio::cancellation_type type() const noexcept { return type_; }

private:
    Token token_;
    basic_scheduler<Clock, Executor> scheduler_;
    detail::due_spec<Clock> due_;
    boost::asio::cancellation_type type_;
};

/// Bounds the operation that @p token completes: if it has not completed @p timeout after it
/// starts, cancellation of @p type (terminal by default) is emitted on its cancellation slot.
/**
 * The timeout is one entry in @p scheduler's pool, taken out in O(log n) when the operation
 * completes first. What the operation does when cancelled is its own affair (a socket read
 * completes with `operation_aborted`). The emission is posted to the operation's executor (its
 * initiation's get_executor(), as an I/O object's; else @p scheduler's) and dispatched from there
 * through the handler's associated executor, as Asio's completions are: into its strand, if it
 * is bound to one; never after the handler has been invoked. As everywhere in Asio, the emission
 * must not run beside the operation's own steps: with several threads running its executor,
 * bind the handler to a strand. So the operation's executor must run for the timeout to take
 * effect (for an operation without one of its own, @p scheduler's io_context). Asio 1.81's
 * adapter tokens (redirect_error, as_tuple, bind_executor, consign, ...) hide the operation's
 * executor from the token inside them: put cancel_after outermost on an I/O object's operation.
 * Cancellation emitted on @p token's own slot is passed on to the operation too; but an adapter
 * outside cancel_after that binds a slot (`bind_cancellation_slot(slot, cancel_after(...))`)
 * gives the operation its slot instead, and the timeout then cancels nothing: bind it inside.
 *
 * The timeout is a task of the pool, under its shutdown policies: a shutdown() that keeps
 * delayed tasks (the default) lets it fire; shutdown_now(), the pool's destruction or a
 * shutdown() that drops delayed tasks drops it, and the operation goes on without its timeout,
 * as it does when memory runs out as the timeout is queued (once the operation has started). A
 * pool already shut down (by any of them) cannot time an operation started afterwards:
 * cancellation is emitted at once, through the same executor, rather than let it run unbounded;
 * so during a graceful shutdown(), bounded operations started before it keep their timeouts, and
 * those started after it end at once.
 *
 * The timeout's memory comes from the recycler, not the handler's allocator: the pool may hold
 * the timeout until after the handler has run. The timeout lets go of the handler's executor as
 * the operation completes (or its initiation throws), so the executor's context may go once the
 * handler has run.
 *
 * The token keeps a copy of @p scheduler (an executor and three pointers), not its address: the
 * scheduler object may go before a lazy (`deferred`) operation starts; its pool and io_context
 * may not.
 *
 * A negative timeout means now; one too large for the clock never fires; a NaN is rejected with
 * std::invalid_argument.
 */
template <class Clock, class Executor, class Token, class Rep, class Period>
auto cancel_after(const basic_scheduler<Clock, Executor>& scheduler,
                  std::chrono::duration<Rep, Period> timeout,
                  Token&& token,
                  boost::asio::cancellation_type type = boost::asio::cancellation_type::terminal)
{
    detail::check_not_nan(timeout);
    return cancel_at_t<std::decay_t<Token>, Clock, Executor>(
        scheduler, detail::due_spec<Clock>::in(timeout), std::forward<Token>(token), type);
}

/// Bounds the operation that @p token completes: if it has not completed when the clock reaches
/// @p due, cancellation of @p type is emitted on its slot. @copydetails cancel_after
template <class Clock, class Executor, class Token>
auto cancel_at(const basic_scheduler<Clock, Executor>& scheduler,
               typename Clock::time_point due,
               Token&& token,
               boost::asio::cancellation_type type = boost::asio::cancellation_type::terminal)
{
    return cancel_at_t<std::decay_t<Token>, Clock, Executor>(scheduler, {.at = due},
                                                             std::forward<Token>(token), type);
}

namespace detail {

template <class Initiation>
concept has_executor = requires(const Initiation& i)
{
    i.get_executor();
};

// Names the wrapped initiation's executor type, if it has an executor: Asio's associated_executor
// (which experimental::use_promise asks) looks for the type, not for get_executor().
template <class Initiation, bool = has_executor<Initiation>>
struct timeout_initiation_executor
{};

template <class Initiation>
struct timeout_initiation_executor<Initiation, true>
{
    using executor_type = std::decay_t<decltype(std::declval<const Initiation&>().get_executor())>;
};

// Starts the wrapped operation with a handler bounded by a timeout.
template <class Initiation, class Clock, class Executor>
class timeout_initiation : public timeout_initiation_executor<Initiation>
{
public:
    timeout_initiation(Initiation initiation,
                       const basic_scheduler<Clock, Executor>& scheduler,
                       due_spec<Clock> due,
                       boost::asio::cancellation_type type)
        : initiation_(std::move(initiation)), scheduler_(scheduler), due_(due), type_(type)
    {}

    auto get_executor() const noexcept requires has_executor<Initiation>
    {
        return initiation_.get_executor();
    }

    template <class Handler, class... Args>
    void operator()(Handler&& handler, Args&&... args)
    {
        using handler_type = std::decay_t<Handler>;
        const auto io_ex = default_executor();
        scheduler_service<Clock>& io_service = service_of(io_ex);
        const auto ex = boost::asio::get_associated_executor(handler, io_ex);
        using timeout =
            timeout_task<Clock, std::decay_t<decltype(ex)>, std::decay_t<decltype(io_ex)>>;
        timeout* t = timeout::create(scheduler_.pool(), ex, io_ex, io_service, type_);
        boost::intrusive_ptr<timeout> keep(t); // until started: the handler may be gone by then
        try
        {
            std::move(initiation_)(
                timeout_handler<handler_type, timeout>(std::forward<Handler>(handler), t),
                std::forward<Args>(args)...);
        }
        catch (...)
        {
            t->disown();  // the handler, if the initiation kept it, may outlive the pool
            t->release(); // the runner's: never queued
            throw;
        }
        try
        {
            t->start(scheduler_.pool(), due_.resolve()); // after the operation connected its slot
        }
        catch (...) // out of memory: the operation, started already, goes on without its timeout
        {}
    }

private:
    // The scheduler_service of the operation's context, which the emission is posted through
    // (see scheduler_service::post_here()): found, or made, now, while the context is surely
    // there, rather than by a worker as the timeout falls due, when the context may be in its
    // destructor (whose walk of its services races one added meanwhile).
    template <class IoExecutor>
    scheduler_service<Clock>& service_of(const IoExecutor& io_ex) const
    {
        scheduler_service<Clock>& own = scheduler_.service();
        if constexpr (has_executor<Initiation>)
        {
            boost::asio::execution_context& context =
                boost::asio::query(io_ex, boost::asio::execution::context);
            if (&context != &own.context())
                return scheduler_service<Clock>::of(context, io_context_behind(io_ex));
        }
        return own;
    }

    auto default_executor() const
    {
        if constexpr (has_executor<Initiation>)
            return initiation_.get_executor();
        else
            return scheduler_.get_executor();
    }

    Initiation initiation_;
    basic_scheduler<Clock, Executor> scheduler_; // a copy: a lazy operation may start later
    due_spec<Clock> due_;
    boost::asio::cancellation_type type_;
};

// The wrapped token's return_type, if its async_result has one (redirect_error and
// experimental::as_single ask for it).
template <class Token, class = void, class... Signatures>
struct cancel_at_return_type
{};

template <class Token, class... Signatures>
struct cancel_at_return_type<
    Token,
    std::void_t<typename boost::asio::async_result<Token, Signatures...>::return_type>,
    Signatures...>
{
    using return_type = typename boost::asio::async_result<Token, Signatures...>::return_type;
};

} // namespace detail
} // namespace sched

namespace boost::asio {

template <class Token, class Clock, class Executor, class... Signatures>
struct async_result<sched::cancel_at_t<Token, Clock, Executor>, Signatures...>
    : sched::detail::cancel_at_return_type<Token, void, Signatures...>
{
    // Declared with its type, so that a caller that only asks the type of a call (a deferred
    // sequence asks it of an overload it will not take, with a const initiation) does not compile
    // the body, where that initiation could not be called.
    template <class Initiation, class RawToken, class... Args>
    static auto initiate(Initiation&& initiation, RawToken&& token, Args&&... args)
        -> decltype(async_initiate<Token, Signatures...>(
            std::declval<
                sched::detail::timeout_initiation<std::decay_t<Initiation>, Clock, Executor>>(),
            token.token(),
            std::forward<Args>(args)...))
    {
        return async_initiate<Token, Signatures...>(
            sched::detail::timeout_initiation<std::decay_t<Initiation>, Clock, Executor>(
                std::forward<Initiation>(initiation), token.scheduler(), token.due(), token.type()),
            token.token(), std::forward<Args>(args)...);
    }
};

} // namespace boost::asio

SCHED_VISIBILITY_END

#endif // SCHED_CANCEL_AFTER_HPP
