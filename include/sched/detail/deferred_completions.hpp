#ifndef SCHED_DETAIL_DEFERRED_COMPLETIONS_HPP
#define SCHED_DETAIL_DEFERRED_COMPLETIONS_HPP

#include <sched/detail/queued_completion.hpp>

#include <utility>

namespace sched::detail {

// Holds back the completions that fall due on this thread while it holds a lock that the
// destruction of their handlers may need, and sends them on once it has let go of it: an
// owner_link's, which a pool's destructor takes. An executor that refuses a completion (its
// context shutting down, a pool shut down) destroys it at once, and the handler with it, which may
// hold the last reference to that pool. Declared before the lock is taken, so that it ends after
// the lock is released. Scopes nest: the outermost sends them on, in the order they fell due, and
// abandons those refused once the others have gone (the destruction of a handler may end other
// operations, whose completions come after).
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
            outer_->due_.splice(due_); // after the outer scope's own
            return;
        }
        if (due_.empty())
            return;
        list refused;
        list* const outer_refused = std::exchange(refused_, &refused);
        while (queued_completion* c = due_.pop())
            c->action_(*c, completion_step::post);
        refused_ = outer_refused;
        while (queued_completion* c = refused.pop())
            c->action_(*c, completion_step::abandon);
    }

    // Keeps `c` for the innermost scope on this thread and returns true; false if there is none
    // (the caller sends it on now).
    static bool defer(queued_completion& c) noexcept
    {
        if (!current_)
            return false;
        current_->due_.append(c);
        return true;
    }

    // Keeps `c`, refused as a scope on this thread sends it on, to be abandoned once the scope
    // has sent the others on, and returns true; false if no scope is sending (the caller
    // abandons it now).
    static bool defer_abandon(queued_completion& c) noexcept
    {
        if (!refused_)
            return false;
        refused_->append(c);
        return true;
    }

private:
    class list
    {
    public:
        bool empty() const noexcept { return !head_; }

        void append(queued_completion& c) noexcept
        {
            c.next_ = nullptr;
            (tail_ ? tail_->next_ : head_) = &c;
            tail_ = &c;
        }

        // Appends what `other` holds, and empties it.
        void splice(list& other) noexcept
        {
            if (other.empty())
                return;
            (tail_ ? tail_->next_ : head_) = std::exchange(other.head_, nullptr);
            tail_ = std::exchange(other.tail_, nullptr);
        }

        queued_completion* pop() noexcept
        {
            queued_completion* c = head_;
            if (c)
            {
                head_ = std::exchange(c->next_, nullptr);
                if (!head_)
                    tail_ = nullptr;
            }
            return c;
        }

    private:
        queued_completion* head_ = nullptr;
        queued_completion* tail_ = nullptr;
    };

    static inline thread_local deferred_completions* current_ = nullptr;
    // The completions refused while the outermost scope sends its own on, if it is doing so.
    static inline thread_local list* refused_ = nullptr;
    deferred_completions* const outer_;
    list due_;
};

} // namespace sched::detail

#endif // SCHED_DETAIL_DEFERRED_COMPLETIONS_HPP
