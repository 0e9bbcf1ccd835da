#ifndef SCHED_DETAIL_SCHEDULER_SERVICE_HPP
#define SCHED_DETAIL_SCHEDULER_SERVICE_HPP

#include <sched/scheduled_thread_pool.hpp>

#include <sched/detail/completion_queue.hpp>
#include <sched/detail/handler_work.hpp>
#include <sched/detail/io_alarm.hpp>
#include <sched/detail/pool_access.hpp>
#include <sched/detail/task.hpp>
#include <sched/detail/visibility.hpp>

#include <boost/asio/basic_waitable_timer.hpp>
#include <boost/asio/detail/strand_executor_service.hpp>
#include <boost/asio/detail/strand_service.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/io_context.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

SCHED_VISIBILITY_BEGIN

namespace sched::detail {

// Lives in the execution context of a scheduler's I/O executor and keeps that context's pending
// operations from outliving it: when the context shuts down, it ends the operations still
// queued in the pools (their handlers are then destroyed with the context's other handlers,
// unrun, as Asio does) and waits for those a worker is running, or whose tick is away on its own
// executor in another context, to post their completions (they are not queued again: see
// closing_down()). A tick away in this context itself is not waited for: the context destroys
// it unrun after this service has shut down, and its operation then ends. In
// any other context that operations post to (a handler's or a tick's executor), it waits for the
// posts under way.
//
// In an io_context, it also holds the context's outstanding work while it counts any operation,
// so that run() does not return meanwhile: the operations need not count it each (two atomic
// operations on a counter that every thread running the context shares).
template <class Clock>
class scheduler_service final
    : public boost::asio::detail::execution_context_service_base<scheduler_service<Clock>>
{
public:
    explicit scheduler_service(boost::asio::execution_context& context)
        : boost::asio::detail::execution_context_service_base<scheduler_service>(context),
          // Registered before this service, so shut down after it: see services_first().
          timers_first_(has_timer_services(context))
    {}

    // The service of `context`, made if there is none yet, after the services that the workers
    // use from their own threads (see services_first()); `io` is that context if it is known to
    // be an io_context (an executor of it, or a strand of one, submits to it), else null.
    static scheduler_service& of(boost::asio::execution_context& context,
                                 boost::asio::io_context* io)
    {
        if (!boost::asio::has_service<scheduler_service>(context))
            services_first(context, io);
        return boost::asio::use_service<scheduler_service>(context);
    }

    // The io_context whose outstanding work this service holds while started() operations are
    // not finished(), or null: known once a scheduler with an io_context's executor attaches.
    const boost::asio::io_context* holds_work() const noexcept
    {
        return io_.load(); // sequentially consistent: see started()
    }

    // A scheduler on this context queues on `pool`; `io` is this context if it is an io_context
    // that the scheduler's executor submits to, else null. Returns the alarm that waits for the
    // scheduler's waits and bound ticks in `pool` on the io_context (see io_alarm), or null: with
    // no io_context, on a clock that Asio's timers cannot wait for (the manual clock), or when
    // the timers' services are newer than this one (see services_first()), the workers wait. The
    // entry it keeps for `pool` goes once the pool is gone (see prune()).
    io_alarm<Clock>* attach(basic_scheduled_thread_pool<Clock>& pool, boost::asio::io_context* io)
    {
        const std::shared_ptr<owner_link<Clock>>& link = pool_access::link(pool);
        std::lock_guard lock(mutex_);
        if (io && !io_.load(std::memory_order_relaxed))
        {
            io_.store(io); // sequentially consistent: see started()
            update_work(); // operations may be live already (posts from other contexts')
        }
        auto found = std::find_if(pools_.begin(), pools_.end(),
                                  [&](const attached& a) { return a.link == link; });
        if (found == pools_.end())
        {
            if (pools_.size() >= prune_at_)
                prune();
            closing_pools_.reserve(pools_.size() + 1); // for shutdown(), which cannot allocate
            pools_.push_back({link, &pool, nullptr});
            found = pools_.end() - 1;
        }
        if constexpr (has_io_alarm<Clock>)
        {
            if (io && !found->alarm && timers_first_)
            {
                try
                {
                    found->alarm = std::make_shared<io_alarm<Clock>>(*io, pool, completions_);
                }
                catch (...) // out of memory: the workers wait
                {}
            }
        }
        return found->alarm.get();
    }

    // How many pools it keeps an entry for (for tests): the pools attached, less those dropped.
    std::size_t attached_pools() const
    {
        std::lock_guard lock(mutex_);
        return pools_.size();
    }

    // Whether the context is shutting down: an operation it counts ends rather than queue again.
    bool closing_down() const noexcept
    {
        return (live_.load(std::memory_order_acquire) & closing) != 0;
    }

    // An operation may post to this context until finished().
    void started() noexcept { note_started(live_.fetch_add(1)); }

    // `n` operations (n > 0) may no longer post to this context.
    void finished(std::size_t n = 1) noexcept
    {
        std::size_t live = live_.load(std::memory_order_relaxed);
        // The last ones, and any once closing, go under the mutex: they may let go of the work.
        while ((live & closing) == 0 && live > n)
        {
            if (live_.compare_exchange_weak(live, live - n, std::memory_order_release,
                                            std::memory_order_relaxed))
                return;
        }
        // shutdown() waits on the mutex, so it cannot return (and free this service) before
        // this unlocks.
        std::lock_guard lock(mutex_);
        const std::size_t was = live_.fetch_sub(n);
        if ((was & ~flags) == n)
        {
            update_work();
            if (was & closing)
                drained_.notify_all();
        }
    }

    // On a thread running this service's io_context (known: holds_work()), queues `c` to be
    // invoked there in a batch with others (see completion_queue) and returns true: `c` takes
    // over its operation's count (started(), not finished()). Elsewhere (a worker) it returns
    // false: the caller posts the completion alone, and the io_context shares such completions
    // out among its threads.
    bool complete_here(queued_completion& c) noexcept
    {
        boost::asio::io_context& io = *io_.load(std::memory_order_relaxed);
        if (!io.get_executor().running_in_this_thread())
            return false;
        completions_.push(c, io);
        return true;
    }

    // Runs `post`, which submits a function to `target`, so that `target` cannot finish shutting
    // down (and be freed) while the submission is still under way: Asio's io_context signals its
    // waiting thread after it has queued the function, which may by then have run. A caller that
    // holds a count on `known` (its scheduler's context) needs no other when `target` is that.
    template <class Post>
    static void
    post_to(boost::asio::execution_context& target, scheduler_service* known, Post&& post)
    {
        if (known && &known->context() == &target)
        {
            std::forward<Post>(post)();
            return;
        }
        of(target, nullptr).post_here(std::forward<Post>(post));
    }

    // Runs `post`, which submits a function to this service's context, so that the context
    // cannot finish shutting down meanwhile (see post_to()). Once this service has shut down, it
    // does not run `post`: the context is destroying its handlers unrun, on a thread that a post
    // would race (a timeout falling due then: a review's finding).
    template <class Post>
    void post_here(Post&& post)
    {
        const std::size_t was = live_.fetch_add(1);
        if (was & closed)
        {
            live_.fetch_sub(1, std::memory_order_relaxed);
            return;
        }
        note_started(was);
        struct finish
        {
            scheduler_service& service;
            ~finish() { service.finished(); }
        } guard{*this};
        std::forward<Post>(post)();
    }

private:
    // The count was `was` as it went up by one.
    void note_started(std::size_t was) noexcept
    {
        // The count's step from zero and attach()'s store of io_ are each followed by a load of
        // the other (all sequentially consistent): at least one side sees the other, and takes
        // the work. (Weaker orders let both miss: the service then held no work for a live
        // operation, and run() could return before its handler ran.)
        if ((was & ~flags) == 0 && holds_work())
        {
            std::lock_guard lock(mutex_);
            update_work();
        }
    }

    // Asio shuts a context's services down newest first, with no thread of its own running, and
    // a service shutting down must not be used meanwhile. Until this service has shut down, the
    // workers still use some of the others from their own threads: the strands that handlers and
    // ticks are bound to, and on an io_context, the timers of its alarms. Those services are made
    // before this one is registered, so that they shut down after it. A service first made by a
    // post from another context's operation does not know its context to be an io_context: it
    // makes no timers first, and then leaves the waiting to the workers (see attach()).
    static void services_first(boost::asio::execution_context& context, boost::asio::io_context* io)
    {
        (void)boost::asio::use_service<boost::asio::detail::strand_executor_service>(context);
        if (!io)
            return;
        (void)boost::asio::use_service<boost::asio::detail::strand_service>(*io);
        if constexpr (has_io_alarm<Clock>)
        {
            try
            {
                boost::asio::basic_waitable_timer<Clock> makes_the_timer_services(*io);
            }
            catch (const boost::system::system_error&) // no reactor (out of file descriptors):
            {}                                         // the workers wait instead
        }
    }

    static bool has_timer_services(boost::asio::execution_context& context) noexcept
    {
        if constexpr (has_io_alarm<Clock>)
        {
            using timer_service = boost::asio::detail::deadline_timer_service<
                boost::asio::detail::chrono_time_traits<Clock, boost::asio::wait_traits<Clock>>>;
            return boost::asio::has_service<timer_service>(context);
        }
        else
            return false;
    }

    struct attached
    {
        std::shared_ptr<owner_link<Clock>> link; // says whether the pool is still there
        basic_scheduled_thread_pool<Clock>* pool;
        std::shared_ptr<io_alarm<Clock>> alarm; // shared with shutdown()'s copy of the list
    };

    // Under mutex_: drops the entries of the pools that are gone whose alarms are idle (none of
    // their handlers can run any more: see io_alarm::idle()), destroying those alarms, and looks
    // again once the list has doubled, so that attach() does so in amortised constant time.
    void prune()
    {
        std::erase_if(pools_, [](const attached& a) {
            if constexpr (has_io_alarm<Clock>)
                return !a.link->alive() && (!a.alarm || a.alarm->idle());
            else
                return !a.link->alive();
        });
        prune_at_ = std::max(min_prune_at, 2 * pools_.size());
    }

    // Under mutex_, after the count has left or reached zero: holds the io_context's work while
    // the count is above zero. Whoever moves the count last also comes here last, and sees it.
    void update_work() noexcept
    {
        boost::asio::io_context* io = io_.load(std::memory_order_relaxed);
        if (!io)
            return;
        const bool live = (live_.load() & ~flags) != 0; // see note_started()
        if (live && !work_)
            work_.emplace(boost::asio::prefer(io->get_executor(),
                                              boost::asio::execution::outstanding_work.tracked));
        else if (!live)
            work_.reset();
    }

    void shutdown() override
    {
        live_.fetch_or(closing);
        std::vector<attached> pools;
        {
            std::lock_guard lock(mutex_);
            closing_pools_.assign(pools_.begin(), pools_.end()); // no allocation: see attach()
            pools.swap(closing_pools_); // an attach() from now on reserves in a vector of its own
        }
        for (attached& a : pools)
        {
            // Out of memory, what could not be taken stays queued, and the wait below would
            // last until it fell due: it is taken again, once others have freed some.
            for (bool again = true; again;)
            {
                again = false;
                a.link->with_owner([&] { again = !pool_access::abandon_context(*a.pool, this); });
                if (again)
                    std::this_thread::sleep_for(std::chrono::milliseconds(1));
            }
            if (a.alarm)
                a.alarm->retire();
        }
        completions_.abandon_all(); // nothing runs the context any more
        std::unique_lock lock(mutex_);
        // Closed only with no post under way, in one step: a later post_here() sees it.
        drained_.wait(lock, [this] {
            std::size_t drained = closing;
            return live_.compare_exchange_strong(drained, closing | closed);
        });
        work_.reset();
        // The alarms' timers go while the context's services are still there.
        for (attached& a : pools_)
            a.alarm.reset();
        pools.clear();
    }

    completion_queue<scheduler_service> completions_{*this};
    mutable std::mutex mutex_;
    std::condition_variable drained_;
    std::vector<attached> pools_; // guarded by mutex_
    // The size at which attach() next looks for entries to drop; guarded by mutex_.
    static constexpr std::size_t min_prune_at = 8;
    std::size_t prune_at_ = min_prune_at;
    // Room for shutdown()'s copy of pools_, which it walks without the mutex: attach() makes it,
    // as shutdown() runs in the context's destructor and must not fail. Guarded by mutex_.
    std::vector<attached> closing_pools_;
    // The number of operations that may post to this context, the closing bit (set as shutdown()
    // begins) and the closed bit (set as it ends).
    static constexpr std::size_t closing = std::size_t(1) << (sizeof(std::size_t) * 8 - 1);
    static constexpr std::size_t closed = closing >> 1;
    static constexpr std::size_t flags = closing | closed;
    std::atomic<std::size_t> live_{0};
    // Whether the services of the alarms' timers are older than this one (see services_first()).
    const bool timers_first_;
    std::atomic<boost::asio::io_context*> io_{nullptr}; // set once, under mutex_
    std::optional<tracked_executor_t<boost::asio::io_context::executor_type>> work_; // mutex_
};

} // namespace sched::detail

SCHED_VISIBILITY_END

#endif // SCHED_DETAIL_SCHEDULER_SERVICE_HPP
