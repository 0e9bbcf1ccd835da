#ifndef SCHED_POOL_EXECUTOR_HPP
#define SCHED_POOL_EXECUTOR_HPP

#include <sched/scheduled_thread_pool.hpp>

#include <sched/detail/visibility.hpp>

#include <boost/asio/execution.hpp>

#include <cstddef>
#include <memory>

SCHED_VISIBILITY_BEGIN

namespace sched {
namespace detail {

// The executor's properties: those in Bits change its type, those in bits_ do not (as in
// boost::asio::thread_pool).
struct pool_executor_bits
{
    static constexpr unsigned int blocking_never = 1;
    static constexpr unsigned int blocking_always = 2;
    static constexpr unsigned int blocking_mask = 3;
    static constexpr unsigned int relationship_continuation = 4;
    static constexpr unsigned int outstanding_work_tracked = 8;
};

} // namespace detail

/// The Boost.Asio executor of a basic_scheduled_thread_pool: runs functions on its workers.
/**
 * Modelled on boost::asio::thread_pool::executor_type, so that boost::asio::post, dispatch,
 * defer, co_spawn, boost::asio::strand, boost::asio::any_io_executor and executor_work_guard work
 * on the pool. Get one from basic_scheduled_thread_pool::get_executor(); change its properties
 * with boost::asio::require or boost::asio::prefer and read them with boost::asio::query:
 *
 * - `execution::blocking`: `possibly` (the default) runs the function inside execute() when
 *   called on one of the pool's workers, and queues it otherwise; `never` always queues it;
 *   `always` runs it inside execute() on a worker, and otherwise queues it and returns once it
 *   has run (or has been destroyed without running, see below).
 * - `execution::relationship`: `fork` (the default) or `continuation`. Reported, but a
 *   continuation is queued like any other function.
 * - `execution::outstanding_work`: `untracked` (the default) or `tracked`. A tracked executor
 *   counts as pending work of the pool for as long as it exists: after shutdown(), the pool does
 *   not terminate while one is left (executor_work_guard and co_spawn hold one).
 * - `execution::allocator`: allocates the memory that holds each queued function, which is
 *   given back before the function is called (as Asio requires: the call may free what the
 *   allocator draws on). With the default, std::allocator, the function lives in its node, which
 *   comes from the pool's per-thread cache of task memory, as the nodes always do.
 * - `execution::context` (the pool), `execution::occupancy` (its number of threads) and
 *   `execution::mapping` (`thread`) can be queried only.
 *
 * A queued function runs on a worker like a task due now: after the tasks due before it, and
 * with the pool's decorate_task, before_execute and after_execute hooks. A function run inside
 * execute() runs as part of its caller, without hooks of its own. Either way, what it throws goes
 * to the after_execute hook and to the pool's error_sink (or std::cerr without one), neither to
 * the caller nor out of the worker.
 *
 * @par Shutdown
 * The pool's shutdown() stops scheduling, not the executor: it still accepts functions and runs
 * them, whatever the pool's policies say, since they continue work the pool accepted (a strand's
 * next handler, a coroutine's next step). The pool terminates once no task, function or tracked
 * executor is pending. Once a shut-down pool has run out of work, or shutdown_now() or the
 * destructor has stopped the pool, a submitted function is destroyed without being invoked,
 * before the submitting call returns (as an Asio execution context that has shut down destroys
 * it); except one that `blocking.possibly` or `always` runs inside execute(), on a worker
 * still finishing its run (as on a thread of Asio's thread_pool). A function submitted just as a
 * shut-down pool runs out of work is either counted before the pool becomes idle, and then runs, or
 * destroyed: it is never left in the queue of a pool without workers. Functions still queued when
 * the pool stops are destroyed without being invoked before shutdown_now() (or the destructor)
 * returns; they are not among the tasks it hands back, since one may hold this pool's own
 * executor (a strand's next turn, a coroutine's next step).
 *
 * @par Lifetime
 * An executor must not be used once its pool's destruction has begun; a tracked executor must be
 * destroyed before then.
 *
 * @tparam Clock The pool's clock.
 * @tparam Allocator The allocator of the memory that holds queued functions.
 * @tparam Bits The properties that are part of the type (blocking.always, outstanding_work).
 *
 * @par Thread safety
 * Distinct objects: Safe. Shared objects: Safe, except for assignment.
 */
template <class Clock, class Allocator, unsigned int Bits>
class basic_pool_executor : detail::pool_executor_bits
{
public:
    /// The pool the executor submits to.
    using pool_type = basic_scheduled_thread_pool<Clock>;

    /// A copy; a tracked copy is more pending work.
    basic_pool_executor(const basic_pool_executor& other) noexcept
        : pool_(other.pool_), allocator_(other.allocator_), bits_(other.bits_)
    {
        if constexpr (tracked)
            start_work();
    }

    /// Takes over @p other, which is left unusable if tracked.
    basic_pool_executor(basic_pool_executor&& other) noexcept
        : pool_(other.pool_), allocator_(std::move(other.allocator_)), bits_(other.bits_)
    {
        if constexpr (tracked)
            other.pool_ = nullptr;
    }

    /// A tracked executor's pending work ends.
    ~basic_pool_executor()
    {
        if constexpr (tracked)
            finish_work();
    }

    basic_pool_executor& operator=(const basic_pool_executor& other) noexcept;
    basic_pool_executor& operator=(basic_pool_executor&& other) noexcept;

    /// The same executor with `blocking.possibly`. (For boost::asio::require and prefer.)
    basic_pool_executor<Clock, Allocator, Bits & ~blocking_mask>
    require(boost::asio::execution::blocking_t::possibly_t) const
    {
        return {pool_, allocator_, bits_ & ~blocking_mask};
    }

    /// The same executor with `blocking.always`. (For boost::asio::require and prefer.)
    basic_pool_executor<Clock, Allocator, (Bits & ~blocking_mask) | blocking_always>
    require(boost::asio::execution::blocking_t::always_t) const
    {
        return {pool_, allocator_, bits_ & ~blocking_mask};
    }

    /// The same executor with `blocking.never`. (For boost::asio::require and prefer.)
    basic_pool_executor<Clock, Allocator, Bits & ~blocking_mask>
    require(boost::asio::execution::blocking_t::never_t) const
    {
        return {pool_, allocator_, (bits_ & ~blocking_mask) | blocking_never};
    }

    /// The same executor with `relationship.fork`. (For boost::asio::require and prefer.)
    basic_pool_executor require(boost::asio::execution::relationship_t::fork_t) const
    {
        return {pool_, allocator_, bits_ & ~relationship_continuation};
    }

    /// The same executor with `relationship.continuation`. (For boost::asio::require and
    /// prefer.)
    basic_pool_executor require(boost::asio::execution::relationship_t::continuation_t) const
    {
        return {pool_, allocator_, bits_ | relationship_continuation};
    }

    /// The same executor with `outstanding_work.tracked`. (For boost::asio::require and prefer.)
    basic_pool_executor<Clock, Allocator, Bits | outstanding_work_tracked>
    require(boost::asio::execution::outstanding_work_t::tracked_t) const
    {
        return {pool_, allocator_, bits_};
    }

    /// The same executor with `outstanding_work.untracked`. (For boost::asio::require and
    /// prefer.)
    basic_pool_executor<Clock, Allocator, Bits & ~outstanding_work_tracked>
    require(boost::asio::execution::outstanding_work_t::untracked_t) const
    {
        return {pool_, allocator_, bits_};
    }

    /// The same executor allocating with `a.value()`. (For boost::asio::require and prefer.)
    template <class OtherAllocator>
    basic_pool_executor<Clock, OtherAllocator, Bits>
    require(boost::asio::execution::allocator_t<OtherAllocator> a) const
    {
        return {pool_, a.value(), bits_};
    }

    /// The same executor allocating with std::allocator. (For boost::asio::require and prefer.)
    basic_pool_executor<Clock, std::allocator<void>, Bits>
    require(boost::asio::execution::allocator_t<void>) const
    {
        return {pool_, std::allocator<void>(), bits_};
    }

    /// `mapping.thread`: functions run on the pool's threads. (For boost::asio::query.)
    static constexpr boost::asio::execution::mapping_t
    query(boost::asio::execution::mapping_t) noexcept
    {
        return boost::asio::execution::mapping.thread;
    }

    /// The pool. (For boost::asio::query.)
    pool_type& query(boost::asio::execution::context_t) const noexcept { return *pool_; }

    /// `blocking.possibly`, `always` or `never`. (For boost::asio::query.)
    constexpr boost::asio::execution::blocking_t
    query(boost::asio::execution::blocking_t) const noexcept
    {
        if ((bits_ & blocking_never) != 0)
            return boost::asio::execution::blocking.never;
        if constexpr ((Bits & blocking_always) != 0)
            return boost::asio::execution::blocking.always;
        else
            return boost::asio::execution::blocking.possibly;
    }

    /// `relationship.fork` or `continuation`. (For boost::asio::query.)
    constexpr boost::asio::execution::relationship_t
    query(boost::asio::execution::relationship_t) const noexcept
    {
        if ((bits_ & relationship_continuation) != 0)
            return boost::asio::execution::relationship.continuation;
        return boost::asio::execution::relationship.fork;
    }

    /// `outstanding_work.tracked` or `untracked`. (For boost::asio::query.)
    static constexpr boost::asio::execution::outstanding_work_t
    query(boost::asio::execution::outstanding_work_t) noexcept
    {
        if constexpr (tracked)
            return boost::asio::execution::outstanding_work.tracked;
        else
            return boost::asio::execution::outstanding_work.untracked;
    }

    /// The allocator. (For boost::asio::query.)
    template <class OtherAllocator>
    constexpr Allocator query(boost::asio::execution::allocator_t<OtherAllocator>) const noexcept
    {
        return allocator_;
    }

    /// The allocator. (For boost::asio::query.)
    constexpr Allocator query(boost::asio::execution::allocator_t<void>) const noexcept
    {
        return allocator_;
    }

    /// The pool's number of threads. (For boost::asio::query.)
    std::size_t query(boost::asio::execution::occupancy_t) const noexcept
    {
        return pool_->thread_count();
    }

    /// Whether the calling thread is one of the pool's workers.
    bool running_in_this_thread() const noexcept;

    /// Whether @p a and @p b submit to the same pool with the same allocator and properties.
    friend bool operator==(const basic_pool_executor& a, const basic_pool_executor& b) noexcept
    {
        return a.pool_ == b.pool_ && a.allocator_ == b.allocator_ && a.bits_ == b.bits_;
    }

    /// Whether @p a and @p b differ in pool, allocator or properties.
    friend bool operator!=(const basic_pool_executor& a, const basic_pool_executor& b) noexcept
    {
        return !(a == b);
    }

    /// Runs @p f, a function called as `f()`, as the `blocking` property says.
    /**
     * @throws What allocating the function's node, moving or copying @p f, or the pool's
     * decorate_task hook throws (nothing is queued then); never what @p f throws.
     */
    template <class Function>
    void execute(Function&& f) const;

#if !defined(BOOST_ASIO_NO_TS_EXECUTORS)
    /// The pool.
    pool_type& context() const noexcept
    {
        return *pool_;
    }

    /// Counts pending work, as a tracked executor does, until on_work_finished().
    void on_work_started() const noexcept;

    /// Ends pending work counted by on_work_started().
    void on_work_finished() const noexcept;

    /// Runs @p f at once if called on one of the pool's workers, else queues it.
    /** @param a Allocates the node of a queued @p f. */
    template <class Function, class OtherAllocator>
    void dispatch(Function&& f, const OtherAllocator& a) const;

    /// Queues @p f.
    /** @param a Allocates the node of @p f. */
    template <class Function, class OtherAllocator>
    void post(Function&& f, const OtherAllocator& a) const;

    /// Queues @p f, like post().
    /** @param a Allocates the node of @p f. */
    template <class Function, class OtherAllocator>
    void defer(Function&& f, const OtherAllocator& a) const;
#endif // !defined(BOOST_ASIO_NO_TS_EXECUTORS)

private:
    friend pool_type;
    template <class, class, unsigned int>
    friend class basic_pool_executor;

    static constexpr bool tracked = (Bits & outstanding_work_tracked) != 0;

    explicit basic_pool_executor(pool_type& pool) noexcept
        : basic_pool_executor(&pool, Allocator(), 0)
    {}

    basic_pool_executor(pool_type* pool, const Allocator& a, unsigned int bits) noexcept
        : pool_(pool), allocator_(a), bits_(bits)
    {
        if constexpr (tracked)
            start_work();
    }

    void start_work() const noexcept;
    void finish_work() const noexcept;

    // Runs f on this thread, as part of the caller's run; what it throws goes to after_execute.
    template <class Function>
    void invoke_here(Function&& f) const;

    pool_type* pool_; // null only in a moved-from tracked executor
    [[no_unique_address]] Allocator allocator_;
    unsigned int bits_;
};

} // namespace sched

#include <sched/impl/pool_executor.hpp>

SCHED_VISIBILITY_END

#endif // SCHED_POOL_EXECUTOR_HPP
