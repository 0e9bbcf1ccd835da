#ifndef SCHED_DETAIL_QUEUED_COMPLETION_HPP
#define SCHED_DETAIL_QUEUED_COMPLETION_HPP

#include <sched/detail/visibility.hpp>

#include <cstdint>

SCHED_VISIBILITY_BEGIN

namespace sched::detail {

// What is done with a completion taken from a list of them.
enum class completion_step : std::uint8_t
{
    invoke,  // its handler runs (a completion_queue's runner)
    abandon, // its handler is destroyed unrun: its io_context is going
    post,    // it goes where it would have gone when it fell due (see deferred_completions)
};

// An operation whose completion is due, linked without allocating into one list at a time: a
// completion_queue, or a deferred_completions scope.
class queued_completion
{
public:
    // Does `step` with the completion; only `invoke` may throw (what the handler threw).
    using action = void (*)(queued_completion&, completion_step step);

    explicit queued_completion(action act) noexcept : action_(act) {}

private:
    template <class Counter>
    friend class completion_queue;
    friend class deferred_completions;

    action action_;
    queued_completion* next_ = nullptr;
};

} // namespace sched::detail

SCHED_VISIBILITY_END

#endif // SCHED_DETAIL_QUEUED_COMPLETION_HPP
