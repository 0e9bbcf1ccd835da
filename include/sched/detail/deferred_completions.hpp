#ifndef SCHED_DETAIL_DEFERRED_COMPLETIONS_HPP
#define SCHED_DETAIL_DEFERRED_COMPLETIONS_HPP

#include <sched/detail/queued_completion.hpp>
#include <sched/detail/visibility.hpp>

SCHED_VISIBILITY_BEGIN

namespace sched::detail {

// Holds back the completions that fall due on this thread while it keeps a pool from leaving
// (it pins the pool's owner_link, whose destructor waits for that), and sends them on once it has
// let go: an executor that refuses a completion (its context shutting down, a pool shut down)
// destroys it at once, and the handler with it, which may hold the last reference to that pool.
// Declared before the pool is pinned, so that it ends after the pin does. Scopes nest: the
// outermost sends them on, in the order they fell due. One refused as it is sent on is destroyed
// there, before the rest are sent on (its context may be waiting for it to finish): if its
// handler's destruction ends other operations (its pool's), their completions go ahead of the rest.
class deferred_completions
{
public:
    deferred_completions() noexcept : outer_(current_) { current_ = this; }
    deferred_completions(const deferred_completions&) = delete;
    deferred_completions& operator=(const deferred_completions&) = delete;

    ~deferred_completions()
    {
        current_ = outer_;
        if (outer_)
        {
            if (head_) // after the outer scope's own
            {
                (outer_->tail_ ? outer_->tail_->next_ : outer_->head_) = head_;
                outer_->tail_ = tail_;
            }
            return;
        }
        while (queued_completion* c = head_)
        {
            head_ = c->next_;
            c->next_ = nullptr;
            c->action_(*c, completion_step::post);
        }
    }

    // Keeps `c` for the innermost scope on this thread and returns true; false if there is none
    // (the caller sends it on now).
    static bool defer(queued_completion& c) noexcept
    {
        if (!current_)
            return false;
        current_->append(c);
        return true;
    }

private:
    void append(queued_completion& c) noexcept
    {
        c.next_ = nullptr;
        (tail_ ? tail_->next_ : head_) = &c;
        tail_ = &c;
    }

    static inline thread_local deferred_completions* current_ = nullptr;
    deferred_completions* const outer_;
    queued_completion* head_ = nullptr;
    queued_completion* tail_ = nullptr;
};

} // namespace sched::detail

SCHED_VISIBILITY_END

#endif // SCHED_DETAIL_DEFERRED_COMPLETIONS_HPP
