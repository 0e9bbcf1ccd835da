#ifndef SCHED_DETAIL_ASYNC_TASK_HPP
#define SCHED_DETAIL_ASYNC_TASK_HPP

#include <sched/error.hpp>

#include <sched/detail/completion_queue.hpp>
#include <sched/detail/deadline_wait.hpp>
#include <sched/detail/deferred_completions.hpp>
#include <sched/detail/handler_work.hpp>
#include <sched/detail/pool_access.hpp>
#include <sched/detail/recycler.hpp>
#include <sched/detail/report_uncaught.hpp>
#include <sched/detail/scheduler_service.hpp>
#include <sched/detail/task.hpp>
#include <sched/detail/task_impl.hpp>
#include <sched/detail/visibility.hpp>

#include <boost/asio/associated_allocator.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/execution/context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/query.hpp>
#include <boost/smart_ptr/intrusive_ptr.hpp>
#include <boost/system/system_error.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <new>
#include <optional>
#include <stop_token>
#include <tuple>
#include <type_traits>
#include <utility>

// A tick decorated by the pool's decorate_task hook keeps the executor it is bound to.
template <class F, class Wrapper, class Executor>
struct boost::asio::associated_executor<sched::detail::decorated<F, Wrapper>, Executor>
{
    using type = boost::asio::associated_executor_t<F, Executor>;

    static type get(const sched::detail::decorated<F, Wrapper>& d,
                    const Executor& ex = Executor()) noexcept
    {
        return boost::asio::get_associated_executor(d.body(), ex);
    }
};

SCHED_VISIBILITY_BEGIN

namespace sched::detail {

enum class async_kind : std::uint8_t
{
    wait,          // no work: completes with an error_code when due
    deadline_wait, // a wait whose expiry a deadline moves (see deadline_wait)
    schedule,      // runs its work once on a worker: completes with (exception_ptr[, result])
    periodic, // runs its tick every period until it ends: completes with (exception_ptr, ticks)
};

struct no_work
{};

template <class Tick>
inline constexpr bool tick_is_bound = has_own_executor<Tick>;

// Outstanding work held for an operation's work, or nothing: on the executor a periodic tick is
// bound to (`Tick`), or on the pool, for a one-shot work that may be bound to it (`Pool`).
template <class Clock, class Work, bool Tick, bool Pool>
struct bound_work
{
    using type = no_work;
};

template <class Clock, class Work, bool Pool>
struct bound_work<Clock, Work, true, Pool>
{
    using type = std::optional<tracked_executor_t<boost::asio::associated_executor_t<Work>>>;
};

template <class Clock, class Work>
struct bound_work<Clock, Work, false, true>
{
    using type = std::optional<
        tracked_executor_t<typename basic_scheduled_thread_pool<Clock>::executor_type>>;
};

// Whether `ex` is an executor of `context`; false if it cannot tell (a legacy executor, or one
// without the context property).
template <class Executor>
bool executor_of(const Executor& ex, const boost::asio::execution_context& context) noexcept
{
    using boost::asio::execution::context_t;
    if constexpr (boost::asio::can_query_v<const Executor&, context_t>)
    {
        using context_type = decltype(boost::asio::query(ex, boost::asio::execution::context));
        if constexpr (std::is_convertible_v<context_type, const boost::asio::execution_context&>)
        {
            const boost::asio::execution_context& c =
                boost::asio::query(ex, boost::asio::execution::context);
            return &c == &context;
        }
    }
    return false;
}

// The work's result for async_schedule, or nothing.
template <async_kind Kind, class R>
struct result_holder
{};

template <class R>
struct result_holder<async_kind::schedule, R>
{
    std::optional<R> value;
};

template <>
struct result_holder<async_kind::schedule, void>
{};

// Why an operation ended without its work's outcome: cancelled, or its pool shut down.
inline boost::system::error_code abort_code(bool shut_down) noexcept
{
    return shut_down ? make_error_code(error::shutdown)
                     : boost::system::error_code(boost::asio::error::operation_aborted);
}

// What an operation that ended without its work's outcome reports, as an exception: a
// system_error with abort_code(), or, if there is no memory for it, the std::bad_alloc.
inline std::exception_ptr abort_error(bool shut_down) noexcept
{
    try
    {
        return std::make_exception_ptr(boost::system::system_error(abort_code(shut_down)));
    }
    catch (...)
    {
        return std::current_exception();
    }
}

// The error code a wait reports for `e`: a system_error's own, no_memory for std::bad_alloc (its
// node could not be queued again), else invalid_argument (a rejected input).
inline boost::system::error_code code_of(const std::exception_ptr& e) noexcept
{
    try
    {
        std::rethrow_exception(e);
    }
    catch (const boost::system::system_error& error)
    {
        return error.code();
    }
    catch (const std::bad_alloc&)
    {
        return boost::asio::error::no_memory;
    }
    catch (...)
    {
        return boost::asio::error::invalid_argument;
    }
}

// An asynchronous operation in a pool's queue: the task node, its work, its handler and the
// handler's outstanding work, in one allocation from the handler's associated allocator
// (recycled by default).
//
// The handler learns the outcome exactly once. The runner's release_body() marks the outcome as
// ready; when the last reference goes (usually the runner's, just after), the node posts itself
// to the handler's executor, which frees it and then invokes the handler. A node held by a
// deadline is posted at release_body() instead, and freed when the deadline lets go of it.
//
// Cancellation through the handler's slot wins only if it comes before the run: a one-shot node
// leaves `pending` as its run starts.
template <class Clock, async_kind Kind, class Work, class Handler, class IoExecutor>
class async_task final : public std::conditional_t<Kind == async_kind::deadline_wait,
                                                   deadline_wait<Clock>,
                                                   task<Clock>>,
                         private queued_completion
{
    using base =
        std::conditional_t<Kind == async_kind::deadline_wait, deadline_wait<Clock>, task<Clock>>;
    static constexpr bool is_wait = Kind == async_kind::wait || Kind == async_kind::deadline_wait;
    using tick_type = std::conditional_t<Kind == async_kind::periodic, basic_tick<Clock>, no_tick>;

    static constexpr bool has_bound_tick = Kind == async_kind::periodic && tick_is_bound<Work>;
    static constexpr bool has_bound_work =
        has_bound_tick || (Kind == async_kind::schedule && tick_is_bound<Work>);
    static constexpr bool led_by_alarm = is_wait || has_bound_tick;

    // A member that only periodic operations need, or only those with a bound tick.
    template <class T>
    using if_periodic = std::conditional_t<Kind == async_kind::periodic, T, no_work>;
    template <class T>
    using if_bound_tick = std::conditional_t<has_bound_tick, T, no_work>;

    // A bound tick lives in memory of its own (the recycler's), so that it can leave the node.
    using boxed_tick = allocated_function<Work, recycling_allocator<void>>;
    using work_storage = std::conditional_t<
        is_wait,
        no_work,
        std::conditional_t<has_bound_tick,
                           std::optional<boxed_tick>,
                           std::conditional_t<has_bound_work, std::optional<Work>, Work>>>;

public:
    using time_point = typename Clock::time_point;
    using kept_place = typename task<Clock>::kept_place;
    using duration = typename Clock::duration;
    using work_result = typename std::conditional_t<Kind == async_kind::schedule,
                                                    task_result<Work>,
                                                    std::type_identity<void>>::type;
    // The handler's allocator; the recycler if it has none or names std::allocator (as
    // use_future does), as Asio recycles its own operations then. A deadline's wait, which its
    // deadline keeps after the handler has run, takes the recycler's always: Asio's contract
    // frees the handler allocator's memory before the handler runs.
    using allocator_type = std::conditional_t<
        Kind == async_kind::deadline_wait,
        recycling_allocator<async_task>,
        typename std::allocator_traits<decltype(node_allocator(
            std::declval<
                boost::asio::associated_allocator_t<Handler, recycling_allocator<void>>>()))>::
            template rebind_alloc<async_task>>;

    struct options
    {
        period_kind kind = period_kind::one_shot;
        // A periodic operation's schedule, its first due time drawn.
        if_periodic<std::optional<periodic_schedule<Clock>>> schedule{};
        bool held = false; // a deadline keeps a reference to the node
        // A deadline_wait's expiry, which its deadline moves; set before it is queued.
        expiry_word<Clock>* expiry = nullptr;
        // What waits for a wait or a bound tick at the head of the pool's queue, if not a worker
        // (see io_alarm and leader()).
        io_alarm<Clock>* leader = nullptr;
        std::exception_ptr rejected_input{}; // complete with this at once, scheduling nothing
    };

    // Makes the node and queues it on `pool`, due at `due`. The handler's cancellation slot, if
    // connected, gets its handler first. With `rejected_input`, nothing is queued: the handler
    // is told. Returns the node when options.held (with a reference for the caller), else null.
    template <class H, class W>
    static boost::intrusive_ptr<async_task> start(basic_scheduled_thread_pool<Clock>& pool,
                                                  scheduler_service<Clock>& service,
                                                  const IoExecutor& io,
                                                  H&& handler,
                                                  W&& work,
                                                  time_point due,
                                                  options opts)
    {
        allocator_type alloc = allocator_for(handler);
        async_task* t = std::allocator_traits<allocator_type>::allocate(alloc, 1);
        try
        {
            ::new (static_cast<void*>(t)) async_task(pool, service, io, std::forward<H>(handler),
                                                     std::forward<W>(work), alloc, opts);
        }
        catch (...)
        {
            std::allocator_traits<allocator_type>::deallocate(alloc, t, 1);
            throw;
        }
        if (!opts.rejected_input)
        {
            if constexpr (Kind == async_kind::deadline_wait)
                t->attach(*opts.expiry); // before the slot: a cancel through it marks the word
            try
            {
                t->connect_slot(); // may allocate: before anything else knows of the node
            }
            catch (...)
            {
                t->destroy_self();
                throw;
            }
        }
        t->service_ = &service;
        t->counted_ = true;
        service.started();
        // The caller's reference (a deadline's), taken before queueing: once queued, the node
        // may run and be gone at any moment.
        boost::intrusive_ptr<async_task> held;
        if (opts.held)
            held.reset(t, false);
        if (opts.rejected_input)
        {
            t->fail(opts.rejected_input);
            t->release_body();
            t->release();
        }
        else
            pool_access::queue(pool, *t, due); // hands over the runner's reference
        return held;
    }

    bool completes_handler() const noexcept override { return true; }

    const void* context() const noexcept override { return service_; }

    bool context_closing() const noexcept override { return service_->closing_down(); }

    // A wait, or a tick bound to an executor of the scheduler's own io_context: the io_context's
    // alarm wakes for it, and the thread it wakes completes it (posts the tick to itself). Any
    // other operation's work runs where a worker runs or posts it.
    typename basic_delayed_work_queue<Clock>::external_leader* leader() const noexcept override
    {
        if constexpr (led_by_alarm)
            return leader_;
        else
            return nullptr;
    }

    run_outcome run(std::stop_token runner_stop) noexcept override
    {
        if constexpr (Kind == async_kind::wait)
        {
            if (this->begin_completing())
                this->end_completing(future_state::normal);
            return {};
        }
        else if constexpr (Kind == async_kind::deadline_wait)
        {
            if (this->completion_begun() || this->begin_completing())
                this->end_completing(future_state::normal);
            return {};
        }
        else if constexpr (Kind == async_kind::schedule)
        {
            if (!this->begin_completing())
                return {}; // cancelled first
            try
            {
                if constexpr (std::is_void_v<work_result>)
                    invoke_body(stored_work(), stop_, runner_stop);
                else
                    result_.value.emplace(invoke_body(stored_work(), stop_, runner_stop));
                this->end_completing(future_state::normal);
                return {};
            }
            catch (...)
            {
                error_ = std::current_exception();
                this->end_completing(future_state::exceptional);
                return {error_};
            }
        }
        else if constexpr (tick_is_bound<Work>)
        {
            // The tick runs on its own executor; the node comes back when it has, or when that
            // executor's context destroys it unrun. It stays counted meanwhile, so that its I/O
            // context waits for it, as for a tick that a worker runs (see scheduler_service);
            // unless that context is its I/O context itself, which destroys the tick unrun only
            // after its service has stopped waiting: there it counts again as it runs.
            this->disown(); // the pool may be gone by then: see owner_link
            scheduler_service<Clock>* const counted = counted_ ? service_ : nullptr;
            boost::asio::execution_context& target =
                boost::asio::query(boost::asio::get_associated_executor(stored_work()),
                                   boost::asio::execution::context);
            // Let go of once posted, without touching the node: it may have ticked and ended by
            // then.
            const bool home = counted && &counted->context() == &target;
            if (home)
                counted_ = false;
            // Every copy of the executor goes inside: once posted, the tick may run, the
            // operation end and its context go, and the last copy of a strand unlocks a mutex
            // of that context's as it goes.
            const posting_tick posting(this);
            bound_tick tick(this); // the runner's reference, until the executor takes it
            std::exception_ptr failure;
            try
            {
                scheduler_service<Clock>::post_to(target, counted, [&] {
                    boost::asio::post(boost::asio::get_associated_executor(stored_work()),
                                      std::move(tick));
                });
            }
            catch (...) // out of memory
            {
                failure = std::current_exception();
            }
            if (!tick.taken())
                (void)tick.release(); // never handed over (post_to() found no service)
            else if (!posting.tick_destroyed())
            {
                if (home)
                    counted->finished();
                return {nullptr, true}; // posted, or kept by a strand that then failed
            }
            counted_ = counted != nullptr; // still counted: it goes no further
            if (failure)                   // it went nowhere: the operation ends
            {
                fail(failure);
                return {std::move(failure)};
            }
            // Destroyed unrun as it was posted: the executor's context is shutting down (or it
            // is a pool that was shut down), as a bound_tick destroyed later would find.
            end_unrun_tick();
            return {};
        }
        else
            return {tick(runner_stop)};
    }

    time_point next_due(time_point ended) noexcept override
    {
        if constexpr (Kind == async_kind::periodic)
            return schedule_->next_due(ended);
        else if constexpr (Kind == async_kind::deadline_wait)
            return this->expiry(); // a deadline pushed back: see deadline_wait
        else
            return time_point::max();
    }

    // A tick that runs on the worker is planned as it leaves the queue: one that its missed-tick
    // policy skips is not due after all, and no hook runs for it. A bound tick is planned where
    // it runs.
    bool due_after_all() noexcept override
    {
        if constexpr (Kind == async_kind::periodic && !tick_is_bound<Work>)
        {
            planned_ = schedule_->begin(this->due_time(), Clock::now());
            return planned_.has_value();
        }
        else
            return base::due_after_all();
    }

    void keep_place(kept_place place) noexcept override
    {
        if constexpr (Kind == async_kind::periodic)
            place_ = place;
    }

    kept_place place_kept() const noexcept override
    {
        if constexpr (Kind == async_kind::periodic)
            return place_;
        else
            return {};
    }

    void fail(std::exception_ptr e) noexcept override
    {
        if (this->begin_completing())
        {
            if constexpr (Kind == async_kind::deadline_wait)
                this->mark_fired(); // its deadline is no longer armed
            error_ = std::move(e);
            this->end_completing(future_state::exceptional);
        }
    }

private:
    template <class H>
    static allocator_type allocator_for(const H& handler) noexcept
    {
        if constexpr (Kind == async_kind::deadline_wait)
            return {};
        else
            return allocator_type(node_allocator(
                boost::asio::get_associated_allocator(handler, recycling_allocator<void>())));
    }

    // The node on its way to the handler's executor; destroyed unrun (its executor's context is
    // gone), it destroys the handler without invoking it, as Asio does. Where the executor
    // allocates for it, the memory is the recycler's: the handler's allocator has the node out
    // until the handler runs, and one that serves a block at a time (an arena of one slot, which
    // Asio's own operations never ask for a second) must not be asked for another meanwhile.
    class completion
    {
    public:
        using allocator_type = recycling_allocator<void>;

        explicit completion(async_task* t) noexcept : t_(t) {}
        completion(completion&& other) noexcept : t_(std::exchange(other.t_, nullptr)) {}
        completion& operator=(completion&&) = delete;
        ~completion()
        {
            if (t_)
                t_->abandon();
        }

        allocator_type get_allocator() const noexcept { return {}; }

        void operator()() { std::exchange(t_, nullptr)->complete(); }

    private:
        async_task* t_;
    };

    // A bound tick that its executor destroyed unrun: its context is shutting down. The work
    // goes while that context can still take it, and the operation ends; the pool destroys its
    // executor's functions unrun only once stopped, so a tick bound to it ends as the pool's
    // shutdown_now() ends the others.
    void end_unrun_tick() noexcept
    {
        bound_work_.reset();
        if (this->cancel(false) && work_on_pool_)
            this->mark_shut_down();
    }

    // Marks, on this thread, what is being posted to a bound tick's executor: the node whose tick
    // run() posts, or the tick that send_tick_home() sends. A bound_tick (or tick_disposal) of it
    // destroyed meanwhile is one that the executor did not keep (out of memory, or its context
    // is shutting down), and it leaves the node to the poster. One destroyed anywhere else was
    // posted, and never ran.
    class posting_tick
    {
    public:
        explicit posting_tick(const void* what) noexcept : outer_(now_) { now_ = {what, false}; }
        posting_tick(const posting_tick&) = delete;
        posting_tick& operator=(const posting_tick&) = delete;
        ~posting_tick() { now_ = outer_; }

        // In a bound_tick's (or tick_disposal's) destructor: whether it is the one being posted;
        // it is then gone.
        static bool destroyed(const void* what) noexcept
        {
            if (now_.what != what)
                return false;
            now_.destroyed = true;
            return true;
        }

        bool tick_destroyed() const noexcept { return now_.destroyed; }

    private:
        struct state
        {
            const void* what = nullptr;
            bool destroyed = false;
        };
        static inline thread_local state now_{};
        const state outer_; // a post under way on this thread around this one
    };

    // A bound tick on its way to its executor, with the runner's reference.
    class bound_tick
    {
    public:
        explicit bound_tick(async_task* t) noexcept : t_(t) {}
        bound_tick(bound_tick&& other) noexcept : t_(std::exchange(other.t_, nullptr)) {}
        bound_tick& operator=(bound_tick&&) = delete;
        ~bound_tick()
        {
            if (t_ && !posting_tick::destroyed(t_)) // never ran: its context is going
            {
                t_->end_unrun_tick();
                // The tick goes too, with the context's other handlers, on the thread that
                // destroys them (not inside the pool, which the tick may hold the last reference
                // to): it holds an executor of that context. One bound to the pool goes as the
                // operation ends, while the pool is there (see destroy_body()).
                if (!t_->work_on_pool_)
                    t_->work_.reset();
                // Through a copy of the link: the run's end may free the node, and the node's
                // may be the link's last owner.
                const std::shared_ptr<owner_link<Clock>> link = t_->link_;
                link->finish_run(*std::exchange(t_, nullptr), nullptr);
            }
        }

        void operator()()
        {
            async_task* t = std::exchange(t_, nullptr);
            if (!t->counted_) // back through its I/O context: counted again (see run())
            {
                t->service_->started();
                t->counted_ = true;
            }
            const std::shared_ptr<owner_link<Clock>> link = t->link_; // as in the destructor
            // No tick once the pool's shutdown has ended its periodic tasks, as for a tick that a
            // worker runs: finish() then ends the operation with the shutdown error. Nor
            // does tick() run one if the operation was cancelled on its way. One that starts
            // holds up the pool's destruction until it has finished, as a worker's would.
            typename owner_link<Clock>::started_run run(*link, *t);
            run.finish(*t, run ? t->tick(std::stop_token()) : nullptr);
        }

        // Whether it was moved on (or ran): it holds nothing then.
        bool taken() const noexcept { return !t_; }

        // Lets go of the node without ending its run.
        async_task* release() noexcept { return std::exchange(t_, nullptr); }

    private:
        async_task* t_;
    };

    // An ended operation's tick on its way home (see send_tick_home()): it is destroyed there, run
    // or not. One destroyed as it is posted, which its executor did not keep, goes back into the
    // node.
    class tick_disposal
    {
    public:
        explicit tick_disposal(async_task& t) noexcept : t_(&t), work_(std::move(*t.work_))
        {
            t.work_.reset();
        }
        tick_disposal(tick_disposal&&) noexcept = default;
        tick_disposal& operator=(tick_disposal&&) = delete;
        ~tick_disposal()
        {
            if (work_ && posting_tick::destroyed(&work_.get()))
                t_->work_.emplace(std::move(work_));
        }

        void operator()() { [[maybe_unused]] const boxed_tick gone(std::move(work_)); }

        Work& work() const noexcept { return work_.get(); }

    private:
        async_task* t_; // only while it is being posted
        boxed_tick work_;
    };

    // Installed in the handler's slot; may run on any thread. The slot may drop it before the
    // operation completes (its signal is reused): the operation then has no slot to clear.
    class cancellation_handler
    {
    public:
        explicit cancellation_handler(async_task* t) noexcept : t_(t) {}
        cancellation_handler(const cancellation_handler&) = delete;
        cancellation_handler& operator=(const cancellation_handler&) = delete;
        ~cancellation_handler() { t_->slot_ = {}; }

        void operator()(boost::asio::cancellation_type type) const noexcept { t_->on_cancel(type); }

    private:
        async_task* t_;
    };

    template <class H, class W>
    async_task(basic_scheduled_thread_pool<Clock>& pool,
               const scheduler_service<Clock>& service,
               const IoExecutor& io,
               H&& handler,
               W&& work,
               const allocator_type& alloc,
               const options& opts)
        : base(opts.kind,
               opts.held ? 2 : 1,
               pool_access::owner_number(pool)), // the runner's [, held]
          queued_completion(&run_queued), work_(store_work(std::forward<W>(work))),
          handler_(std::in_place, std::forward<H>(handler)),
          // The service holds the I/O context's work while it counts this operation: from its
          // start until its completion is posted.
          handler_work_(std::in_place, *handler_, io, service.holds_work()), alloc_(alloc),
          held_(opts.held)
    {
        if constexpr (is_wait)
            leader_ = opts.leader;
        if constexpr (Kind == async_kind::periodic)
            schedule_ = opts.schedule;
        if constexpr (has_bound_work)
        {
            const auto work_executor = boost::asio::get_associated_executor(stored_work());
            work_on_pool_ = executor_of(work_executor, pool);
            if constexpr (has_bound_tick)
            {
                bound_work_.emplace(boost::asio::prefer(
                    work_executor, boost::asio::execution::outstanding_work.tracked));
                link_ = pool_access::link(pool);
                if (executor_of(work_executor,
                                boost::asio::query(io, boost::asio::execution::context)))
                    leader_ = opts.leader;
            }
            else if (work_on_pool_)
            {
                bound_work_.emplace(boost::asio::prefer(
                    pool.get_executor(), boost::asio::execution::outstanding_work.tracked));
            }
        }
    }

    void connect_slot()
    {
        boost::asio::cancellation_slot slot =
            boost::asio::get_associated_cancellation_slot(*handler_);
        if (slot.is_connected())
        {
            slot.template emplace<cancellation_handler>(this);
            slot_ = slot;
        }
    }

    void on_cancel(boost::asio::cancellation_type type) noexcept
    {
        using boost::asio::cancellation_type;
        const bool terminal = (type & cancellation_type::terminal) != cancellation_type::none;
        const bool partial = (type & cancellation_type::partial) != cancellation_type::none;
        const bool total = (type & cancellation_type::total) != cancellation_type::none;
        if (!terminal && !partial && !total)
            return;
        // Once a periodic operation's first tick has begun, it has had effects: total
        // cancellation (none allowed) no longer applies.
        if constexpr (Kind == async_kind::periodic)
        {
            if (!terminal && !partial)
            {
                first_tick expected = first_tick::not_yet;
                if (!first_tick_.compare_exchange_strong(expected, first_tick::closed) &&
                    expected == first_tick::begun)
                    return;
            }
        }
        // A work that takes a std::stop_token and is running is asked to stop: a one-shot
        // operation's is running if it cannot be cancelled; a periodic one's tick may be running
        // either way (it stays pending while it ticks), and no tick starts after a cancel. The
        // slot holds no reference: a cancel that succeeds may free the node (its completion,
        // out of memory, could not be posted), so nothing touches it after one.
        if constexpr (Kind == async_kind::periodic)
        {
            if (terminal)
                stop_running();
            this->cancel(false);
        }
        else if constexpr (Kind == async_kind::deadline_wait)
        {
            // Once the expiry has fired, too late: as for the deadline's own cancel().
            (void)this->cancel_unless_fired();
        }
        else if (!this->cancel(false) && terminal)
            stop_running(); // it is running: its runner holds the node
    }

    void stop_running() noexcept
    {
        if constexpr (wants_stop_token<Work, tick_type>)
            stop_.request_stop();
    }

    void request_stop() noexcept override { stop_running(); }

    // One periodic run, unless its missed-tick policy skips it; returns what the tick threw
    // (the operation ends with it if its failure policy says so).
    std::exception_ptr tick(const std::stop_token& runner_stop) noexcept
    {
        if (this->is_done())
            return nullptr; // cancelled after its runner took it: no tick starts after a cancel
        std::optional<tick_type> tick = std::exchange(planned_, std::nullopt);
        if (!tick)
            tick = schedule_->begin(this->due_time(), Clock::now());
        if (!tick)
            return nullptr; // skipped: next_due() says when it is due instead
        if (!begin_ticking())
            return nullptr; // a total cancellation came first: the operation is ending
        try
        {
            invoke_periodic(stored_work(), stop_, runner_stop, *tick);
            ticks_.fetch_add(1, std::memory_order_relaxed);
            schedule_->succeeded();
            return nullptr;
        }
        catch (...)
        {
            ticks_.fetch_add(1, std::memory_order_relaxed); // it ran, and failed
            std::exception_ptr e = std::current_exception();
            if (schedule_->ends_with_failure())
                fail(e);
            return e;
        }
    }

    // Whether a tick may begin: the first one closes total cancellation out, unless a total
    // cancellation has closed ticking out first (it cancels the operation next).
    bool begin_ticking() noexcept
    {
        if (first_tick_.load(std::memory_order_relaxed) == first_tick::begun)
            return true;
        // Only a runner begins ticks, one at a time.
        first_tick expected = first_tick::not_yet;
        return first_tick_.compare_exchange_strong(expected, first_tick::begun);
    }

    // Runner only, once: the outcome is settled (or the node never got queued).
    void destroy_body() noexcept override
    {
        if (this->state() == future_state::pending)
            return; // queueing failed: the initiating function throws instead
        // A work bound to the pool goes now, while the pool is there (the node may be freed
        // after it has gone). Then the outstanding work held for it: on the pool, which it kept
        // from going idle meanwhile, or on a tick's executor, which no tick needs any more (the
        // node waits for the handler's executor; the tick's context, the scheduler's own I/O
        // context say, may run out of work, and be destroyed, meanwhile).
        if constexpr (has_bound_work)
        {
            if (work_on_pool_)
                work_.reset();
            else if constexpr (has_bound_tick)
                send_tick_home();
            bound_work_.reset();
        }
        if (held_)
        {
            this->add_ref(); // the completion's own
            send_completion();
        }
        else
            completion_due_ = true; // posted when the runner lets go: see destroy()
    }

    // A bound tick whose operation has ended goes back to its executor, and is destroyed there,
    // if the node completes in another context: the node waits there for the handler, while the
    // tick's own context (the scheduler's io_context, a connection's strand of it) may be
    // destroyed, which a strand the tick holds must not outlive. Posted, not destroyed here: this
    // thread may be inside the pool, which the tick may hold the last reference to. If it cannot
    // be posted (no memory; its context is shutting down), it goes with the node.
    void send_tick_home() noexcept
    {
        if (!work_)
            return; // it went with its context's other handlers (see bound_tick)
        boost::asio::execution_context& home = boost::asio::query(
            boost::asio::get_associated_executor(stored_work()), boost::asio::execution::context);
        if (&home == &handler_work_->handler_context())
            return; // it goes with the node, in its own context
        const posting_tick posting(&stored_work());
        try
        {
            // Every copy of the executor goes inside, as in run().
            scheduler_service<Clock>::post_to(home, nullptr, [&] {
                tick_disposal disposal(*this);
                boost::asio::post(boost::asio::get_associated_executor(disposal.work()),
                                  std::move(disposal));
            });
        }
        catch (...) // out of memory: a disposal destroyed as it was posted went back into the node
        {}          // (a strand may keep it queued instead, and destroy it with its others)
    }

    // Posts the completion, now or, if this thread is inside an owner_link's finish_run() or
    // with_owner(), once it leaves the outermost.
    void send_completion() noexcept
    {
        if (!deferred_completions::defer(*this))
            post_completion();
    }

    void post_completion() noexcept
    {
        // Once posted, the node may be freed on another thread at any moment.
        scheduler_service<Clock>* counted = std::exchange(counted_, false) ? service_ : nullptr;
        // On a thread of the scheduler's io_context, it joins a batch there, with its count.
        if (counted && handler_work_->on_counted_io() && counted->complete_here(*this))
            return;
        try
        {
            // Its I/O context being destroyed (a tick away there, counted no more, may be
            // destroyed unrun by it), the completion goes there whatever the handler's executor:
            // the context destroys it unrun with its other handlers, as Asio's timers' are.
            if (handler_work_->on_io() || service_->closing_down())
                handler_work_->post_to_io(completion(this));
            else
            {
                // Kept until the completion is posted, then let go of (see take_io_work()).
                [[maybe_unused]] const auto io_work = handler_work_->take_io_work();
                completion c(this); // first: a failed post_to() destroys it, not the node
                scheduler_service<Clock>::post_to(handler_work_->handler_context(), counted,
                                                  [&] { handler_work_->post(std::move(c)); });
            }
        }
        catch (const std::bad_alloc&) // out of memory: the completion destroyed the handler unrun
        {}
        catch (...) // refused otherwise (an empty executor's bad_executor, say): the same, said
        {
            report_failure("a completion's executor refused it; its handler was destroyed unrun",
                           std::current_exception());
        }
        if (counted)
            counted->finished(); // the context has it now
    }

    void uncount() noexcept
    {
        if (std::exchange(counted_, false))
            service_->finished();
    }

    void destroy() noexcept override
    {
        if (std::exchange(completion_due_, false))
            send_completion();
        else
            destroy_self();
    }

    // On the handler's executor.
    void complete()
    {
        clear_slot();
        // The work's result or the handler cannot be moved: the handler goes unrun.
        auto args = or_abandon([this] { return outcome(); });
        Handler handler = or_abandon([this] { return Handler(std::move(*handler_)); });
        // What was moved from goes now, not when a deadline that keeps the node next arms: a
        // handler whose move is a copy (a const capture) may own the deadline's owner.
        handler_.reset();
        // Released before the handler runs, while this completion keeps its context running: a
        // handler may let its owner destroy the I/O context at once (use_future's runs on this
        // thread, whatever it is). Destroyed, not moved from: a deadline that keeps the node
        // would keep a moved-from executor too, and one whose move is a copy still counts work.
        handler_work_.reset();
        let_go();
        std::apply(std::move(handler), std::move(args));
    }

    // Returns f(); if it throws, abandons the operation (its handler and work go) and rethrows.
    template <class F>
    auto or_abandon(F f)
    {
        try
        {
            return f();
        }
        catch (...)
        {
            abandon();
            throw;
        }
    }

    // The completion's action in its service's completion_queue, or as a deferred_completions
    // scope ends.
    static void run_queued(queued_completion& c, completion_step step)
    {
        async_task& t = static_cast<async_task&>(c);
        switch (step)
        {
        case completion_step::invoke:
            t.complete();
            break;
        case completion_step::abandon:
            t.abandon();
            break;
        case completion_step::post:
            t.post_completion();
            break;
        }
    }

    // The completion is destroyed unrun: its executor's context is going. The handler and the
    // work it counts go now, even if a deadline keeps the node: they belong to that context.
    void abandon() noexcept
    {
        clear_slot();
        if (held_)
        {
            handler_.reset();
            handler_work_.reset();
        }
        let_go();
    }

    void let_go() noexcept
    {
        if (held_)
            this->release();
        else
            destroy_self();
    }

    void clear_slot() noexcept
    {
        boost::asio::cancellation_slot slot = slot_; // its handler's destructor resets slot_
        if (slot.is_connected())
            slot.clear();
    }

    // As Asio's operations do, the memory goes back before the handler goes: a handler may own
    // what its allocator serves (Asio's allocation example: a session holds the arena, and its
    // handlers hold the session).
    void destroy_self() noexcept
    {
        clear_slot(); // an initiation that failed after connecting the slot
        uncount();
        allocator_type alloc(alloc_); // the handler may have gone
        std::optional<Handler> handler;
        if (handler_)
        {
            try
            {
                handler.emplace(std::move(*handler_));
            }
            catch (...) // it goes with the node, then
            {}
        }
        this->~async_task();
        std::allocator_traits<allocator_type>::deallocate(alloc, this, 1);
    }

    // The handler's arguments.
    auto outcome()
    {
        const future_state s = this->state();
        if constexpr (is_wait)
        {
            if (s == future_state::normal)
                return std::tuple<boost::system::error_code>();
            if (s == future_state::exceptional) // rejected input
                return std::tuple<boost::system::error_code>(code_of(error_));
            return std::tuple<boost::system::error_code>(abort_code(this->shut_down()));
        }
        else
        {
            std::exception_ptr e;
            if (s == future_state::exceptional)
                e = std::move(error_);
            else if (s != future_state::normal)
                e = abort_error(this->shut_down());
            if constexpr (Kind == async_kind::periodic)
                return std::tuple<std::exception_ptr, std::size_t>(std::move(e), ticks_.load());
            else if constexpr (std::is_void_v<work_result>)
                return std::tuple<std::exception_ptr>(std::move(e));
            else if (result_.value)
                return std::tuple<std::exception_ptr, work_result>(std::move(e),
                                                                   std::move(*result_.value));
            else
                return std::tuple<std::exception_ptr, work_result>(std::move(e), work_result());
        }
    }

    // The work; one bound to the pool is there until destroy_body(), and a bound tick until then
    // or until it is sent home (see send_tick_home()).
    Work& stored_work() noexcept
    {
        if constexpr (has_bound_tick)
            return work_->get();
        else if constexpr (has_bound_work)
            return *work_;
        else
            return work_;
    }

    template <class W>
    static work_storage store_work(W&& work)
    {
        if constexpr (has_bound_tick)
            return work_storage(std::in_place, recycling_allocator<void>(), std::forward<W>(work));
        else
            return work_storage(std::forward<W>(work));
    }

    // Goes with the node, outside the pool (it may hold the pool's last reference); one bound to
    // the pool goes as the outcome settles (see destroy_body()), and a bound tick may be sent
    // home then. A wait has none.
    [[no_unique_address]] work_storage work_;
    std::optional<Handler> handler_; // gone early if a deadline keeps the node: see abandon()
    // Until the completion leaves for the handler, or is abandoned.
    std::optional<handler_work<Handler, IoExecutor>> handler_work_;
    boost::asio::cancellation_slot slot_;
    [[no_unique_address]] stop_source_for<Work, tick_type> stop_;
    [[no_unique_address]] result_holder<Kind, work_result> result_;
    std::exception_ptr error_;
    // Engaged unless the operation was rejected at initiation.
    [[no_unique_address]] if_periodic<std::optional<periodic_schedule<Clock>>> schedule_{};
    // The tick that due_after_all() planned, until it runs.
    [[no_unique_address]] if_periodic<std::optional<tick_type>> planned_{};
    [[no_unique_address]] if_periodic<std::atomic<std::size_t>> ticks_{};
    [[no_unique_address]] std::
        conditional_t<Kind == async_kind::periodic, kept_place, no_kept_place>
            place_{};
    // Whichever comes first of the first tick and a total cancellation closes the other out.
    enum class first_tick : std::uint8_t
    {
        not_yet,
        begun,  // total cancellation no longer applies
        closed, // a total cancellation came first: no tick begins
    };
    [[no_unique_address]] if_periodic<std::atomic<first_tick>> first_tick_{};
    [[no_unique_address]] if_bound_tick<std::shared_ptr<owner_link<Clock>>> link_{};
    // Outstanding work on a bound tick's executor, until the operation ends; or on the pool, until
    // a work bound to it goes (a canceller may still be destroying it once the task has left the
    // queue).
    [[no_unique_address]]
    typename bound_work<Clock, Work, has_bound_tick, has_bound_work>::type bound_work_{};
    scheduler_service<Clock>* service_ = nullptr;
    // What wakes it at the head of the pool's queue instead of a worker, if anything: see leader().
    [[no_unique_address]] std::conditional_t<led_by_alarm, io_alarm<Clock>*, no_work> leader_{};
    [[no_unique_address]] allocator_type alloc_;
    const bool held_;
    bool completion_due_ = false; // runner, then the last reference
    bool counted_ = false;        // in service_'s count of operations that may post
    bool work_on_pool_ = false;   // the work is bound to the pool (its executor, a strand of it)
};

} // namespace sched::detail

SCHED_VISIBILITY_END

#endif // SCHED_DETAIL_ASYNC_TASK_HPP
