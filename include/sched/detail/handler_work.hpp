#ifndef SCHED_DETAIL_HANDLER_WORK_HPP
#define SCHED_DETAIL_HANDLER_WORK_HPP

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_allocator.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/execution/context.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/query.hpp>

#include <optional>
#include <type_traits>
#include <utility>
#include <variant>

namespace sched::detail {

template <class Executor>
using tracked_executor_t = std::decay_t<decltype(boost::asio::prefer(
    std::declval<const Executor&>(), boost::asio::execution::outstanding_work.tracked))>;

// The associated executor of something that has none of its own.
struct no_executor
{};

// Whether T has an associated executor of its own (bind_executor's, say).
template <class T>
inline constexpr bool has_own_executor =
    !std::is_same_v<boost::asio::associated_executor_t<T, no_executor>, no_executor>;

// Outstanding work counted on an executor until destroyed or moved from. An any_io_executor
// that wraps an io_context's executor is unwrapped: counting, posting and letting go then make
// no type-erased calls.
template <class Executor>
class tracked_work
{
public:
    explicit tracked_work(const Executor& ex) : ex_(track(ex)) {}

    // Submits `f` through the executor, never running it on this thread now (Asio's post). The
    // submission itself counts nothing: this object does.
    template <class Function>
    void post(Function&& f) const
    {
        visit([&](const auto& ex) {
            boost::asio::post(
                boost::asio::prefer(ex, boost::asio::execution::outstanding_work.untracked),
                std::forward<Function>(f));
        });
    }

    boost::asio::execution_context& context() const noexcept
    {
        boost::asio::execution_context* context = nullptr;
        visit([&](const auto& ex) {
            context = &boost::asio::query(ex, boost::asio::execution::context);
        });
        return *context;
    }

private:
    static constexpr bool polymorphic = std::is_same_v<Executor, boost::asio::any_io_executor>;
    using io_context_type = tracked_executor_t<boost::asio::io_context::executor_type>;
    using storage = std::conditional_t<polymorphic,
                                       std::variant<io_context_type, tracked_executor_t<Executor>>,
                                       tracked_executor_t<Executor>>;

    static storage track(const Executor& ex)
    {
        constexpr auto tracked = boost::asio::execution::outstanding_work.tracked;
        if constexpr (polymorphic)
        {
            if (const auto* io = ex.template target<boost::asio::io_context::executor_type>())
                return storage(std::in_place_index<0>, boost::asio::prefer(*io, tracked));
            return storage(std::in_place_index<1>, boost::asio::prefer(ex, tracked));
        }
        else
            return boost::asio::prefer(ex, tracked);
    }

    template <class F>
    void visit(F f) const
    {
        if constexpr (polymorphic)
        {
            if (const auto* io = std::get_if<0>(&ex_))
                f(*io);
            else
                f(*std::get_if<1>(&ex_));
        }
        else
            f(ex_);
    }

    storage ex_;
};

// The outstanding work of a pending operation: on its I/O executor, so that the I/O context's
// run() does not return while it is pending, and on its handler's associated executor, which
// it completes through (counted once when they are the same). Both are released just before
// the handler runs (or is destroyed).
template <class Handler, class IoExecutor>
class handler_work
{
public:
    using handler_executor = boost::asio::associated_executor_t<Handler, IoExecutor>;

    handler_work(const Handler& handler, const IoExecutor& io)
        : handler_(boost::asio::get_associated_executor(handler, io))
    {
        if constexpr (has_own_executor<Handler>)
        {
            if constexpr (std::is_same_v<handler_executor, IoExecutor>)
            {
                if (boost::asio::get_associated_executor(handler, io) == io)
                    return;
            }
            io_.emplace(io);
        }
    }

    // Submits `f` to run through the handler's executor, never on this thread now (Asio's post):
    // `f` names the handler's allocator as its own.
    template <class Function>
    void post(Function&& f) const
    {
        handler_.post(std::forward<Function>(f));
    }

    // Whether the handler completes through the I/O executor itself.
    bool on_io() const noexcept
    {
        if constexpr (has_own_executor<Handler>)
            return !io_;
        else
            return true;
    }

    // The execution context of the handler's executor.
    boost::asio::execution_context& handler_context() const noexcept { return handler_.context(); }

private:
    struct no_io_work
    {};

    tracked_work<handler_executor> handler_;
    [[no_unique_address]] std::conditional_t<has_own_executor<Handler>,
                                             std::optional<tracked_work<IoExecutor>>,
                                             no_io_work>
        io_;
};

} // namespace sched::detail

#endif // SCHED_DETAIL_HANDLER_WORK_HPP
