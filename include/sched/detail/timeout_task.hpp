#ifndef SCHED_DETAIL_TIMEOUT_TASK_HPP
#define SCHED_DETAIL_TIMEOUT_TASK_HPP

#include <sched/detail/pool_access.hpp>
#include <sched/detail/recycler.hpp>
#include <sched/detail/scheduler_service.hpp>
#include <sched/detail/task.hpp>
#include <sched/detail/visibility.hpp>

#include <boost/asio/associated_allocator.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/associator.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/detail/handler_cont_helpers.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/execution/context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/query.hpp>
#include <boost/smart_ptr/intrusive_ptr.hpp>

#include <memory>
#include <mutex>
#include <optional>
#include <type_traits>
#include <utility>

SCHED_VISIBILITY_BEGIN

namespace sched::detail {

// The timeout of one wrapped operation (cancel_after, cancel_at): a queue node that, when due,
// emits cancellation on the signal the wrapped operation's slot is connected to. The emission
// is posted to the operation's executor and dispatched from there through the wrapped handler's,
// where Asio expects it (as its completions go), and never after the operation has completed: a
// mutex orders the two, and the emission is posted only while the operation, not yet complete,
// holds work on those executors (so their contexts are there). The node lets go of the executors
// as the operation completes. It may outlive the handler (the pool's queue, or an emission on
// its way, may hold it), so its memory is the recycler's, never the handler's allocator's (which
// Asio frees before the handler runs).
template <class Clock, class HandlerExecutor, class IoExecutor>
class timeout_task final : public task<Clock>
{
public:
    using allocator_type = recycling_allocator<timeout_task>;

    // Two references: the queue's (the runner's) and the wrapping handler's. `io_service` is the
    // scheduler_service of io_ex's context: the emission is posted there through it.
    static timeout_task* create(basic_scheduled_thread_pool<Clock>& pool,
                                const HandlerExecutor& ex,
                                const IoExecutor& io_ex,
                                scheduler_service<Clock>& io_service,
                                boost::asio::cancellation_type type)
    {
        allocator_type a;
        timeout_task* t = std::allocator_traits<allocator_type>::allocate(a, 1);
        try
        {
            ::new (static_cast<void*>(t)) timeout_task(pool, ex, io_ex, io_service, type);
        }
        catch (...) // copying the executor threw
        {
            std::allocator_traits<allocator_type>::deallocate(a, t, 1);
            throw;
        }
        return t;
    }

    boost::asio::cancellation_slot slot() noexcept { return signal_.slot(); }

    // Forwards cancellation emitted on the wrapped handler's own slot, if it has one, to the
    // operation, until disconnect_outer(). Connecting may allocate (and throw).
    void connect_outer(boost::asio::cancellation_slot outer)
    {
        if (outer.is_connected())
        {
            outer.template emplace<outer_forwarder>(this);
            outer_ = outer;
        }
    }

    // Takes the forwarder out of the handler's slot, unless the slot has dropped it already: it
    // may have been reused for another operation since, or its signal destroyed, and is then
    // left alone, as Asio's operations leave it once they complete.
    void disconnect_outer() noexcept
    {
        boost::asio::cancellation_slot outer = outer_; // the forwarder's destructor resets outer_
        if (outer.is_connected())
            outer.clear();
    }

    // Queues the timeout: the runner's reference goes to the pool. If the operation completed
    // meanwhile, the timeout leaves the queue at once. A pool that is shut down cannot time the
    // operation: cancellation is emitted at once, rather than let it go on unbounded. The caller
    // holds a reference.
    void start(basic_scheduled_thread_pool<Clock>& pool, typename Clock::time_point due)
    {
        if (!pool_access::queue(pool, *this, due))
            post_emission();
        else if (this->state() != future_state::pending)
            pool_access::withdraw(pool, *this);
    }

    // Emits cancellation now, unless the operation has completed (from the outer slot). The
    // operation may complete inside the emission, on this thread: finish() then takes the
    // (recursive) mutex again; what its handler throws leaves here, as from Asio's emit().
    void emit(boost::asio::cancellation_type type)
    {
        std::lock_guard lock(mutex_);
        emitted_ = true;
        if (executor_) // not done
            signal_.emit(type);
    }

    // The operation completed (or was abandoned): no emission from now on, the executor goes
    // while its context is still there, and the timeout leaves the queue.
    void finish() noexcept
    {
        std::optional<HandlerExecutor> executor;
        std::optional<IoExecutor> io_executor;
        {
            std::lock_guard lock(mutex_);
            executor.swap(executor_); // done
            io_executor.swap(io_executor_);
        }
        this->cancel(false);
    }

    bool completes_handler() const noexcept override { return true; }

    run_outcome run(std::stop_token) noexcept override
    {
        if (this->begin_completing())
        {
            this->end_completing(future_state::normal);
            post_emission();
        }
        return {};
    }

    typename Clock::time_point next_due(typename Clock::time_point) noexcept override
    {
        return Clock::time_point::max();
    }

    void fail(std::exception_ptr) noexcept override {}

private:
    // Installed in the wrapped handler's own slot; may run on any thread.
    class outer_forwarder
    {
    public:
        explicit outer_forwarder(timeout_task* t) noexcept : t_(t) {}
        outer_forwarder(const outer_forwarder&) = delete;
        outer_forwarder& operator=(const outer_forwarder&) = delete;
        ~outer_forwarder() { t_->outer_ = {}; }

        void operator()(boost::asio::cancellation_type type) const { t_->emit(type); }

    private:
        timeout_task* t_;
    };

    struct emission
    {
        boost::intrusive_ptr<timeout_task> t;
        void operator()() const { t->emit(t->type_); }
    };

    // On the operation's I/O executor: enters the handler's (a strand, say) as Asio's own
    // completions do; inline for an executor that may block (use_future's). Under the lock, so
    // that the operation cannot complete meanwhile and let its user destroy that executor's
    // context (a copy used after unlocking touched a strand's freed service: a review's ASan
    // probe); an emission run inline takes the (recursive) lock again, and what a handler run
    // inside it throws leaves here, into the executor's run(), as from any Asio handler.
    struct dispatch_emission
    {
        boost::intrusive_ptr<timeout_task> t;
        void operator()() const
        {
            std::lock_guard lock(t->mutex_);
            if (!t->executor_) // done
                return;
            t->emitted_ = false;
            try
            {
                boost::asio::dispatch(*t->executor_, emission{t});
            }
            catch (...)
            {
                if (t->emitted_) // the handler's
                    throw;
                // out of memory: the operation goes on without its timeout
            }
        }
    };

    timeout_task(basic_scheduled_thread_pool<Clock>& pool,
                 const HandlerExecutor& ex,
                 const IoExecutor& io_ex,
                 scheduler_service<Clock>& io_service,
                 boost::asio::cancellation_type type)
        : task<Clock>(period_kind::one_shot, 2, pool_access::owner_number(pool)), type_(type),
          io_service_(io_service), executor_(ex), io_executor_(io_ex)
    {}

    // Posts the emission to the operation's executor, unless the operation has completed.
    void post_emission() noexcept
    {
        std::lock_guard lock(mutex_);
        if (!executor_) // done
            return;
        try
        {
            io_service_.post_here([&] {
                boost::asio::post(*io_executor_,
                                  dispatch_emission{boost::intrusive_ptr<timeout_task>(this)});
            });
        }
        catch (...) // out of memory: the operation goes on without its timeout
        {}
    }

    void destroy_body() noexcept override {}

    void destroy() noexcept override
    {
        allocator_type alloc;
        this->~timeout_task();
        std::allocator_traits<allocator_type>::deallocate(alloc, this, 1);
    }

    const boost::asio::cancellation_type type_;
    // Made as the operation started, while its context was surely there: see post_emission().
    scheduler_service<Clock>& io_service_;
    std::recursive_mutex mutex_;
    bool emitted_ = false; // emit() was entered: see dispatch_emission; guarded by mutex_
    // The handler's executor until the operation is done (finish()); guarded by mutex_.
    std::optional<HandlerExecutor> executor_;
    // The operation's, where the emission is posted; likewise.
    std::optional<IoExecutor> io_executor_;
    boost::asio::cancellation_signal signal_;
    // The wrapped handler's own slot while the forwarder is in it (see disconnect_outer()).
    boost::asio::cancellation_slot outer_;
};

// The handler given to the wrapped operation: the user's handler, whose executor and allocator
// it keeps, with the timeout's cancellation slot.
template <class Handler, class Timeout>
class timeout_handler
{
public:
    using cancellation_slot_type = boost::asio::cancellation_slot;

    // Adopts the reference to @p timeout made for it, even if moving the handler in throws.
    // Connecting the caller's slot may allocate (and throw).
    template <class H>
    timeout_handler(H&& handler, Timeout* timeout)
        : timeout_(timeout, false), handler_(std::forward<H>(handler))
    {
        timeout->connect_outer(boost::asio::get_associated_cancellation_slot(handler_));
    }

    timeout_handler(timeout_handler&&) = default; // noexcept as the handler's move is
    timeout_handler& operator=(timeout_handler&&) = delete;

    ~timeout_handler() { let_go(); }

    // None once moved from, or invoked (the timeout is let go of then).
    cancellation_slot_type get_cancellation_slot() const noexcept
    {
        return timeout_ ? timeout_->slot() : cancellation_slot_type();
    }

    const Handler& handler() const noexcept { return handler_; }

    // Asio's hint that the handler continues its caller's chain of operations, passed on.
    friend bool asio_handler_is_continuation(timeout_handler* h)
    {
        return boost_asio_handler_cont_helpers::is_continuation(h->handler_);
    }

    template <class... Args>
    void operator()(Args&&... args)
    {
        let_go();
        std::move(handler_)(std::forward<Args>(args)...);
    }

private:
    void let_go() noexcept
    {
        if (timeout_)
        {
            timeout_->finish();
            timeout_->disconnect_outer();
            timeout_.reset();
        }
    }

    boost::intrusive_ptr<Timeout> timeout_; // first: see the constructor
    Handler handler_;
};

} // namespace sched::detail

namespace boost::asio {

// The wrapped handler's executor and allocator are the user handler's.
template <template <class, class> class Associator,
          class Handler,
          class Timeout,
          class DefaultCandidate>
struct associator<Associator, sched::detail::timeout_handler<Handler, Timeout>, DefaultCandidate>
    : Associator<Handler, DefaultCandidate>
{
    static typename Associator<Handler, DefaultCandidate>::type
    get(const sched::detail::timeout_handler<Handler, Timeout>& h) noexcept
    {
        return Associator<Handler, DefaultCandidate>::get(h.handler());
    }

    static auto get(const sched::detail::timeout_handler<Handler, Timeout>& h,
                    const DefaultCandidate& c) noexcept
        -> decltype(Associator<Handler, DefaultCandidate>::get(h.handler(), c))
    {
        return Associator<Handler, DefaultCandidate>::get(h.handler(), c);
    }
};

} // namespace boost::asio

SCHED_VISIBILITY_END

#endif // SCHED_DETAIL_TIMEOUT_TASK_HPP
