#ifndef SCHED_IMPL_DELAYED_WORK_QUEUE_HPP
#define SCHED_IMPL_DELAYED_WORK_QUEUE_HPP

#include <sched/delayed_work_queue.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <utility>

// Debug builds verify the heap order and every task's recorded index after each mutation.
#if !defined(SCHED_HEAP_CHECKS) && !defined(NDEBUG)
#define SCHED_HEAP_CHECKS 1
#endif

namespace sched {

template <class Clock>
basic_delayed_work_queue<Clock>::basic_delayed_work_queue()
    : waker_([this]() -> decltype(waker_) {
          if constexpr (detail::notifying_clock<Clock>)
              return clock_waker(*this);
          else
              return {};
      }())
{
    if constexpr (detail::notifying_clock<Clock>)
        Clock::add_listener(waker_);
}

template <class Clock>
basic_delayed_work_queue<Clock>::~basic_delayed_work_queue()
{
    if constexpr (detail::notifying_clock<Clock>)
        Clock::remove_listener(waker_);
    clear();
}

template <class Clock>
std::size_t basic_delayed_work_queue<Clock>::size() const
{
    std::lock_guard lock(mutex_);
    return heap_.size();
}

template <class Clock>
bool basic_delayed_work_queue<Clock>::empty() const
{
    std::lock_guard lock(mutex_);
    return heap_.empty();
}

template <class Clock>
auto basic_delayed_work_queue<Clock>::peek() -> node*
{
    std::lock_guard lock(mutex_);
    return heap_.empty() ? nullptr : heap_.front().task;
}

template <class Clock>
auto basic_delayed_work_queue<Clock>::peek() const -> const node*
{
    std::lock_guard lock(mutex_);
    return heap_.empty() ? nullptr : heap_.front().task;
}

template <class Clock>
bool basic_delayed_work_queue<Clock>::push(node& task, time_point due)
{
    std::lock_guard lock(mutex_);
    return push_locked(task, due);
}

template <class Clock>
bool basic_delayed_work_queue<Clock>::push_locked(node& task, time_point due)
{
    if (task.heap_index_.load(std::memory_order_relaxed) != not_queued)
        throw std::invalid_argument("delayed_work_queue::push: task is already queued");
    heap_.push_back(entry{due, &task}); // first: if it throws, nothing has changed
    task.seq_ = next_seq_++;
    task.due_.store(due.time_since_epoch().count(), std::memory_order_relaxed);
    const std::size_t at = sift_up(heap_.size() - 1);
    check_invariants(at);
    if (at != 0)
        return false; // behind the head: no waiter needs to know
    // A new, earlier head: whoever leads is sleeping until a later time.
    leader_ = nullptr;
    elect(true);
    return true;
}

template <class Clock>
auto basic_delayed_work_queue<Clock>::take(std::stop_token stop) -> node*
{
    return take_until(time_point::max(), stop, [](node&) noexcept {});
}

template <class Clock>
auto basic_delayed_work_queue<Clock>::poll() -> node*
{
    std::lock_guard lock(mutex_);
    if (heap_.empty() || !is_due(heap_.front().due, Clock::now()))
        return nullptr;
    return pop_head();
}

template <class Clock>
auto basic_delayed_work_queue<Clock>::poll_until(time_point deadline, std::stop_token stop) -> node*
{
    return take_until(deadline, stop, [](node&) noexcept {});
}

template <class Clock>
bool basic_delayed_work_queue<Clock>::remove(node& task) noexcept
{
    std::lock_guard lock(mutex_);
    return remove_locked(task);
}

template <class Clock>
template <class OnTake>
auto basic_delayed_work_queue<Clock>::take_led(external_leader& leader, OnTake on_take) noexcept
    -> node*
{
    std::lock_guard lock(mutex_);
    if (!heap_.empty() && is_due(heap_.front().due, Clock::now()) &&
        find_(*heap_.front().task) == &leader)
    {
        node* const taken = pop_head();
        on_take(*taken);
        return taken;
    }
    if (external_ == &leader)
    {
        external_due_ = time_point::max(); // it has woken: whatever it slept for
        elect(true);
    }
    return nullptr;
}

template <class Clock>
template <class F>
void basic_delayed_work_queue<Clock>::dismiss(external_leader& leader, F f) noexcept
{
    std::lock_guard lock(mutex_);
    f();
    if (external_ == &leader)
    {
        external_due_ = time_point::max(); // asked again, it may refuse
        elect(true);
    }
}

template <class Clock>
auto basic_delayed_work_queue<Clock>::second_due() const noexcept -> time_point
{
    time_point due = time_point::max();
    const std::size_t last = std::min(heap_.size(), arity + 1);
    for (std::size_t i = 1; i < last; ++i)
        due = std::min(due, heap_[i].due);
    return due;
}

template <class Clock>
bool basic_delayed_work_queue<Clock>::left_to_leader(time_point now) const noexcept
{
    const entry& head = heap_.front();
    return leader_ == &external_ && find_(*head.task) == external_ &&
           now < leader_deadline(head.due);
}

template <class Clock>
bool basic_delayed_work_queue<Clock>::elect(bool wake) noexcept
{
    external_leader* want = nullptr;
    time_point due = time_point::max();
    if (find_ && !heap_.empty() && heap_.front().due != time_point::max())
    {
        due = wake_time(heap_.front().due);
        want = find_(*heap_.front().task);
    }
    // One that wakes in time already leads: waking early, it finds nothing and is elected again.
    external_leader* const was = external_;
    if (want && want == was && external_due_ <= due)
    {
        leader_ = &external_;
        return true;
    }
    external_ = nullptr;
    const bool led = want && want->lead_until(due, wake_time(second_due()));
    if (was && (was != want || !led))
        was->step_down();
    if (led)
    {
        external_ = want;
        external_due_ = due;
        const bool was_led = leader_ == &external_;
        leader_ = &external_;
        if (!was_led && backup_ == nullptr && wake)
            available_.notify_one(); // a follower sleeping until woken becomes the backup
        return true;
    }
    if (leader_ == &external_)
        leader_ = nullptr;
    if (wake && leader_ == nullptr && !heap_.empty())
        available_.notify_one();
    return false;
}

template <class Clock>
bool basic_delayed_work_queue<Clock>::remove_locked(node& task) noexcept
{
    const std::size_t i = task.heap_index_.load(std::memory_order_relaxed);
    if (i >= heap_.size() || heap_[i].task != &task) // not queued, or queued elsewhere
        return false;
    remove_at(i);
    // A thread that leads wakes early, once, and sleeps again; an external leader must know, or
    // its io_context would wait for it with no task left to take.
    if (i == 0 && external_)
        elect(true);
    return true;
}

template <class Clock>
bool basic_delayed_work_queue<Clock>::reschedule(node& task, time_point due) noexcept
{
    std::lock_guard lock(mutex_);
    const std::size_t i = task.heap_index_.load(std::memory_order_relaxed);
    if (i >= heap_.size() || heap_[i].task != &task)
        return false;
    const time_point was = heap_[i].due;
    heap_[i].due = due;
    task.seq_ = next_seq_++;
    task.due_.store(due.time_since_epoch().count(), std::memory_order_relaxed);
    std::size_t at = sift_down(i);
    if (at == i)
        at = sift_up(i);
    check_invariants(at);
    if (at == 0 && due < was)
    {
        // An earlier head: the leader sleeps until a time that is now too late. (A later head
        // needs nobody woken: the leader wakes early, once, and sleeps again.)
        leader_ = nullptr;
        elect(true);
    }
    else if (i == 0 && external_)
        elect(true); // a later head, perhaps another's
    return true;
}

template <class Clock>
template <class OutputIt>
std::size_t basic_delayed_work_queue<Clock>::drain(OutputIt out, std::size_t max_tasks)
{
    std::lock_guard lock(mutex_);
    const time_point now = Clock::now();
    std::size_t moved = 0;
    while (moved < max_tasks && !heap_.empty() && is_due(heap_.front().due, now))
    {
        *out = heap_.front().task; // first: if it throws, the task stays queued
        ++out;
        pop_head();
        ++moved;
    }
    return moved;
}

template <class Clock>
template <class Predicate, class OutputIt>
std::size_t basic_delayed_work_queue<Clock>::remove_if(Predicate pred, OutputIt out)
{
    std::lock_guard lock(mutex_);
    // Partition: kept entries to the front, matching ones to the back. If pred throws, the array
    // still holds every entry, and rebuilding restores the heap.
    const std::size_t n = heap_.size();
    std::size_t kept = 0;
    try
    {
        for (std::size_t i = 0; i < n; ++i)
        {
            if (!pred(*heap_[i].task))
                std::swap(heap_[kept++], heap_[i]);
        }
    }
    catch (...)
    {
        rebuild();
        throw;
    }
    // Hand the matching ones out in queue order. If writing throws, the rest stay queued.
    std::sort(heap_.begin() + static_cast<std::ptrdiff_t>(kept), heap_.end(), earlier);
    std::size_t written = kept;
    try
    {
        for (; written < n; ++written)
        {
            *out = heap_[written].task;
            ++out;
            heap_[written].task->heap_index_.store(not_queued, std::memory_order_relaxed);
        }
    }
    catch (...)
    {
        heap_.erase(heap_.begin() + static_cast<std::ptrdiff_t>(kept),
                    heap_.begin() + static_cast<std::ptrdiff_t>(written));
        rebuild();
        throw;
    }
    heap_.resize(kept);
    rebuild(); // removing tasks can only make the head later: no waiter needs waking...
    if (external_)
        elect(true); // ...but an external leader must know (see remove_locked())
    return n - kept;
}

template <class Clock>
std::size_t basic_delayed_work_queue<Clock>::clear() noexcept
{
    std::lock_guard lock(mutex_);
    for (entry& e : heap_)
        e.task->heap_index_.store(not_queued, std::memory_order_relaxed);
    const std::size_t cleared = heap_.size();
    decltype(heap_)().swap(heap_);
    if (external_)
        elect(true);
    return cleared;
}

template <class Clock>
template <class OnTake>
auto basic_delayed_work_queue<Clock>::take_until(time_point deadline,
                                                 std::stop_token& stop,
                                                 OnTake on_take) -> node*
{
    // Declared before the lock so that it is destroyed after unlocking: its destructor waits for
    // a running callback, and the callback takes the lock.
    std::optional<std::stop_callback<stop_waker>> on_stop;
    std::unique_lock lock(mutex_);
    const void* const self = &lock; // identifies this waiter as leader
    node* taken = nullptr;
    for (;;)
    {
        if (stop.stop_requested())
            break;
        const time_point now = Clock::now();
        if (!heap_.empty() && is_due(heap_.front().due, now) && !left_to_leader(now))
        {
            taken = pop_head();
            on_take(*taken);
            break;
        }
        if (deadline <= now)
            break;
        if (stop.stop_possible() && !on_stop)
        {
            // About to block: register for the stop request, without the lock since the
            // callback runs at once if stop was already requested.
            lock.unlock();
            on_stop.emplace(stop, stop_waker{this});
            lock.lock();
            continue;
        }
        if (heap_.empty() || leader_ != nullptr || deadline < heap_.front().due)
        {
            // A follower (or a poller whose deadline comes first): sleep until woken; or, as the
            // backup while an external leader has the head, until it is overdue by the grace.
            time_point until = deadline;
            if (leader_ == &external_ && !heap_.empty() && (backup_ == nullptr || backup_ == self))
            {
                backup_ = self;
                until = std::min(until, leader_deadline(heap_.front().due));
            }
            wait_until(lock, until);
            if (backup_ == self)
                backup_ = nullptr; // the next turn decides again
        }
        else if (find_ && elect(false))
            continue; // an external leader has the head: follow
        else
        {
            leader_ = self;
            wait_until(lock, std::min(deadline, wake_time(heap_.front().due)));
            if (leader_ == self)
                leader_ = nullptr;
        }
    }
    // Leaving: if nobody leads and tasks remain, hand the leadership on; after taking an
    // external leader's head, find the new head its leader. An external leader needs a backup.
    if (!heap_.empty())
    {
        if (leader_ == nullptr || (taken && leader_ == &external_))
            elect(true);
        if (leader_ == &external_ && backup_ == nullptr)
            available_.notify_one();
    }
    return taken;
}

template <class Clock>
void basic_delayed_work_queue<Clock>::wait_until(std::unique_lock<detail::atomic_mutex>& lock,
                                                 time_point t)
{
    if constexpr (detail::notifying_clock<Clock>)
        available_.wait(lock); // the clock wakes us when it moves
    else if (t == time_point::max())
        available_.wait(lock);
    else
        available_.wait_until(lock, t);
}

template <class Clock>
void basic_delayed_work_queue<Clock>::wake_all() noexcept
{
    // Under the lock: a waiter that has just read the clock or the stop state is then blocked.
    std::lock_guard lock(mutex_);
    available_.notify_all();
}

template <class Clock>
void basic_delayed_work_queue<Clock>::place(std::size_t i, const entry& e) noexcept
{
    heap_[i] = e;
    e.task->heap_index_.store(i, std::memory_order_relaxed);
}

template <class Clock>
std::size_t basic_delayed_work_queue<Clock>::sift_up(std::size_t i) noexcept
{
    const entry moving = heap_[i];
    while (i > 0)
    {
        const std::size_t parent = (i - 1) / arity;
        if (!earlier(moving, heap_[parent]))
            break;
        place(i, heap_[parent]);
        i = parent;
    }
    place(i, moving);
    return i;
}

template <class Clock>
std::size_t basic_delayed_work_queue<Clock>::sift_down(std::size_t i) noexcept
{
    const entry moving = heap_[i];
    const std::size_t n = heap_.size();
    for (;;)
    {
        const std::size_t first = arity * i + 1;
        if (first >= n)
            break;
        const std::size_t last = first + arity < n ? first + arity : n;
        std::size_t best = first;
        for (std::size_t c = first + 1; c < last; ++c)
        {
            if (earlier(heap_[c], heap_[best]))
                best = c;
        }
        if (!earlier(heap_[best], moving))
            break;
        place(i, heap_[best]);
        i = best;
    }
    place(i, moving);
    return i;
}

template <class Clock>
void basic_delayed_work_queue<Clock>::rebuild() noexcept
{
    for (std::size_t i = 0; i < heap_.size(); ++i)
        heap_[i].task->heap_index_.store(i, std::memory_order_relaxed);
    if (heap_.size() > 1)
    {
        for (std::size_t i = (heap_.size() - 2) / arity + 1; i-- > 0;) // every parent, bottom up
            sift_down(i);
    }
    release_spare_capacity();
    check_invariants(0);
}

template <class Clock>
auto basic_delayed_work_queue<Clock>::pop_head() noexcept -> node*
{
    node* const head = heap_.front().task;
    remove_at(0);
    return head;
}

template <class Clock>
void basic_delayed_work_queue<Clock>::remove_at(std::size_t i) noexcept
{
    node* const task = heap_[i].task;
    const entry last = heap_.back();
    heap_.pop_back();
    std::size_t at = i;
    if (i < heap_.size())
    {
        // The last entry fills the hole: sift it down, and up if it did not move down.
        place(i, last);
        at = sift_down(i);
        if (at == i)
            at = sift_up(i);
    }
    task->heap_index_.store(not_queued, std::memory_order_relaxed);
    if (heap_.size() <= heap_.capacity() / 4) [[unlikely]]
        release_spare_capacity();
    check_invariants(at);
}

template <class Clock>
void basic_delayed_work_queue<Clock>::release_spare_capacity() noexcept
{
    // Halve the array whenever it is three quarters empty, so that cancelling a mass of tasks
    // gives their memory back; amortised O(1), and never thrashing around one size.
    std::size_t capacity = heap_.capacity();
    if (capacity < 2 * min_capacity || heap_.size() > capacity / 4)
        return;
    while (capacity >= 2 * min_capacity && heap_.size() <= capacity / 4)
        capacity /= 2;
    try
    {
        decltype(heap_) smaller;
        smaller.reserve(capacity);
        smaller.assign(heap_.begin(), heap_.end());
        heap_.swap(smaller);
    }
    catch (const std::bad_alloc&)
    {
        // Keeping the larger array is always correct.
    }
}

template <class Clock>
void basic_delayed_work_queue<Clock>::check_invariants(
    [[maybe_unused]] std::size_t touched) const noexcept
{
#if SCHED_HEAP_CHECKS
    // Everything for small heaps; around the entry that moved last for large ones, so that debug
    // builds stay usable with millions of tasks.
    constexpr std::size_t full_check_limit = 4096;
    const auto check = [this](std::size_t i) {
        const std::size_t recorded = heap_[i].task->heap_index_.load(std::memory_order_relaxed);
        if (recorded != i)
        {
            std::fprintf(stderr, "sched: delayed_work_queue: task at %zu records index %zu\n", i,
                         recorded);
            std::abort();
        }
        if (i > 0 && earlier(heap_[i], heap_[(i - 1) / arity]))
        {
            std::fprintf(stderr, "sched: delayed_work_queue: heap order broken at %zu\n", i);
            std::abort();
        }
    };
    if (heap_.size() <= full_check_limit)
    {
        for (std::size_t i = 0; i < heap_.size(); ++i)
            check(i);
    }
    else if (touched < heap_.size())
    {
        check(touched);
        for (std::size_t c = arity * touched + 1; c <= arity * touched + arity; ++c)
        {
            if (c < heap_.size())
                check(c);
        }
    }
#endif
}

} // namespace sched

#endif // SCHED_IMPL_DELAYED_WORK_QUEUE_HPP
