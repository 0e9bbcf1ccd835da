#ifndef SCHED_DETAIL_HANDLER_WORK_HPP
#define SCHED_DETAIL_HANDLER_WORK_HPP

#include <sched/detail/visibility.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_allocator.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/execution/context.hpp>
#include <boost/asio/execution/executor.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/query.hpp>
#include <boost/asio/require.hpp>
#include <boost/asio/strand.hpp>

#include <concepts>
#include <optional>
#include <type_traits>
#include <utility>
#include <variant>

SCHED_VISIBILITY_BEGIN

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

// The io_context executor that `ex` is, untracked, or that an any_io_executor `ex` holds,
// tracked or not (what require(io.get_executor(), outstanding_work.tracked) gives); else nullopt.
template <class Executor>
std::optional<boost::asio::io_context::executor_type> io_executor_of(const Executor& ex) noexcept
{
    using io_executor = boost::asio::io_context::executor_type;
    if constexpr (std::is_same_v<Executor, boost::asio::any_io_executor>)
    {
        if (const auto* io = ex.template target<io_executor>())
            return *io;
        if (const auto* counted = ex.template target<tracked_executor_t<io_executor>>())
            return boost::asio::require(*counted,
                                        boost::asio::execution::outstanding_work.untracked);
        return std::nullopt;
    }
    else if constexpr (std::is_same_v<Executor, io_executor>)
        return ex;
    else
        return std::nullopt;
}

// Whether E::context() is an io_context: its executors' (of any kind) and io_context::strand.
template <class E>
concept names_its_io_context =
    std::is_same_v<decltype(std::declval<const E&>().context()), boost::asio::io_context&>;

// The io_context that `ex` submits to, if `ex` is an io_context's executor, or a strand of one
// (`make_strand(socket.get_executor())` is a strand of an any_io_executor that wraps one), or an
// io_context::strand, or an any_io_executor that wraps an io_context's executor (tracked or not)
// or a strand of one; else null.
template <class Executor>
boost::asio::io_context* io_context_behind(const Executor& ex) noexcept
{
    if constexpr (std::is_same_v<Executor, boost::asio::any_io_executor>)
    {
        using io_executor = boost::asio::io_context::executor_type;
        if (const std::optional<io_executor> io = io_executor_of(ex))
            return &io->context();
        if (const auto* strand = ex.template target<boost::asio::strand<io_executor>>())
            return io_context_behind(*strand);
        if (const auto* strand = ex.template target<boost::asio::strand<Executor>>())
            return io_context_behind(*strand);
        return nullptr;
    }
    else if constexpr (names_its_io_context<Executor>)
        return &ex.context();
    else if constexpr (requires { ex.get_inner_executor(); })
        return io_context_behind(ex.get_inner_executor());
    else
        return nullptr;
}

// Outstanding work counted on an executor until destroyed or moved from. An any_io_executor
// that wraps an io_context's executor is unwrapped: counting, posting and letting go then make
// no type-erased calls. Work on `counted_elsewhere` (an io_context whose work the caller holds
// by other means for as long as this object needs it) is not counted again.
template <class Executor>
class tracked_work
{
public:
    explicit tracked_work(const Executor& ex,
                          const boost::asio::io_context* counted_elsewhere = nullptr)
        : ex_(track(ex, counted_elsewhere))
    {}

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

    // Whether the executor is an io_context's whose work is counted elsewhere (not here).
    bool counted_elsewhere() const noexcept
    {
        if constexpr (on_io)
            return ex_.index() == 0;
        else
            return false;
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
    using io_executor = boost::asio::io_context::executor_type; // untracked
    static constexpr bool polymorphic = std::is_same_v<Executor, boost::asio::any_io_executor>;
    static constexpr bool on_io = polymorphic || std::is_same_v<Executor, io_executor>;
    // io_context executors: uncounted (counted elsewhere), counted; then any other.
    using storage = std::conditional_t<
        polymorphic,
        std::variant<io_executor, tracked_executor_t<io_executor>, tracked_executor_t<Executor>>,
        std::conditional_t<on_io,
                           std::variant<io_executor, tracked_executor_t<io_executor>>,
                           tracked_executor_t<Executor>>>;

    static storage track(const Executor& ex, const boost::asio::io_context* counted_elsewhere)
    {
        if constexpr (polymorphic)
        {
            if (const std::optional<io_executor> io = io_executor_of(ex))
                return track_io(*io, counted_elsewhere);
            return storage(
                std::in_place_index<2>,
                boost::asio::prefer(ex, boost::asio::execution::outstanding_work.tracked));
        }
        else if constexpr (on_io)
            return track_io(ex, counted_elsewhere);
        else
            return boost::asio::prefer(ex, boost::asio::execution::outstanding_work.tracked);
    }

    static storage track_io(const io_executor& io, const boost::asio::io_context* counted_elsewhere)
    {
        if (&io.context() == counted_elsewhere)
            return storage(std::in_place_index<0>, io);
        return storage(std::in_place_index<1>,
                       boost::asio::prefer(io, boost::asio::execution::outstanding_work.tracked));
    }

    template <class F>
    void visit(F f) const
    {
        if constexpr (on_io)
        {
            if (const auto* io = std::get_if<0>(&ex_))
                f(*io);
            else if (const auto* counted = std::get_if<1>(&ex_))
                f(*counted);
            else if constexpr (polymorphic)
                f(*std::get_if<2>(&ex_));
        }
        else
            f(ex_);
    }

    storage ex_;
};

// The outstanding work of a pending operation: on its I/O executor, so that the I/O context's
// run() does not return while it is pending, and on its handler's associated executor, which
// it completes through (counted once when they are the same). Both are released just before
// the handler runs (or is destroyed). A handler without an executor of its own completes
// through the I/O executor; when that submits to `counted_elsewhere`, an io_context whose work
// the scheduler's service holds while the operation is live, nothing is counted here.
template <class Handler, class IoExecutor>
class handler_work
{
public:
    using handler_executor = boost::asio::associated_executor_t<Handler, IoExecutor>;
    static_assert(boost::asio::execution::is_executor<handler_executor>::value,
                  "sched: a handler's associated executor must be a standard executor; a legacy "
                  "(Networking TS only) one, such as Boost 1.81's io_context::strand, is not "
                  "supported: use boost::asio::make_strand(io) instead");

    handler_work(const Handler& handler,
                 const IoExecutor& io,
                 const boost::asio::io_context* counted_elsewhere)
        : handler_(boost::asio::get_associated_executor(handler, io),
                   has_own_executor<Handler> ? nullptr : counted_elsewhere)
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

    // Submits `f` to run through the handler's executor, never on this thread now (Asio's post).
    template <class Function>
    void post(Function&& f) const
    {
        handler_.post(std::forward<Function>(f));
    }

    // Submits `f` through the I/O executor instead, whatever executor the handler has (its
    // context, being destroyed, destroys `f` unrun with its other handlers).
    template <class Function>
    void post_to_io(Function&& f) const
    {
        if constexpr (has_own_executor<Handler>)
        {
            if (io_)
            {
                io_->post(std::forward<Function>(f));
                return;
            }
        }
        handler_.post(std::forward<Function>(f)); // the handler's executor is the I/O executor
    }

    // Whether the handler completes through the I/O executor itself.
    bool on_io() const noexcept
    {
        if constexpr (has_own_executor<Handler>)
            return !io_;
        else
            return true;
    }

    // Whether the handler completes through the I/O executor, on the io_context whose work is
    // counted elsewhere: its scheduler's service's.
    bool on_counted_io() const noexcept { return on_io() && handler_.counted_elsewhere(); }

    // The execution context of the handler's executor.
    boost::asio::execution_context& handler_context() const noexcept { return handler_.context(); }

    // The work on the I/O executor, taken as the completion leaves for the handler's own
    // executor: the caller lets go of it once the completion is there, as Asio does, so that the
    // I/O context may end, or go, while the handler waits elsewhere.
    auto take_io_work() noexcept
    {
        if constexpr (has_own_executor<Handler>)
            return std::exchange(io_, std::nullopt);
        else
            return no_io_work{};
    }

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

SCHED_VISIBILITY_END

#endif // SCHED_DETAIL_HANDLER_WORK_HPP
