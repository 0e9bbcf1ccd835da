#ifndef SCHED_DETAIL_COMPLETION_QUEUE_HPP
#define SCHED_DETAIL_COMPLETION_QUEUE_HPP

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include <atomic>
#include <cstddef>
#include <utility>

namespace sched::detail {

// A completion waiting in a completion_queue: an operation whose handler is due to run.
class queued_completion
{
public:
    // Invokes the handler (`invoke`), or destroys it unrun (its io_context is going).
    using action = void (*)(queued_completion&, bool invoke);

    explicit queued_completion(action act) noexcept : action_(act) {}

private:
    template <class Counter>
    friend class completion_queue;

    action action_;
    queued_completion* next_ = nullptr;
};

// Completions whose handlers run on one io_context through its own executor, run in batches:
// the first one queued posts a runner to the io_context, and the runner invokes every
// completion queued by the time it runs, oldest first (as an Asio strand runs its ready
// handlers). A batch then costs one post and one turn of the io_context's loop, not one each.
//
// Each completion comes in holding a count on `Counter` (which keeps the io_context's work while
// any is held); whoever takes completions out lets go of theirs in one step,
// `Counter::finished(n)`: the runner as it starts (the io_context counts the runner itself), or
// whoever destroys them unrun.
template <class Counter>
class completion_queue
{
public:
    explicit completion_queue(Counter& counter) noexcept : counter_(counter) {}
    completion_queue(const completion_queue&) = delete;
    completion_queue& operator=(const completion_queue&) = delete;

    // Queues `c` and, if the queue was empty, posts a runner to `io`. A runner the io_context
    // destroys unrun (or that cannot be posted) destroys the completions it would have run.
    void push(queued_completion& c, boost::asio::io_context& io) noexcept
    {
        queued_completion* head = head_.load(std::memory_order_relaxed);
        do
            c.next_ = head;
        while (!head_.compare_exchange_weak(head, &c, std::memory_order_release,
                                            std::memory_order_relaxed));
        if (head == nullptr)
            post_runner(io, runner(*this, io));
    }

    // Destroys every queued completion unrun: their io_context is shutting down, and nothing
    // runs it any more.
    void abandon_all() noexcept { abandon(take_all()); }

private:
    // Posted to the io_context: runs what is queued when it runs (`batch_` null), or the rest
    // of an earlier batch whose handler threw (`batch_`, in order, counts already let go of).
    class runner
    {
    public:
        runner(completion_queue& queue, boost::asio::io_context& io) noexcept
            : queue_(&queue), io_(&io)
        {}
        runner(runner&& other) noexcept
            : queue_(std::exchange(other.queue_, nullptr)), io_(other.io_),
              batch_(std::exchange(other.batch_, nullptr))
        {}
        runner& operator=(runner&&) = delete;
        ~runner()
        {
            if (!queue_) // ran, or moved from
                return;
            if (batch_)
                destroy_unrun(batch_);
            else
                queue_->abandon(queue_->take_all());
        }

        void operator()()
        {
            completion_queue& queue = *std::exchange(queue_, nullptr);
            queued_completion* batch =
                batch_ ? std::exchange(batch_, nullptr) : queue.release(queue.take_all());
            // A handler that throws leaves the rest to a runner of their own; the exception
            // goes on out of the io_context's run(), as Asio's own handlers' do.
            struct rest
            {
                completion_queue& queue;
                boost::asio::io_context& io;
                queued_completion*& batch;
                ~rest()
                {
                    if (batch)
                    {
                        runner more(queue, io);
                        more.batch_ = std::exchange(batch, nullptr);
                        post_runner(io, std::move(more));
                    }
                }
            } guard{queue, *io_, batch};
            while (batch)
            {
                queued_completion& c = *batch;
                batch = c.next_;
                c.action_(c, true);
            }
        }

    private:
        friend class completion_queue;

        completion_queue* queue_;
        boost::asio::io_context* io_;
        queued_completion* batch_ = nullptr;
    };

    static void post_runner(boost::asio::io_context& io, runner r) noexcept
    {
        try
        {
            boost::asio::post(io.get_executor(), std::move(r));
        }
        catch (...) // out of memory: `r` destroys its completions unrun
        {}
    }

    // Every queued completion, oldest first.
    queued_completion* take_all() noexcept
    {
        queued_completion* newest_first = head_.exchange(nullptr, std::memory_order_acquire);
        queued_completion* oldest_first = nullptr;
        while (newest_first)
        {
            queued_completion* next = newest_first->next_;
            newest_first->next_ = oldest_first;
            oldest_first = newest_first;
            newest_first = next;
        }
        return oldest_first;
    }

    // Lets go of the counts that the completions of `batch` hold; returns `batch`.
    queued_completion* release(queued_completion* batch) noexcept
    {
        std::size_t n = 0;
        for (queued_completion* c = batch; c; c = c->next_)
            ++n;
        if (n != 0)
            counter_.finished(n);
        return batch;
    }

    // Destroys the completions of `batch` unrun, then lets go of their counts.
    void abandon(queued_completion* batch) noexcept
    {
        std::size_t n = destroy_unrun(batch);
        if (n != 0)
            counter_.finished(n);
    }

    // Returns how many there were.
    static std::size_t destroy_unrun(queued_completion* batch) noexcept
    {
        std::size_t n = 0;
        while (batch)
        {
            queued_completion& c = *batch;
            batch = c.next_;
            c.action_(c, false);
            ++n;
        }
        return n;
    }

    Counter& counter_;
    std::atomic<queued_completion*> head_{nullptr};
};

} // namespace sched::detail

#endif // SCHED_DETAIL_COMPLETION_QUEUE_HPP
