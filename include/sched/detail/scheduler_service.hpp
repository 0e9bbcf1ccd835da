#ifndef SCHED_DETAIL_SCHEDULER_SERVICE_HPP
#define SCHED_DETAIL_SCHEDULER_SERVICE_HPP

#include <sched/scheduled_thread_pool.hpp>

#include <sched/detail/pool_access.hpp>
#include <sched/detail/task.hpp>

#include <boost/asio/execution_context.hpp>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace sched::detail {

// Lives in the execution context of a scheduler's I/O executor and keeps that context's pending
// operations from outliving it: when the context shuts down, it ends the operations still
// queued in the pools (their handlers are then destroyed with the context's other handlers,
// unrun, as Asio does) and waits for those a worker is running to post their completions. In
// any other context that operations post to (a handler's or a tick's executor), it waits for the
// posts under way.
template <class Clock>
class scheduler_service final
    : public boost::asio::detail::execution_context_service_base<scheduler_service<Clock>>
{
public:
    explicit scheduler_service(boost::asio::execution_context& context)
        : boost::asio::detail::execution_context_service_base<scheduler_service>(context)
    {}

    // A scheduler on this context queues on `pool`.
    void attach(basic_scheduled_thread_pool<Clock>& pool)
    {
        const std::shared_ptr<owner_link<Clock>>& link = pool_access::link(pool);
        std::lock_guard lock(mutex_);
        auto found = std::find_if(pools_.begin(), pools_.end(),
                                  [&](const attached& a) { return a.link == link; });
        if (found == pools_.end())
            pools_.push_back({link, &pool});
    }

    // An operation may post to this context until finished().
    void started() noexcept { live_.fetch_add(1, std::memory_order_relaxed); }

    void finished() noexcept
    {
        std::size_t live = live_.load(std::memory_order_relaxed);
        while ((live & closing) == 0)
        {
            if (live_.compare_exchange_weak(live, live - 1, std::memory_order_release,
                                            std::memory_order_relaxed))
                return;
        }
        // Closing: shutdown() waits on the mutex, so it cannot return (and free this service)
        // before this unlocks.
        std::lock_guard lock(mutex_);
        if (live_.fetch_sub(1) == (closing | 1))
            drained_.notify_all();
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
        scheduler_service& service = boost::asio::use_service<scheduler_service>(target);
        service.started();
        struct finish
        {
            scheduler_service& service;
            ~finish() { service.finished(); }
        } guard{service};
        std::forward<Post>(post)();
    }

private:
    struct attached
    {
        std::shared_ptr<owner_link<Clock>> link; // says whether the pool is still there
        basic_scheduled_thread_pool<Clock>* pool;
    };

    void shutdown() override
    {
        live_.fetch_or(closing);
        std::vector<attached> pools;
        {
            std::lock_guard lock(mutex_);
            pools = pools_;
        }
        for (attached& a : pools)
            a.link->with_owner([&] { pool_access::abandon_context(*a.pool, this); });
        std::unique_lock lock(mutex_);
        drained_.wait(lock, [this] { return live_.load() == closing; });
    }

    std::mutex mutex_;
    std::condition_variable drained_;
    std::vector<attached> pools_; // guarded by mutex_
    // The number of operations that may post to this context, and the closing bit.
    static constexpr std::size_t closing = std::size_t(1) << (sizeof(std::size_t) * 8 - 1);
    std::atomic<std::size_t> live_{0};
};

} // namespace sched::detail

#endif // SCHED_DETAIL_SCHEDULER_SERVICE_HPP
