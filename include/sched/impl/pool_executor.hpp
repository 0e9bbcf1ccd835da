#ifndef SCHED_IMPL_POOL_EXECUTOR_HPP
#define SCHED_IMPL_POOL_EXECUTOR_HPP

#include <sched/pool_executor.hpp>
#include <sched/scheduled_thread_pool.hpp>

#include <sched/detail/visibility.hpp>

#include <condition_variable>
#include <exception>
#include <mutex>
#include <type_traits>
#include <utility>

SCHED_VISIBILITY_BEGIN

namespace sched {
namespace detail {

// Told once, from any thread; wait() returns once it has been.
class completion_signal
{
public:
    void notify() noexcept
    {
        // Notify under the lock: the waiter may destroy the signal as soon as it has the lock
        // back, so nothing here may touch it after unlocking.
        std::lock_guard lock(mutex_);
        done_ = true;
        done_cv_.notify_all();
    }

    void wait()
    {
        std::unique_lock lock(mutex_);
        done_cv_.wait(lock, [this] { return done_; });
    }

private:
    std::mutex mutex_;
    std::condition_variable done_cv_;
    bool done_ = false;
};

// A blocking.always submission: calls the submitter's function in place, and tells the waiting
// submitter once it is destroyed, whether it ran or was dropped unrun.
template <class F>
class blocking_call
{
public:
    blocking_call(F& f, completion_signal& done) noexcept : f_(&f), done_(&done) {}

    blocking_call(blocking_call&& other) noexcept
        : f_(other.f_), done_(std::exchange(other.done_, nullptr))
    {}

    blocking_call& operator=(blocking_call&&) = delete;

    ~blocking_call()
    {
        if (done_)
            done_->notify();
    }

    void operator()() { (*f_)(); }

private:
    F* f_;
    completion_signal* done_; // null once moved from
};

} // namespace detail

template <class Clock, class Allocator, unsigned int Bits>
auto basic_pool_executor<Clock, Allocator, Bits>::operator=(
    const basic_pool_executor& other) noexcept -> basic_pool_executor&
{
    if (this != &other)
    {
        // `old` gives back a tracked executor's work only after the new work is counted, so that
        // a pool assigned to itself cannot seem idle in between.
        basic_pool_executor old(std::move(*this));
        pool_ = other.pool_;
        allocator_ = other.allocator_;
        bits_ = other.bits_;
        if constexpr (tracked)
            start_work();
    }
    return *this;
}

template <class Clock, class Allocator, unsigned int Bits>
auto basic_pool_executor<Clock, Allocator, Bits>::operator=(basic_pool_executor&& other) noexcept
    -> basic_pool_executor&
{
    if (this != &other)
    {
        basic_pool_executor old(std::move(*this));
        pool_ = other.pool_;
        allocator_ = std::move(other.allocator_);
        bits_ = other.bits_;
        if constexpr (tracked)
            other.pool_ = nullptr;
    }
    return *this;
}

template <class Clock, class Allocator, unsigned int Bits>
bool basic_pool_executor<Clock, Allocator, Bits>::running_in_this_thread() const noexcept
{
    return pool_->runs_this_thread();
}

template <class Clock, class Allocator, unsigned int Bits>
template <class Function>
void basic_pool_executor<Clock, Allocator, Bits>::execute(Function&& f) const
{
    if ((bits_ & blocking_never) == 0 && pool_->runs_this_thread())
        invoke_here(std::forward<Function>(f));
    else if constexpr ((Bits & blocking_always) != 0)
    {
        std::decay_t<Function> function(std::forward<Function>(f));
        detail::completion_signal done;
        pool_->queue_function(detail::blocking_call<std::decay_t<Function>>(function, done),
                              allocator_);
        done.wait();
    }
    else
        pool_->queue_function(std::forward<Function>(f), allocator_);
}

#if !defined(BOOST_ASIO_NO_TS_EXECUTORS)
template <class Clock, class Allocator, unsigned int Bits>
void basic_pool_executor<Clock, Allocator, Bits>::on_work_started() const noexcept
{
    start_work();
}

template <class Clock, class Allocator, unsigned int Bits>
void basic_pool_executor<Clock, Allocator, Bits>::on_work_finished() const noexcept
{
    finish_work();
}

template <class Clock, class Allocator, unsigned int Bits>
template <class Function, class OtherAllocator>
void basic_pool_executor<Clock, Allocator, Bits>::dispatch(Function&& f,
                                                           const OtherAllocator& a) const
{
    if (pool_->runs_this_thread())
        invoke_here(std::forward<Function>(f));
    else
        pool_->queue_function(std::forward<Function>(f), a);
}

template <class Clock, class Allocator, unsigned int Bits>
template <class Function, class OtherAllocator>
void basic_pool_executor<Clock, Allocator, Bits>::post(Function&& f, const OtherAllocator& a) const
{
    pool_->queue_function(std::forward<Function>(f), a);
}

template <class Clock, class Allocator, unsigned int Bits>
template <class Function, class OtherAllocator>
void basic_pool_executor<Clock, Allocator, Bits>::defer(Function&& f, const OtherAllocator& a) const
{
    pool_->queue_function(std::forward<Function>(f), a);
}
#endif // !defined(BOOST_ASIO_NO_TS_EXECUTORS)

template <class Clock, class Allocator, unsigned int Bits>
void basic_pool_executor<Clock, Allocator, Bits>::start_work() const noexcept
{
    // Counted even if the pool has gone idle: finish_work() gives it back all the same.
    if (pool_)
        pool_->take_pending();
}

template <class Clock, class Allocator, unsigned int Bits>
void basic_pool_executor<Clock, Allocator, Bits>::finish_work() const noexcept
{
    if (pool_)
        pool_->finish_pending();
}

template <class Clock, class Allocator, unsigned int Bits>
template <class Function>
void basic_pool_executor<Clock, Allocator, Bits>::invoke_here(Function&& f) const
{
    // A local, non-const copy, as Asio makes: f may be a const lvalue.
    std::decay_t<Function> function(std::forward<Function>(f));
    try
    {
        function();
    }
    catch (...)
    {
        pool_->after_inline_run(std::current_exception());
    }
}

} // namespace sched

SCHED_VISIBILITY_END

#endif // SCHED_IMPL_POOL_EXECUTOR_HPP
