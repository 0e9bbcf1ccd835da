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

namespace sched::detail {

template <class Executor>
using tracked_executor_t = std::decay_t<decltype(boost::asio::prefer(
    std::declval<const Executor&>(), boost::asio::execution::outstanding_work.tracked))>;

// The outstanding work of a pending operation: on its I/O executor, so that the I/O context's
// run() does not return while it is pending, and on its handler's associated executor, which
// it completes through. Both are released just before the handler runs (or is destroyed).
template <class Handler, class IoExecutor>
class handler_work
{
public:
    using handler_executor = boost::asio::associated_executor_t<Handler, IoExecutor>;

    handler_work(const Handler& handler, const IoExecutor& io)
        : handler_(boost::asio::prefer(boost::asio::get_associated_executor(handler, io),
                                       boost::asio::execution::outstanding_work.tracked))
    {
        // The common case, a handler without an executor of its own, counts once.
        if constexpr (std::is_same_v<handler_executor, IoExecutor>)
        {
            if (boost::asio::get_associated_executor(handler, io) == io)
                return;
        }
        io_.emplace(boost::asio::prefer(io, boost::asio::execution::outstanding_work.tracked));
    }

    // Submits `f` to run through the handler's executor, never on this thread now (Asio's post):
    // `f` names the handler's allocator as its own.
    template <class Function>
    void post(Function&& f) const
    {
        // An io_context behind a polymorphic executor takes the function directly: one
        // allocation (from the function's allocator) instead of two, and no type erasure.
        if constexpr (std::is_same_v<tracked_executor_t<handler_executor>,
                                     boost::asio::any_io_executor>)
        {
            if (const auto* io = handler_.template target<tracked_io_context_executor>())
            {
                boost::asio::post(*io, std::forward<Function>(f));
                return;
            }
        }
        boost::asio::post(handler_, std::forward<Function>(f));
    }

    // Whether the handler completes through the I/O executor itself.
    bool on_io() const noexcept { return !io_; }

    // The execution context of the handler's executor.
    boost::asio::execution_context& handler_context() const noexcept
    {
        return boost::asio::query(handler_, boost::asio::execution::context);
    }

private:
    using tracked_io_context_executor = tracked_executor_t<boost::asio::io_context::executor_type>;

    tracked_executor_t<handler_executor> handler_;
    std::optional<tracked_executor_t<IoExecutor>> io_;
};

} // namespace sched::detail

#endif // SCHED_DETAIL_HANDLER_WORK_HPP
