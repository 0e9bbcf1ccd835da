#ifndef SCHED_DETAIL_THREAD_SCOPE_HPP
#define SCHED_DETAIL_THREAD_SCOPE_HPP

#include <sched/detail/visibility.hpp>

SCHED_VISIBILITY_BEGIN

namespace sched::detail {

// While it lives, the calling thread is inside something of `owner`'s (a run of its task, a drop
// of its tasks), so that a call the thread makes meanwhile can tell that it came from there. The
// tag keeps kinds of scope apart; scopes nest, innermost first, on each thread.
template <class Tag>
class thread_scope
{
public:
    explicit thread_scope(const void* owner) noexcept : owner_(owner), outer_(innermost_)
    {
        innermost_ = this;
    }
    ~thread_scope() { innermost_ = outer_; }
    thread_scope(const thread_scope&) = delete;
    thread_scope& operator=(const thread_scope&) = delete;

    // Whether the calling thread is inside a scope of `owner`'s.
    static bool inside(const void* owner) noexcept
    {
        for (const thread_scope* s = innermost_; s; s = s->outer_)
        {
            if (s->owner_ == owner)
                return true;
        }
        return false;
    }

private:
    const void* const owner_;
    const thread_scope* const outer_;
    static inline thread_local const thread_scope* innermost_ = nullptr;
};

} // namespace sched::detail

SCHED_VISIBILITY_END

#endif // SCHED_DETAIL_THREAD_SCOPE_HPP
