#ifndef SCHED_DETAIL_COMPLETION_QUEUE_HPP
#define SCHED_DETAIL_COMPLETION_QUEUE_HPP

#include <sched/detail/atomic_mutex.hpp>
#include <sched/detail/queued_completion.hpp>
#include <sched/detail/visibility.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include <atomic>
#include <cstddef>
#include <mutex>
#include <utility>

SCHED_VISIBILITY_BEGIN

namespace sched::detail {

// Completions whose handlers run on one io_context through its own executor, run in batches:
// the first one queued posts a runner to the io_context, and the runner invokes every
// completion queued by the time it runs, oldest first (as an Asio strand runs its ready
// handlers). A batch then costs one post and one turn of the io_context's loop, not one each.
//
// A runner invokes at most `share` handlers; what is left then, or when a handler throws (the
// exception goes on out of run()), is carried over to the next runner, ahead of anything queued
// since, and a runner is posted for it. So other handlers and other threads get their turn
// (after about 100 µs of short handlers), and the order holds. Each runner costs a trip through
// the io_context's queue, which polls its reactor (a system call): the share spreads that over
// enough handlers to cost each of them little (a share of 64 cost W1 about 15 ns a handler). Like a
// strand's runner, it does not look for io_context::stop() between handlers (asking costs a lock of
// the io_context's mutex per handler).
//
// Each completion comes in holding a count on `Counter` (which keeps the io_context's work while
// any is held); whoever takes completions out of the queue lets go of theirs in one step,
// `Counter::finished(n)`: a runner as it starts (the io_context counts the runner itself), or
// whoever destroys them unrun. Carried-over completions hold no count.
template <class Counter>
class completion_queue
{
    // The queue collecting this thread's completions in run_here(), and what it collected.
    struct collecting
    {
        completion_queue* queue;
        queued_completion* newest;
    };

    // Completions linked oldest first, and the last of them, so that another list joins them in
    // one step however long they are (a burst of due waits leaves thousands carried over).
    struct chain
    {
        queued_completion* first = nullptr;
        queued_completion* last = nullptr;
    };

public:
    // Handlers one runner invokes before it lets the io_context run something else.
    static constexpr std::size_t share = 1024;

    explicit completion_queue(Counter& counter) noexcept : counter_(counter) {}
    completion_queue(const completion_queue&) = delete;
    completion_queue& operator=(const completion_queue&) = delete;

    // Queues `c` and, if the queue was empty, posts a runner to `io`. A runner the io_context
    // destroys unrun (or that cannot be posted) destroys every completion left unrun.
    void push(queued_completion& c, boost::asio::io_context& io) noexcept
    {
        if (here_.queue == this) // inside run_here(): run right after, on this thread
        {
            c.next_ = here_.newest;
            here_.newest = &c;
            return;
        }
        queued_completion* head = head_.load(std::memory_order_relaxed);
        do
            c.next_ = head;
        while (!head_.compare_exchange_weak(head, &c, std::memory_order_release,
                                            std::memory_order_relaxed));
        if (head == nullptr)
            post_runner(io);
    }

    // Calls `f()` on a thread running `io`, inside one of its handlers, then `before_them(bool)`
    // (noexcept; told whether completions follow, even if `f` threw), and then invokes there the
    // completions that `f` pushed, oldest first, as a runner would: they need no runner of their
    // own (an io_alarm's wake-up: the handlers of the waits it took run where it woke).
    // Nests: `f` may run `io` (a pool's hook that polls it), and so another run_here().
    template <class F, class BeforeThem>
    void run_here(boost::asio::io_context& io, F f, BeforeThem before_them)
    {
        const collecting outer = std::exchange(here_, {this, nullptr});
        try
        {
            f();
        }
        catch (...)
        {
            const chain batch = take_here(outer);
            before_them(batch.first != nullptr);
            run_batch(io, batch);
            throw;
        }
        const chain batch = take_here(outer);
        before_them(batch.first != nullptr);
        run_batch(io, batch);
    }

    // Destroys every completion left unrun: their io_context is shutting down, and nothing runs
    // it any more (or a runner could not be posted).
    void abandon_all() noexcept
    {
        destroy_unrun(take_carried());
        destroy_unrun(take_queued());
    }

private:
    // Posted to the io_context: runs what was carried over, then what is queued.
    class runner
    {
    public:
        runner(completion_queue& queue, boost::asio::io_context& io) noexcept
            : queue_(&queue), io_(&io)
        {}
        runner(runner&& other) noexcept
            : queue_(std::exchange(other.queue_, nullptr)), io_(other.io_)
        {}
        runner& operator=(runner&&) = delete;
        ~runner()
        {
            if (queue_) // never ran
                queue_->abandon_all();
        }

        void operator()()
        {
            completion_queue& queue = *std::exchange(queue_, nullptr);
            queue.run_batch(*io_, append(queue.take_carried(), queue.take_queued()));
        }

    private:
        completion_queue* queue_;
        boost::asio::io_context* io_;
    };

    // Invokes at most `share` completions of `batch` (counts let go of), and carries the rest
    // over; so too if one throws.
    void run_batch(boost::asio::io_context& io, chain batch)
    {
        struct carry_rest
        {
            completion_queue& queue;
            boost::asio::io_context& io;
            chain& rest;
            ~carry_rest()
            {
                if (rest.first)
                    queue.carry_over(io, rest);
            }
        } guard{*this, io, batch};
        for (std::size_t invoked = 0; batch.first; ++invoked)
        {
            if (invoked == share)
                return;
            queued_completion& c = *batch.first;
            batch.first = c.next_;
            c.action_(c, completion_step::invoke);
        }
    }

    // What run_here() collected, oldest first, letting go of the counts they hold; the collecting
    // of a run_here() it is nested in goes on.
    chain take_here(collecting outer) noexcept
    {
        queued_completion* newest_first = std::exchange(here_, outer).newest;
        return oldest_first(newest_first);
    }

    void post_runner(boost::asio::io_context& io) noexcept
    {
        try
        {
            boost::asio::post(io.get_executor(), runner(*this, io));
        }
        catch (...) // out of memory: the runner destroyed what was left unrun
        {}
    }

    // Every queued completion, oldest first, letting go of the counts they hold.
    chain take_queued() noexcept
    {
        return oldest_first(head_.exchange(nullptr, std::memory_order_acquire));
    }

    // Reverses a list taken from the stack, letting go of the counts it holds.
    chain oldest_first(queued_completion* newest_first) noexcept
    {
        queued_completion* const last = newest_first;
        queued_completion* reversed = nullptr;
        std::size_t n = 0;
        while (newest_first)
        {
            queued_completion* next = newest_first->next_;
            newest_first->next_ = reversed;
            reversed = newest_first;
            newest_first = next;
            ++n;
        }
        if (n != 0)
            counter_.finished(n);
        return {reversed, last};
    }

    // Keeps `rest` (counts let go of) for the next runner to run first, and posts one.
    void carry_over(boost::asio::io_context& io, chain rest) noexcept
    {
        {
            std::lock_guard lock(carried_mutex_);
            carried_ = append(carried_, rest);
            has_carried_.store(true, std::memory_order_relaxed);
        }
        post_runner(io);
    }

    chain take_carried() noexcept
    {
        if (!has_carried_.load(std::memory_order_relaxed))
            return {}; // a runner posted by carry_over() will look again under the lock
        std::lock_guard lock(carried_mutex_);
        has_carried_.store(false, std::memory_order_relaxed);
        return std::exchange(carried_, chain{});
    }

    // `front`, then `back`.
    static chain append(chain front, chain back) noexcept
    {
        if (!front.first)
            return back;
        if (!back.first)
            return front;
        front.last->next_ = back.first;
        return {front.first, back.last};
    }

    static void destroy_unrun(chain batch) noexcept
    {
        while (batch.first)
        {
            queued_completion& c = *batch.first;
            batch.first = c.next_;
            c.action_(c, completion_step::abandon);
        }
    }

    static inline thread_local collecting here_{nullptr, nullptr};

    Counter& counter_;
    std::atomic<queued_completion*> head_{nullptr};
    atomic_mutex carried_mutex_;
    std::atomic<bool> has_carried_{false}; // whether carried_ may hold any
    chain carried_;                        // guarded by carried_mutex_
};

} // namespace sched::detail

SCHED_VISIBILITY_END

#endif // SCHED_DETAIL_COMPLETION_QUEUE_HPP
