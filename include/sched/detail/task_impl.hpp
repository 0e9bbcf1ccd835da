#ifndef SCHED_DETAIL_TASK_IMPL_HPP
#define SCHED_DETAIL_TASK_IMPL_HPP

#include <sched/tick.hpp>

#include <sched/detail/empty_callable.hpp>
#include <sched/detail/periodic_schedule.hpp>
#include <sched/detail/recycler.hpp>
#include <sched/detail/task.hpp>
#include <sched/detail/time.hpp>
#include <sched/detail/visibility.hpp>

#include <concepts>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <type_traits>
#include <utility>

SCHED_VISIBILITY_BEGIN

namespace sched::detail {

// A body that takes a std::stop_token is told through it when its task is cancelled with
// interruption or its pool stops; it is preferred over a call without arguments.
template <class F>
concept takes_stop_token = std::invocable<F&, std::stop_token>;

template <class F>
struct task_result
{
    using type = std::invoke_result_t<F&>;
};

template <takes_stop_token F>
struct task_result<F>
{
    using type = std::invoke_result_t<F&, std::stop_token>;
};

// What a task made from the callable F returns.
template <class F>
using task_result_t = typename task_result<std::decay_t<F>>::type;

template <class F>
concept task_body = std::move_constructible<std::decay_t<F>> &&
    (std::invocable<std::decay_t<F>&> || takes_stop_token<std::decay_t<F>>);

// A periodic body may also take its run's tick (basic_tick), and then a std::stop_token.
template <class F, class Tick>
concept takes_tick = std::invocable<F&, const Tick&>;

template <class F, class Tick>
concept takes_tick_and_stop_token = std::invocable<F&, const Tick&, std::stop_token>;

template <class F, class Tick>
concept periodic_body = task_body<F> ||
    (std::move_constructible<std::decay_t<F>> &&
     (takes_tick<std::decay_t<F>, Tick> || takes_tick_and_stop_token<std::decay_t<F>, Tick>));

// The tick type of a body that is not periodic: it takes none.
struct no_tick
{};

template <class F, class Tick>
inline constexpr bool wants_stop_token = takes_stop_token<F> || takes_tick_and_stop_token<F, Tick>;

struct no_stop_source
{};

// The stop source of a body that takes a std::stop_token; nothing for one that does not.
template <class F, class Tick = no_tick>
using stop_source_for =
    std::conditional_t<wants_stop_token<F, Tick>, std::stop_source, no_stop_source>;

// Calls `body`, passing a body that takes one a stop token from `own`, which is also asked to
// stop while `runner_stop` is.
template <class F, class Source>
decltype(auto) invoke_body(F& body, Source& own, const std::stop_token& runner_stop)
{
    if constexpr (takes_stop_token<F>)
    {
        std::stop_callback forward_stop(runner_stop, [&own]() noexcept { own.request_stop(); });
        return std::invoke(body, own.get_token());
    }
    else
        return std::invoke(body);
}

// Calls a periodic `body` for the run that `tick` describes: with the tick if it takes one (and
// then a stop token, as invoke_body() does), else as invoke_body() does.
template <class F, class Source, class Tick>
decltype(auto)
invoke_periodic(F& body, Source& own, const std::stop_token& runner_stop, const Tick& tick)
{
    if constexpr (takes_tick_and_stop_token<F, Tick>)
    {
        std::stop_callback forward_stop(runner_stop, [&own]() noexcept { own.request_stop(); });
        return std::invoke(body, tick, own.get_token());
    }
    else if constexpr (takes_tick<F, Tick>)
        return std::invoke(body, tick);
    else
        return invoke_body(body, own, runner_stop);
}

// What a periodic body F returns (it must be void).
template <class F, class Tick>
using periodic_result_t =
    decltype(invoke_periodic(std::declval<std::decay_t<F>&>(),
                             std::declval<stop_source_for<std::decay_t<F>, Tick>&>(),
                             std::declval<const std::stop_token&>(),
                             std::declval<const Tick&>()));

// The body of a function submitted through the pool's Asio executor (see
// task::is_executor_function()).
template <class F>
struct executor_function
{
    F f;

    void operator()() { f(); }
};

// A function submitted with an allocator of its own (a handler's, say): it lives in memory from
// that allocator, and moves out of it, giving the memory back, before it is called, as Asio
// requires (the call may free what the allocator draws on). The node holding this is the pool's.
template <class F, class Allocator>
class allocated_function
{
    using allocator_type = typename std::allocator_traits<Allocator>::template rebind_alloc<F>;
    using traits = std::allocator_traits<allocator_type>;

public:
    template <class G>
    allocated_function(const Allocator& a, G&& f) : alloc_(a), f_(traits::allocate(alloc_, 1))
    {
        try
        {
            traits::construct(alloc_, std::to_address(f_), std::forward<G>(f));
        }
        catch (...)
        {
            traits::deallocate(alloc_, f_, 1);
            throw;
        }
    }

    allocated_function(allocated_function&& other) noexcept
        : alloc_(other.alloc_), f_(std::exchange(other.f_, nullptr))
    {}

    allocated_function& operator=(allocated_function&&) = delete;

    ~allocated_function()
    {
        if (f_) // never called
            free();
    }

    void operator()()
    {
        F local(std::move(*f_));
        free();
        local();
    }

    // The function, until it is called or moved from.
    F& get() const noexcept { return *f_; }
    explicit operator bool() const noexcept { return f_ != nullptr; }

private:
    void free() noexcept
    {
        traits::destroy(alloc_, std::to_address(f_));
        traits::deallocate(alloc_, std::exchange(f_, nullptr), 1);
    }

    allocator_type alloc_;
    typename traits::pointer f_;
};

// A submitted function as its node holds it: in place with std::allocator, the default, or with
// the recycler (the node is the pool's memory), else in memory from the submitter's allocator.
template <class Allocator, class F>
allocated_function<std::decay_t<F>, Allocator> stored_with(const Allocator& a, F&& f)
{
    return {a, std::forward<F>(f)};
}

template <class T, class F>
std::decay_t<F> stored_with(const std::allocator<T>&, F&& f)
{
    return std::forward<F>(f);
}

// The recycler is the nodes' own memory: a completion hopping from a scheduler brings it.
template <class T, class F>
std::decay_t<F> stored_with(const recycling_allocator<T>&, F&& f)
{
    return std::forward<F>(f);
}

template <class F>
inline constexpr bool is_executor_function_v = false;

template <class F>
inline constexpr bool is_executor_function_v<executor_function<F>> = true;

struct no_schedule
{};

// The concrete task: body F returning R; Periodic tasks re-run as their periodic_schedule says.
// Its memory comes from Allocator, rebound to the task, which it keeps to give the memory back.
template <class F, class R, class Clock, bool Periodic, class Allocator = recycling_allocator<void>>
class task_impl final : public result_task<R, Clock>
{
    using allocator_type =
        typename std::allocator_traits<Allocator>::template rebind_alloc<task_impl>;
    using allocator_traits = std::allocator_traits<allocator_type>;
    using tick_type = std::conditional_t<Periodic, basic_tick<Clock>, no_tick>;

public:
    using time_point = typename Clock::time_point;
    using duration = typename Clock::duration;
    using schedule_type = std::conditional_t<Periodic, periodic_schedule<Clock>, no_schedule>;
    using kept_place = typename task<Clock>::kept_place;

    // The only way to make one: allocates the task with `a`, then constructs it there.
    template <class G>
    static task_impl* create(const Allocator& a,
                             G&& body,
                             period_kind kind,
                             const schedule_type& schedule,
                             std::uint32_t refs,
                             owner_registry::number owner)
    {
        allocator_type alloc(a);
        const typename allocator_traits::pointer p = allocator_traits::allocate(alloc, 1);
        try
        {
            return ::new (static_cast<void*>(std::to_address(p)))
                task_impl(alloc, std::forward<G>(body), kind, schedule, refs, owner);
        }
        catch (...)
        {
            allocator_traits::deallocate(alloc, p, 1);
            throw;
        }
    }

    run_outcome run(std::stop_token runner_stop) noexcept override
    {
        // Cancelled after its runner took it (during the pool's before_execute hook, say): it does
        // not run, as Java's FutureTask.run checks.
        if (this->state() != future_state::pending)
            return {};
        // The body is destroyed before the outcome is stored in its place.
        try
        {
            if constexpr (Periodic)
            {
                // Planned by due_after_all(), unless it runs outside its pool (a task handle's
                // run, or the caller's under caller_runs, never queued): then it runs, due when
                // its schedule planned it.
                std::optional<tick_type> tick = std::exchange(tick_, std::nullopt);
                if (!tick)
                    tick = schedule_.begin(schedule_.due(), Clock::now(), false);
                invoke_periodic(storage_.body, stop_, runner_stop, *tick);
                schedule_.succeeded();
            }
            else if constexpr (std::is_void_v<R>)
            {
                invoke(runner_stop);
                this->release_body();
                this->set_value();
            }
            else
            {
                R value = invoke(runner_stop);
                this->release_body();
                if (std::exception_ptr e = this->set_value(std::move(value)))
                    return {std::move(e)};
            }
            return {};
        }
        catch (...)
        {
            std::exception_ptr e = std::current_exception();
            if constexpr (Periodic)
            {
                if (!schedule_.ends_with_failure())
                    return {std::move(e)}; // its failure policy keeps it running
            }
            fail(e);
            return {std::move(e)};
        }
    }

    void fail(std::exception_ptr e) noexcept override
    {
        this->release_body();
        this->set_exception(std::move(e));
    }

    void keep_place(kept_place place) noexcept override
    {
        if constexpr (Periodic)
            place_ = place;
    }

    kept_place place_kept() const noexcept override
    {
        if constexpr (Periodic)
            return place_;
        else
            return {};
    }

    time_point next_due(time_point ended) noexcept override
    {
        if constexpr (Periodic)
            return schedule_.next_due(ended);
        else
            return time_point::max();
    }

    // A periodic run that its missed-tick policy skips is not due after all: the runner queues
    // it again at next_due() without running it (or its pool's hooks).
    bool due_after_all() noexcept override
    {
        if constexpr (Periodic)
        {
            tick_ = schedule_.begin(this->due_time(), Clock::now());
            return tick_.has_value();
        }
        else
            return true;
    }

private:
    template <class G>
    task_impl(const allocator_type& alloc,
              G&& body,
              period_kind kind,
              const schedule_type& schedule,
              std::uint32_t refs,
              owner_registry::number owner)
        : result_task<R, Clock>(kind, refs, owner), schedule_(schedule), alloc_(alloc)
    {
        ::new (static_cast<void*>(&storage_.body)) F(std::forward<G>(body));
        if constexpr (std::is_trivially_destructible_v<F>)
            this->note_trivial_body();
    }

    ~task_impl() override
    {
        if (!this->body_released())
            storage_.body.~F();
        else
            this->destroy_outcome();
    }

    decltype(auto) invoke(const std::stop_token& runner_stop)
    {
        return invoke_body(storage_.body, stop_, runner_stop);
    }

    void request_stop() noexcept override
    {
        if constexpr (wants_stop_token<F, tick_type>)
            stop_.request_stop();
    }

    bool is_executor_function() const noexcept override { return is_executor_function_v<F>; }

    void destroy_body() noexcept override { storage_.body.~F(); }
    void destroy() noexcept override
    {
        allocator_type alloc(alloc_);
        const typename allocator_traits::pointer p =
            std::pointer_traits<typename allocator_traits::pointer>::pointer_to(*this);
        this->~task_impl();
        allocator_traits::deallocate(alloc, p, 1);
    }
    void* outcome() noexcept override { return &storage_; }

    // The body from construction until release_body(); then, once the task completes, its value
    // or exception (see result_task).
    union storage
    {
        storage() {}
        ~storage() {}
        F body;
        std::conditional_t<std::is_void_v<R>, std::exception_ptr, R> value;
        std::exception_ptr error;
    } storage_;
    [[no_unique_address]] stop_source_for<F, tick_type> stop_;
    [[no_unique_address]] schedule_type schedule_;
    // The run that due_after_all() planned, until it runs.
    [[no_unique_address]] std::conditional_t<Periodic, std::optional<tick_type>, no_tick> tick_{};
    [[no_unique_address]] std::conditional_t<Periodic, kept_place, no_kept_place> place_{};
    [[no_unique_address]] allocator_type alloc_;
};

// A body run through a wrapper from the pool's decorate_task hook. The wrapper gets a callable
// that runs the body and must call it exactly once. What the body throws passes through the
// wrapper; if the wrapper swallows it, the task fails with it all the same.
template <class F, class Wrapper>
class decorated
{
public:
    decorated(F body, Wrapper wrapper) : body_(std::move(body)), wrapper_(std::move(wrapper)) {}

    template <class... Args>
    requires std::invocable<F&, Args...> std::invoke_result_t<F&, Args...>
    operator()(Args&&... args)
    {
        using result = std::invoke_result_t<F&, Args...>;
        std::conditional_t<std::is_void_v<result>, bool, std::optional<result>> outcome{};
        std::exception_ptr error;
        int calls = 0;
        auto run = [&] {
            if (++calls > 1) // the body runs at most once a run, whatever the wrapper does
                throw std::logic_error(twice);
            try
            {
                if constexpr (std::is_void_v<result>)
                {
                    std::invoke(body_, std::forward<Args>(args)...);
                    outcome = true;
                }
                else
                    outcome.emplace(std::invoke(body_, std::forward<Args>(args)...));
            }
            catch (...)
            {
                error = std::current_exception();
                throw;
            }
        };
        wrapper_(std::function<void()>(std::ref(run))); // a reference: no allocation
        if (calls > 1)
            throw std::logic_error(twice);
        if (error)
            std::rethrow_exception(error);
        if (calls == 0 || !outcome)
            throw std::logic_error("sched: a task wrapper from decorate_task did not run its task");
        if constexpr (!std::is_void_v<result>)
            return std::move(*outcome);
    }

    // The body, whose associated executor is the decorated task's (see async_task.hpp).
    const F& body() const noexcept { return body_; }

private:
    static constexpr const char* twice =
        "sched: a task wrapper from decorate_task ran its task twice";

    F body_;
    Wrapper wrapper_;
};

// A body called without arguments even though it could take a std::stop_token: an Asio
// executor's function is called as f().
template <class F>
struct without_stop_token
{
    F f;

    void operator()() { f(); }
};

} // namespace sched::detail

SCHED_VISIBILITY_END

#endif // SCHED_DETAIL_TASK_IMPL_HPP
