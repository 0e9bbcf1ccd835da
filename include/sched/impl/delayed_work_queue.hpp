#ifndef SCHED_IMPL_DELAYED_WORK_QUEUE_HPP
#define SCHED_IMPL_DELAYED_WORK_QUEUE_HPP

#include <sched/delayed_work_queue.hpp>

#include <sched/detail/background_unmap.hpp>
#include <sched/detail/spin_wait.hpp>
#include <sched/detail/timed_wait.hpp>
#include <sched/detail/visibility.hpp>

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

SCHED_VISIBILITY_BEGIN

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
    check_pushable(marker_);
    // Its heap array hands the pages it gives back to that thread, under the lock: not the first
    // time at the cost of starting it.
    detail::start_unmapping_thread();
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
    const shards_lock far(*this);
    return size_locked();
}

template <class Clock>
bool basic_delayed_work_queue<Clock>::empty() const
{
    return size() == 0;
}

template <class Clock>
std::size_t basic_delayed_work_queue<Clock>::size_locked() const noexcept
{
    std::size_t n = heap_.size() - (heap_.find(marker_) ? 1 : 0);
    for (const std::unique_ptr<shard>& s : shards_)
        n += s->tasks.size();
    return n;
}

template <class Clock>
bool basic_delayed_work_queue<Clock>::empty_locked() const noexcept
{
    if (far_open_.load(std::memory_order_relaxed))
        return false;
    // Closed, the shards change only under the main lock too.
    return size_locked() == 0;
}

template <class Clock>
auto basic_delayed_work_queue<Clock>::peek() -> node*
{
    return const_cast<node*>(std::as_const(*this).peek());
}

template <class Clock>
auto basic_delayed_work_queue<Clock>::peek() const -> const node*
{
    std::lock_guard lock(mutex_);
    const shards_lock far(*this);
    const entry* first = heap_.first_except(&marker_);
    // A far task due with a main one came later (a push moves the far ones first).
    if (const shard* s = first_shard(); s && (!first || s->tasks.front().due < first->due))
        first = &s->tasks.front();
    return first ? first->task() : nullptr;
}

template <class Clock>
bool basic_delayed_work_queue<Clock>::push(node& task, time_point due)
{
    auto always = [] {
        return true;
    };
    return *push_checked(task, due, always, kept_place{});
}

template <class Clock>
template <class Predicate>
bool basic_delayed_work_queue<Clock>::push_if(node& task, time_point due, Predicate allowed)
{
    return push_checked(task, due, allowed, kept_place{}).has_value();
}

template <class Clock>
template <class Predicate>
bool basic_delayed_work_queue<Clock>::push_again_if(node& task,
                                                    time_point due,
                                                    kept_place place,
                                                    Predicate allowed)
{
    return push_checked(task, due, allowed, place).has_value();
}

template <class Clock>
template <class Predicate>
std::optional<bool> basic_delayed_work_queue<Clock>::push_checked(node& task,
                                                                  time_point due,
                                                                  Predicate& allowed,
                                                                  kept_place place)
{
    // The common far push takes its shard's lock only; one that would move the marker takes the
    // main lock first.
    shard* const far = far_shard_for(task, due, recent_now());
    if (far)
    {
        std::lock_guard shard_lock(far->mutex);
        if (far_open_.load(std::memory_order_relaxed) && due >= far_earliest())
        {
            if (!allowed())
                return refused(task, due);
            push_far(*far, task, due);
            return false;
        }
    }
    std::lock_guard lock(mutex_);
    if (!allowed())
        return refused(task, due);
    return push_locked(task, due, far, place);
}

template <class Clock>
void basic_delayed_work_queue<Clock>::check_pushable(const node& task)
{
    if (task.queued())
        throw std::invalid_argument("delayed_work_queue::push: task is already queued");
    if (!entry::fits(task))
        throw std::invalid_argument("delayed_work_queue::push: task's address is above 2^48");
}

template <class Clock>
std::nullopt_t basic_delayed_work_queue<Clock>::refused(node& task, time_point due) noexcept
{
    // Not a task queued here or elsewhere (the push would have thrown): its due time is that
    // queue's.
    if (!task.queued())
        task.place_.store(recorded_due(due), std::memory_order_relaxed);
    return std::nullopt;
}

template <class Clock>
auto basic_delayed_work_queue<Clock>::far_shard_for(node& task,
                                                    time_point due,
                                                    time_point now) const noexcept -> shard*
{
    if (!far_open_.load(std::memory_order_relaxed))
        return nullptr;
    // A task due "never" stays in the main heap: the far tier holds only tasks that move.
    if (due == time_point::max() || due < detail::saturating_add(now, far_horizon_) ||
        (find_ && find_(task)))
        return nullptr;
    // Threads spread over the shards in the order they first push; one thread keeps its shard.
    static std::atomic<std::size_t> threads_seen{0};
    thread_local const std::size_t thread_number = threads_seen.fetch_add(1);
    // Its shard's index for the last shard count it saw: a division on every push cost more
    // than the rest of this function.
    thread_local std::size_t count_seen = 0;
    thread_local std::size_t index = 0;
    if (shards_.size() != count_seen)
    {
        count_seen = shards_.size();
        index = thread_number % count_seen;
    }
    return shards_[index].get();
}

template <class Clock>
bool basic_delayed_work_queue<Clock>::push_locked(node& task,
                                                  time_point due,
                                                  shard* far,
                                                  kept_place place)
{
    check_pushable(task);
    if (far)
    {
        // Far by an old reading: check with the clock (a push that gets here is the first far
        // one, or one earlier than every far task, so this is rare).
        const time_point now = Clock::now();
        note_now(now);
        far = far_shard_for(task, due, now);
    }
    if (shard* const s = far)
    {
        // Room for the marker first, unless it is in the main heap already (then it only moves):
        // once the shard holds the task, the marker must be in the main heap.
        if (!heap_.find(marker_))
            heap_.make_room();
        std::lock_guard shard_lock(s->mutex);
        push_far(*s, task, due);
        return false;
    }
    move_far_tasks_before(due);
    // A kept place holds only in a queue that never had a far tier: tasks that moved out of it
    // (while it was open, or as it closed) took new places, later than one kept from before.
    const std::size_t at = heap_.push(task, due, shards_.empty() ? place : kept_place{});
    if (!is_led_head(at))
        return false; // behind the head: no waiter needs to know
    new_head_at(at);
    return true;
}

template <class Clock>
void basic_delayed_work_queue<Clock>::push_far(shard& s, node& task, time_point due)
{
    check_pushable(task);
    (void)s.tasks.push(task, due);
    far_task_due(due); // only from push_locked() if earlier, under the main lock
}

template <class Clock>
void basic_delayed_work_queue<Clock>::far_task_due(time_point due) noexcept
{
    if (due < far_earliest())
    {
        far_earliest_.store(due.time_since_epoch().count(), std::memory_order_relaxed);
        place_marker();
    }
}

template <class Clock>
void basic_delayed_work_queue<Clock>::place_marker(time_point after, bool far_tasks_left) noexcept
{
    const time_point earliest = far_earliest();
    const std::optional<std::size_t> at = heap_.find(marker_);
    if (earliest == time_point::max())
    {
        // Far tasks due "never" keep the marker, at "never": a reschedule that pulls one in
        // then moves it, and needs no room.
        if (at && far_tasks_left)
            (void)heap_.move(*at, earliest);
        else if (at)
            heap_.remove_at(*at);
        return;
    }
    const time_point ahead = detail::saturating_subtract(earliest, far_horizon_ / 2);
    const time_point due = std::max(ahead, after);
    if (at && heap_[*at].due == due && ahead > after)
        return;
    const bool earlier = !at || due < heap_[*at].due;
    // Pushing cannot throw: a push makes room first (see push_locked()), and a reschedule finds
    // the marker in the main heap (the far tier holds the task it moves).
    const std::size_t now_at = at ? heap_.move(*at, due) : heap_.push(marker_, due);
    if (now_at == 0 && earlier)
        head_moved_earlier();
}

template <class Clock>
auto basic_delayed_work_queue<Clock>::first_shard() const noexcept -> shard*
{
    // Between shards, equal due times go in shard order.
    shard* first = nullptr;
    for (const std::unique_ptr<shard>& s : shards_)
    {
        if (!s->tasks.empty() && (!first || s->tasks.front().due < first->tasks.front().due))
            first = s.get();
    }
    return first;
}

template <class Clock>
void basic_delayed_work_queue<Clock>::move_far_tasks(time_point limit, std::size_t most) noexcept
{
    const shards_lock far(*this);
    const entry* const led_was = led_head();
    const node* const head_was = led_was ? led_was->task() : nullptr;
    // When the batch ends before the tier does, the marker goes behind the tasks it moved, which
    // may be due: they come out first, then the marker moves the next batch.
    time_point last_moved = time_point::min();
    bool out_of_memory = false;
    for (std::size_t moved = 0;; ++moved)
    {
        shard* const from = first_shard();
        if (!from || from->tasks.front().due > limit)
        {
            last_moved = time_point::min(); // none left to move
            break;
        }
        if (moved == most)
            break;
        try
        {
            heap_.make_room();
        }
        catch (const std::bad_alloc&)
        {
            out_of_memory = true; // the rest stay
            break;
        }
        last_moved = from->tasks.front().due;
        node* const task = from->tasks.pop_front();
        (void)heap_.push(*task, last_moved);
    }
    const shard* const next = first_shard();
    const time_point earliest = next ? next->tasks.front().due : time_point::max();
    far_earliest_.store(earliest.time_since_epoch().count(), std::memory_order_relaxed);
    if (out_of_memory)
        last_moved = std::max(last_moved, retry_after_out_of_memory());
    place_marker(last_moved, next != nullptr);
    // A moved task is the head now (in front of the marker, or of a task behind the marker
    // that a failed move left in front): its leader must know. Read before the tasks moved, not
    // after, or one moved in front of the marker would not count (a review's finding).
    if (const entry* const head = led_head(); head && head->task() != head_was)
        head_moved_earlier();
}

template <class Clock>
auto basic_delayed_work_queue<Clock>::retry_after_out_of_memory() noexcept -> time_point
{
    const time_point now = Clock::now();
    // On a clock that notifies, nobody waits by time: the next take or poll tries again.
    if constexpr (detail::notifying_clock<Clock>)
        return now;
    // Else a millisecond from now (the scheduler's service retries so too), not at once: the
    // leader would wake for the marker over and over, holding up the tasks due meanwhile, which
    // come out instead. At the end of time, at once rather than never.
    const time_point later = detail::saturating_add(
        now, detail::saturating_ceil<duration>(std::chrono::milliseconds(1)));
    return later == time_point::max() ? now : later;
}

template <class Clock>
bool basic_delayed_work_queue<Clock>::move_far_tasks_before(time_point due) noexcept
{
    if (!passes_far_tasks(due))
        return false;
    // Far tasks due by then were pushed earlier: they move first, to come out first; so do the
    // others due within the horizon, so that the next push need not move them. While the tier is
    // open, not those due later, which the marker moves in time: a task due that far ahead that
    // stays in the main heap (one an external leader waits for) would bring them all in, in one
    // lock hold (a review measured 66-81 ms with 200k far tasks). Once it is closed, every task
    // stays in the main heap, and each far task moves once. The horizon is judged as a push
    // judges it (see far_shard_for()): a task it keeps in the main heap by time alone is due
    // within it.
    const time_point horizon = detail::saturating_add(recent_now(), far_horizon_);
    const time_point limit =
        far_open_.load(std::memory_order_relaxed) ? horizon : std::max(due, horizon);
    if (far_earliest() > limit)
        return false; // none to move: the common case for a task kept in the main heap
    move_far_tasks(limit);
    return true;
}

template <class Clock>
std::optional<std::size_t>
basic_delayed_work_queue<Clock>::move_as_pushed(std::size_t at, node& task, time_point due) noexcept
{
    if (passes_far_tasks(due))
    {
        if (move_to_far_tier(at, task, due))
            return std::nullopt;
        if (move_far_tasks_before(due))
            at = *heap_.find(task);
    }
    return heap_.move(at, due);
}

template <class Clock>
bool basic_delayed_work_queue<Clock>::move_to_far_tier(std::size_t at,
                                                       node& task,
                                                       time_point due) noexcept
{
    shard* const s = far_shard_for(task, due, recent_now());
    if (!s)
        return false;
    std::lock_guard shard_lock(s->mutex);
    try
    {
        s->tasks.make_room();
    }
    catch (...)
    {
        return false;
    }
    // Due at or after far_earliest(): the marker, already in the main heap, stays where it is.
    heap_.remove_at(at);
    push_far(*s, task, due); // cannot throw: the task is not queued, and there is room
    return true;
}

template <class Clock>
void basic_delayed_work_queue<Clock>::move_far_tasks_if_due(time_point now) noexcept
{
    // A batch at a time, so that the others get the lock between batches: the marker comes out
    // behind each batch (see move_far_tasks()) and moves the next.
    constexpr std::size_t batch = 64;
    if (!heap_.empty() && heap_.front().task() == &marker_ && is_due(heap_.front().due, now))
        move_far_tasks(detail::saturating_add(now, far_horizon_), batch);
}

template <class Clock>
void basic_delayed_work_queue<Clock>::note_now(time_point now) noexcept
{
    if (shards_.empty())
        return;
    const typename duration::rep recent = recent_now_.load(std::memory_order_relaxed);
    if (now.time_since_epoch().count() - recent >= (far_horizon_ / 4).count())
        recent_now_.store(now.time_since_epoch().count(), std::memory_order_relaxed);
}

template <class Clock>
void basic_delayed_work_queue<Clock>::set_far_tier(duration horizon, std::size_t shards)
{
    check_not_negative(horizon, "delayed_work_queue::set_far_tier: negative horizon");
    if (shards > max_far_shards)
        throw std::invalid_argument("delayed_work_queue::set_far_tier: too many shards");
    if (horizon == duration::zero() || shards == 0)
        return;
    std::vector<std::unique_ptr<shard>> made;
    made.reserve(shards);
    for (std::size_t i = 0; i < shards; ++i)
        made.push_back(std::make_unique<shard>(i + 1));
    std::lock_guard lock(mutex_);
    shards_ = std::move(made);
    far_horizon_ = horizon;
    recent_now_.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
    far_open_.store(true, std::memory_order_relaxed);
}

template <class Clock>
void basic_delayed_work_queue<Clock>::close_far_tier() noexcept
{
    std::lock_guard lock(mutex_);
    const shards_lock far(*this);
    far_open_.store(false, std::memory_order_relaxed);
}

template <class Clock>
basic_delayed_work_queue<Clock>::shards_lock::shards_lock(
    const basic_delayed_work_queue& queue) noexcept
    : queue_(queue)
{
    for (const std::unique_ptr<shard>& s : queue_.shards_)
        s->mutex.lock();
}

template <class Clock>
basic_delayed_work_queue<Clock>::shards_lock::~shards_lock()
{
    for (const std::unique_ptr<shard>& s : queue_.shards_)
        s->mutex.unlock();
}

template <class Clock>
template <class F>
decltype(auto) basic_delayed_work_queue<Clock>::under_locks(F f)
{
    std::lock_guard lock(mutex_);
    const shards_lock far(*this);
    return f(size_locked() == 0);
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
    const time_point now = Clock::now();
    note_now(now);
    move_far_tasks_if_due(now);
    if (heap_.empty() || !is_due(heap_.front().due, now) || heap_.front().task() == &marker_)
        return nullptr;
    node* const taken = heap_.pop_front();
    head_left();
    return taken;
}

template <class Clock>
auto basic_delayed_work_queue<Clock>::poll_until(time_point deadline, std::stop_token stop) -> node*
{
    return take_until(deadline, stop, [](node&) noexcept {});
}

template <class Clock>
bool basic_delayed_work_queue<Clock>::remove(node& task) noexcept
{
    return remove(task, [](bool) noexcept {});
}

template <class Clock>
template <class OnRemove>
bool basic_delayed_work_queue<Clock>::remove(node& task, OnRemove on_remove) noexcept
{
    return locate(*this, task, [&](heap& tasks, std::size_t at, bool main_locked) {
        if (&tasks == &heap_)
        {
            if (&task == &marker_)
                return false;
            const bool was_head = is_led_head(at);
            heap_.remove_at(at);
            if (was_head)
                head_left();
        }
        else
            tasks.remove_at(at); // the marker may now be early: harmless
        on_remove(main_locked && empty_locked());
        return true;
    });
}

template <class Clock>
auto basic_delayed_work_queue<Clock>::due_time(const node& task) const noexcept
    -> std::optional<time_point>
{
    std::optional<time_point> due;
    (void)locate(*this, task, [&](const heap& tasks, std::size_t at, bool) {
        due = tasks[at].due;
        return true;
    });
    return due;
}

template <class Clock>
template <class Self, class Found>
bool basic_delayed_work_queue<Clock>::locate(Self& self, const node& task, Found&& found) noexcept
{
    // A far task while the tier is open: under its shard's lock only.
    if (const std::size_t number = far_number(task); number != 0)
    {
        if (number > self.shards_.size())
            return false; // queued elsewhere
        shard& s = *self.shards_[number - 1];
        std::lock_guard shard_lock(s.mutex);
        if (self.far_open_.load(std::memory_order_relaxed))
        {
            if (const std::optional<std::size_t> at = s.tasks.find(task))
                return found(s.tasks, *at, false);
        }
    }
    // Otherwise under the main lock: the task may have moved to the main heap meanwhile, or be
    // on its way into a shard, or the tier is closed. A push to the far tier holds its shard's
    // lock only, from its check of the task to its push (see push_checked()): every shard's lock
    // waits for one under way, which may not have recorded the task's place yet. (Else a cancel
    // that the pusher's check missed missed the task too, and left it queued: a test's hang.)
    std::lock_guard lock(self.mutex_);
    if (const std::optional<std::size_t> at = self.heap_.find(task))
        return found(self.heap_, *at, true);
    if (self.shards_.empty())
        return false;
    const shards_lock far(self);
    const std::size_t now_number = far_number(task);
    if (now_number == 0 || now_number > self.shards_.size())
        return false;
    heap& tasks = self.shards_[now_number - 1]->tasks;
    const std::optional<std::size_t> at = tasks.find(task);
    return at && found(tasks, *at, true);
}

template <class Clock>
template <class OnTake>
auto basic_delayed_work_queue<Clock>::take_led(external_leader& leader,
                                               OnTake on_take,
                                               led_poll* poll) noexcept -> node*
{
    std::lock_guard lock(mutex_);
    const bool was_polling = poll && poll->polling && polling_ == &leader;
    if (poll)
        *poll = led_poll{};
    const time_point now = Clock::now();
    note_now(now);
    // With every waiting thread busy, nobody else moves the far tasks due before its head.
    move_far_tasks_if_due(now);
    const entry* const head = led_head();
    const bool leads_head = head && leader_of(*head) == &leader;
    if (leads_head && head == &heap_.front() && is_due(head->due, now))
    {
        leader.took_at_ = now;
        node* const taken = take_front(on_take);
        if (poll)
            poll->polling = was_polling;
        // The next head is another's: its leader leads from now, not once this one is done
        // with what it took (its handlers may take long).
        if (!heap_.empty())
        {
            const entry* const next = led_head();
            if (!next || leader_of(*next) != &leader)
                elect(true);
        }
        return taken;
    }
    if (poll && leads_head && external_ == &leader && polls(*head, now))
    {
        // It keeps the lead; one thread of it polls.
        if (was_polling || polling_ != &leader)
        {
            polling_ = &leader;
            *poll = led_poll{true, head->due};
        }
        return nullptr;
    }
    if (was_polling)
        polling_ = nullptr;
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
    if (polling_ == &leader)
        polling_ = nullptr;
    if (external_ == &leader)
    {
        external_due_ = time_point::max(); // asked again, it may refuse
        elect(true);
    }
}

template <class Clock>
bool basic_delayed_work_queue<Clock>::left_to_leader(time_point now) const noexcept
{
    const entry& head = heap_.front();
    return leader_ == &external_ && leader_of(head) == external_ && now < leader_deadline(head.due);
}

template <class Clock>
bool basic_delayed_work_queue<Clock>::elect(bool wake) noexcept
{
    external_leader* want = nullptr;
    time_point due = time_point::max();
    const entry* const head = find_ ? led_head() : nullptr;
    if (head && head->due != time_point::max())
    {
        due = wake_time_of(*head);
        want = leader_of(*head);
    }
    // One that wakes in time already leads: waking early, it finds nothing and is elected again.
    external_leader* const was = external_;
    if (want && want == was && external_due_ <= due)
    {
        follow_external(wake);
        return true;
    }
    external_ = nullptr;
    if (want && want != was)
        want->took_at_ = time_point::min(); // it takes the lead: no backlog of its own yet
    const bool led = want && want->lead_until(due, next_wake_time(*head));
    if (was && (was != want || !led))
        was->step_down();
    if (led)
    {
        external_ = want;
        external_due_ = due;
        follow_external(wake);
        return true;
    }
    if (leader_ == &external_)
        leader_ = nullptr;
    if (wake && leader_ == nullptr && !heap_.empty())
        available_.notify_one();
    return false;
}

template <class Clock>
void basic_delayed_work_queue<Clock>::follow_external(bool wake) noexcept
{
    const bool was_led = leader_ == &external_;
    leader_ = &external_;
    if (backup_ == nullptr)
    {
        if (!was_led && wake)
            available_.notify_one(); // a follower sleeping until woken becomes the backup
    }
    else if (backup_deadline() < backup_until_)
    {
        // The backup sleeps until a later head would be overdue: the followers wake, and one of
        // them is the backup for this head (a held-up leader holds it up no longer than that).
        // Once per hurry interval at most, so that heads moving earlier over and over (timeouts
        // armed and cancelled before a later one) do not wake it each time: until then, the
        // backup sleeps no longer than the interval. The far tier's marker always wakes it, or
        // far tasks would wait for the interval; it comes to the front only for a new earliest
        // far task or as the head in front of it leaves, and the backup then sleeps until it.
        if (heap_.front().task() != &marker_)
        {
            const time_point now = Clock::now();
            if (now < hurried_until_)
                return;
            hurried_until_ = detail::saturating_add(now, hurry_interval());
        }
        backup_until_ = time_point::min(); // once
        available_.notify_all();
    }
}

template <class Clock>
bool basic_delayed_work_queue<Clock>::reschedule(node& task, time_point due) noexcept
{
    std::lock_guard lock(mutex_);
    const std::optional<std::size_t> i = heap_.find(task);
    if (i && &task != &marker_)
    {
        const bool was_head = is_led_head(*i);
        const time_point was = heap_[*i].due;
        const std::optional<std::size_t> at = move_as_pushed(*i, task, due);
        if (at && is_led_head(*at) && due < was)
        {
            // An earlier head: the leader sleeps until a time that is now too late. (A later head
            // needs nobody woken: the leader wakes early, once, and sleeps again.)
            new_head_at(*at);
        }
        else if (was_head)
            head_left(); // a later head, perhaps another's
        return true;
    }
    // A far task moves within its shard, and the marker (in the main heap while the far tier
    // holds a task) earlier if need be: it then moves to the main heap when it must.
    const std::size_t number = far_number(task);
    if (number == 0 || number > shards_.size())
        return false;
    shard& s = *shards_[number - 1];
    std::lock_guard shard_lock(s.mutex);
    const std::optional<std::size_t> at = s.tasks.find(task);
    if (!at)
        return false;
    (void)s.tasks.move(*at, due);
    far_task_due(due);
    return true;
}

template <class Clock>
template <class LaterDue>
std::size_t basic_delayed_work_queue<Clock>::defer_heads(time_point before,
                                                         std::size_t max,
                                                         LaterDue later_due) noexcept
{
    std::lock_guard lock(mutex_);
    std::size_t moved = 0;
    for (; moved < max; ++moved)
    {
        const entry* const head = led_head(); // behind the far tier's marker, if need be
        if (!head || head->due > before)
            break;
        node& task = *head->task();
        const std::optional<time_point> due = later_due(task);
        if (!due || *due <= head->due)
            break;
        (void)move_as_pushed(*heap_.find(task), task, *due);
    }
    if (moved != 0)
        head_left(); // a later head, perhaps another's (as reschedule())
    return moved;
}

template <class Clock>
template <class OutputIt>
std::size_t basic_delayed_work_queue<Clock>::drain(OutputIt out, std::size_t max_tasks)
{
    std::lock_guard lock(mutex_);
    const time_point now = Clock::now();
    note_now(now);
    std::size_t moved = 0;
    try
    {
        while (moved < max_tasks)
        {
            move_far_tasks_if_due(now); // the marker may come to the front on the way
            if (heap_.empty() || !is_due(heap_.front().due, now) ||
                heap_.front().task() == &marker_)
                break;
            *out = heap_.front().task(); // first: if it throws, the task stays queued
            ++out;
            heap_.pop_front();
            ++moved;
        }
    }
    catch (...)
    {
        if (moved != 0)
            head_left();
        throw;
    }
    if (moved != 0)
        head_left();
    return moved;
}

template <class Clock>
template <class Predicate, class OutputIt>
std::size_t basic_delayed_work_queue<Clock>::remove_if(Predicate pred, OutputIt out)
{
    std::lock_guard lock(mutex_);
    if (!shards_.empty())
    {
        // Every far task to the main heap first, so that they come out in order with the rest.
        move_far_tasks(time_point::max());
        if (heap_.find(marker_)) // out of memory: some far tasks could not move
            throw std::bad_alloc();
    }
    const std::size_t removed = heap_.remove_if(pred, out);
    head_left(); // the head can only be later: see there
    return removed;
}

template <class Clock>
template <class OnRemove>
std::size_t basic_delayed_work_queue<Clock>::clear(OnRemove on_remove) noexcept
{
    // The heaps' arrays leave whole, and are walked once the lock is free.
    std::array<decltype(heap_.release()), max_far_shards + 1> taken;
    {
        std::lock_guard lock(mutex_);
        const shards_lock far(*this);
        taken[0] = heap_.release();
        for (std::size_t i = 0; i < shards_.size(); ++i)
            taken[i + 1] = shards_[i]->tasks.release();
        far_earliest_.store(duration::max().count(), std::memory_order_relaxed);
        if (external_)
            elect(true);
    }
    std::size_t cleared = 0;
    for (const auto& entries : taken)
    {
        for (const entry& e : entries)
        {
            if (e.task() != &marker_)
            {
                ++cleared;
                on_remove(*e.task());
            }
        }
    }
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
        note_now(now);
        move_far_tasks_if_due(now);
        if (!heap_.empty() && is_due(heap_.front().due, now) && heap_.front().task() != &marker_ &&
            !left_to_leader(now))
        {
            taken = take_front(on_take);
            break;
        }
        if (deadline <= now && deadline != time_point::max()) // max: never, even at the end of time
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
            // backup while an external leader has the head, until it is overdue by the grace or
            // the marker in front of it is due.
            time_point until = deadline;
            if (leader_ == &external_ && !heap_.empty() && (backup_ == nullptr || backup_ == self))
            {
                backup_ = self;
                until = std::min(until, backup_deadline());
                if (now < hurried_until_)
                    until = std::min(until, hurried_until_);
                backup_until_ = until;
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
            if (polls(heap_.front(), now))
            {
                // Not asleep: a new earlier head wakes a follower, if any, to lead it (a thread
                // polling alone sees it after this turn).
                const time_point due = std::min(deadline, heap_.front().due);
                lock.unlock();
                (void)detail::spin_until<Clock>(due);
                lock.lock();
            }
            else
                wait_until(lock, std::min(deadline, head_wake_time()));
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
        (void)detail::timed_wait(available_, lock, t);
}

template <class Clock>
void basic_delayed_work_queue<Clock>::wake_all() noexcept
{
    // Under the lock: a waiter that has just read the clock or the stop state is then blocked.
    std::lock_guard lock(mutex_);
    if constexpr (detail::notifying_clock<Clock>)
        note_now(Clock::now()); // a push right after the clock moves sees where it is
    available_.notify_all();
}

// ----- heap -----

template <class Clock>
std::size_t
basic_delayed_work_queue<Clock>::heap::push(node& task, time_point due, kept_place place)
{
    make_room(); // first: if it throws, nothing has changed
    const std::uint64_t order = place.value_ >> order_bits == renumberings_
                                    ? place.value_ & (order_limit - 1)
                                    : next_order();
    entries_.push_back(entry{});
    const std::size_t i = entries_.size() - 1;
    set(i, due, task, order);
    const std::size_t at = sift_up(i);
    check_invariants(at);
    return at;
}

template <class Clock>
std::size_t basic_delayed_work_queue<Clock>::heap::move(std::size_t i, time_point due) noexcept
{
    node& task = *entries_[i].task();
    const std::uint64_t order = next_order();
    i = position_of(task.place_.load(std::memory_order_relaxed)); // renumbering moves entries
    set(i, due, task, order);
    std::size_t at = sift_down(i);
    if (at == i)
        at = sift_up(i);
    check_invariants(at);
    return at;
}

template <class Clock>
std::size_t basic_delayed_work_queue<Clock>::heap::second_position() const noexcept
{
    std::size_t at = 0;
    const std::size_t last = std::min(entries_.size(), arity + 1);
    for (std::size_t i = 1; i < last; ++i)
        if (at == 0 || entries_[i].due < entries_[at].due)
            at = i;
    return at;
}

template <class Clock>
auto basic_delayed_work_queue<Clock>::heap::second_and_third_due() const noexcept
    -> std::pair<time_point, time_point>
{
    const std::size_t at = second_position();
    if (at == 0)
        return {time_point::max(), time_point::max()};
    // The third is another child of the front, or a child of the second.
    time_point third = time_point::max();
    const std::size_t last = std::min(entries_.size(), arity + 1);
    for (std::size_t i = 1; i < last; ++i)
        if (i != at)
            third = std::min(third, entries_[i].due);
    const std::size_t first = arity * at + 1;
    const std::size_t end = std::min(entries_.size(), first + arity);
    for (std::size_t i = first; i < end; ++i)
        third = std::min(third, entries_[i].due);
    return {entries_[at].due, third};
}

template <class Clock>
auto basic_delayed_work_queue<Clock>::heap::first_except(const node* skip) const noexcept
    -> const entry*
{
    if (entries_.empty())
        return nullptr;
    if (entries_.front().task() != skip)
        return &entries_.front();
    // The next one is among the front's children.
    const entry* best = nullptr;
    const std::size_t last = std::min(entries_.size(), arity + 1);
    for (std::size_t i = 1; i < last; ++i)
    {
        if (!best || earlier(entries_[i], *best))
            best = &entries_[i];
    }
    return best;
}

template <class Clock>
template <class Predicate, class OutputIt>
std::size_t basic_delayed_work_queue<Clock>::heap::remove_if(Predicate& pred, OutputIt& out)
{
    // Partition: kept entries to the front, matching ones to the back. If pred throws, the array
    // still holds every entry, and rebuilding restores the heap.
    const std::size_t n = entries_.size();
    std::size_t kept = 0;
    try
    {
        for (std::size_t i = 0; i < n; ++i)
        {
            if (!matches(pred, entries_[i]))
                std::swap(entries_[kept++], entries_[i]);
        }
    }
    catch (...)
    {
        rebuild();
        throw;
    }
    // Hand the matching ones out in queue order. If writing throws, the rest stay queued.
    std::sort(entries_.begin() + kept, entries_.end(), earlier);
    std::size_t written = kept;
    try
    {
        for (; written < n; ++written)
        {
            *out = entries_[written].task();
            ++out;
            entries_[written].task()->place_.store(recorded_due(entries_[written].due),
                                                   std::memory_order_relaxed);
        }
    }
    catch (...)
    {
        entries_.erase(entries_.begin() + kept, entries_.begin() + written);
        rebuild();
        throw;
    }
    entries_.truncate(kept);
    rebuild();
    return n - kept;
}

template <class Clock>
void basic_delayed_work_queue<Clock>::heap::place(std::size_t i, const entry& e) noexcept
{
    entries_[i] = e;
    record_place(i);
}

template <class Clock>
void basic_delayed_work_queue<Clock>::heap::record_place(std::size_t i) noexcept
{
    std::atomic<std::int64_t>& recorded = entries_[i].task()->place_;
    const std::uint64_t order_high = order_high_of(recorded.load(std::memory_order_relaxed));
    recorded.store(place_of(number_, i, order_high), std::memory_order_relaxed);
}

template <class Clock>
void basic_delayed_work_queue<Clock>::heap::renumber() noexcept
{
    std::sort(entries_.begin(), entries_.end(),
              [](const entry& a, const entry& b) { return order_of(a) < order_of(b); });
    for (std::size_t i = 0; i < entries_.size(); ++i)
        set(i, entries_[i].due, *entries_[i].task(), i);
    next_order_ = entries_.size();
    ++renumberings_;
    rebuild();
}

template <class Clock>
std::size_t basic_delayed_work_queue<Clock>::heap::sift_up(std::size_t i) noexcept
{
    const entry moving = entries_[i];
    while (i > 0)
    {
        const std::size_t parent = (i - 1) / arity;
        if (!earlier(moving, entries_[parent]))
            break;
        place(i, entries_[parent]);
        i = parent;
    }
    place(i, moving);
    return i;
}

template <class Clock>
std::size_t basic_delayed_work_queue<Clock>::heap::sift_down(std::size_t i) noexcept
{
    std::array<std::size_t, max_levels> moved; // what moved where
    std::size_t count = 0;
    const entry moving = entries_[i];
    const std::size_t n = entries_.size();
    for (;;)
    {
        const std::size_t first = arity * i + 1;
        if (first >= n)
            break;
        const std::size_t last = first + arity < n ? first + arity : n;
        std::size_t best = first;
        for (std::size_t c = first + 1; c < last; ++c)
        {
            if (earlier(entries_[c], entries_[best]))
                best = c;
        }
        if (!earlier(entries_[best], moving))
            break;
        entries_[i] = entries_[best];
        moved[count++] = i;
        i = best;
    }
    entries_[i] = moving;
    moved[count++] = i;
    for (std::size_t k = 0; k < count; ++k)
        record_place(moved[k]);
    return i;
}

template <class Clock>
void basic_delayed_work_queue<Clock>::heap::rebuild() noexcept
{
    for (std::size_t i = 0; i < entries_.size(); ++i)
        place(i, entries_[i]);
    if (entries_.size() > 1)
    {
        for (std::size_t i = (entries_.size() - 2) / arity + 1; i-- > 0;) // every parent, bottom up
            sift_down(i);
    }
    entries_.release_spare();
    check_invariants(0);
}

template <class Clock>
auto basic_delayed_work_queue<Clock>::heap::pop_front() noexcept -> node*
{
    node* const first = entries_.front().task();
    remove_at(0);
    return first;
}

template <class Clock>
void basic_delayed_work_queue<Clock>::heap::remove_at(std::size_t i) noexcept
{
    node* const task = entries_[i].task();
    const std::int64_t left_at = recorded_due(entries_[i].due);
    const entry last = entries_.back();
    entries_.pop_back();
    std::size_t at = i;
    if (i < entries_.size())
    {
        // The last entry fills the hole: sift it down, and up if it did not move down (either
        // tells its task where it ends).
        entries_[i] = last;
        at = sift_down(i);
        if (at == i)
            at = sift_up(i);
    }
    task->place_.store(left_at, std::memory_order_relaxed);
    if (entries_.has_spare()) [[unlikely]]
        entries_.release_spare();
    check_invariants(at);
}

template <class Clock>
void basic_delayed_work_queue<Clock>::heap::check_invariants(
    [[maybe_unused]] std::size_t touched) const noexcept
{
#if SCHED_HEAP_CHECKS
    // Everything for small heaps; around the entry that moved last for large ones, so that debug
    // builds stay usable with millions of tasks.
    constexpr std::size_t full_check_limit = 4096;
    const auto check = [this](std::size_t i) {
        const std::int64_t recorded = entries_[i].task()->place_.load(std::memory_order_relaxed);
        if (!is_place(recorded) || heap_number_of(recorded) != number_ ||
            position_of(recorded) != i)
        {
            std::fprintf(stderr, "sched: delayed_work_queue: task at %zu records place %lld\n", i,
                         static_cast<long long>(recorded));
            std::abort();
        }
        if (i > 0 && earlier(entries_[i], entries_[(i - 1) / arity]))
        {
            std::fprintf(stderr, "sched: delayed_work_queue: heap order broken at %zu\n", i);
            std::abort();
        }
    };
    if (entries_.size() <= full_check_limit)
    {
        for (std::size_t i = 0; i < entries_.size(); ++i)
            check(i);
    }
    else if (touched < entries_.size())
    {
        check(touched);
        for (std::size_t c = arity * touched + 1; c <= arity * touched + arity; ++c)
        {
            if (c < entries_.size())
                check(c);
        }
    }
#endif
}

} // namespace sched

SCHED_VISIBILITY_END

#endif // SCHED_IMPL_DELAYED_WORK_QUEUE_HPP
