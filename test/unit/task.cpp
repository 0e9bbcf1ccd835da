// detail::task: how a cancel, the task's owner and whoever holds the task hand over. A cancel
// that wins stays in a transient state until its owner has been told, and a holder lets go of the
// task only after that: the owner (a pool) may be destroyed once the holder has.

#include <sched/manual_clock.hpp>

#include <sched/detail/task.hpp>
#include <sched/detail/task_impl.hpp>

#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <optional>
#include <semaphore>
#include <thread>

#include "support/counter.hpp"
#include "support/wait.hpp"

using namespace std::chrono_literals;
using sched::future_state;
using sched::test::counter;
using sched::test::eventually;
using sched::test::within;

namespace {

using clock_type = sched::manual_clock;
using task_type = sched::detail::task<clock_type>;

// An owner whose on_cancelled() holds the cancelling thread until the test lets it go on.
class holding_owner final : public sched::detail::task_owner<clock_type>
{
public:
    void on_cancelled(task_type& t, bool caller_holds) noexcept override
    {
        told_caller_holds.store(caller_holds);
        told.increment();
        may_go_on.acquire();
        t.end_cancel();
    }

    void finish_run(task_type&, std::exception_ptr) noexcept override {}

    std::optional<clock_type::time_point> queued_due_time(const task_type&) const noexcept override
    {
        return std::nullopt; // it queues nothing
    }

    bool may_run(const task_type&) const noexcept override { return true; }

    counter told;
    std::atomic<bool> told_caller_holds{false};
    std::binary_semaphore may_go_on{0};
    // The number its tasks name it by.
    const sched::detail::registered_owner registration{
        static_cast<sched::detail::task_owner<clock_type>*>(this)};
};

struct nothing
{
    void operator()() const {}
};

// A one-shot task owned by `owner`, with `refs` references: the test's.
task_type* make_task(const holding_owner& owner, std::uint32_t refs = 1)
{
    using impl = sched::detail::task_impl<nothing, void, clock_type, false>;
    return impl::create({}, nothing{}, sched::detail::period_kind::one_shot,
                        sched::detail::no_schedule{}, refs, owner.registration.number());
}

// A callable that counts the copies of itself alive.
struct counted_callable
{
    explicit counted_callable(std::atomic<int>& live) : live(&live) { live.fetch_add(1); }
    counted_callable(const counted_callable& other) : live(other.live) { live->fetch_add(1); }
    counted_callable& operator=(const counted_callable&) = delete;
    ~counted_callable() { live->fetch_sub(1); }
    void operator()() const {}
    std::atomic<int>* live;
};

} // namespace

BOOST_AUTO_TEST_SUITE(test_task)

// Issue 6's W2: a pending one-shot task holding a one-pointer capture, with its heap entry (16
// bytes) and the caller's future (8), in 56 bytes. The base: the vtable pointer, the queue node's
// place (with half of its push order), and one word of reference count, state, flags and owner
// number.
BOOST_AUTO_TEST_CASE(a_one_shot_task_holding_a_pointer_is_32_bytes)
{
    int x = 0;
    auto body = [p = &x] {
        ++*p;
    };
    using one_shot = sched::detail::task_impl<decltype(body), void, clock_type, false>;
    BOOST_TEST(sizeof(task_type) == 24u);
    BOOST_TEST(sizeof(one_shot) == 32u);
}

BOOST_AUTO_TEST_CASE(a_cancel_stays_transient_until_its_owner_has_been_told,
                     *boost::unit_test::timeout(60))
{
    for (const bool interrupt : {false, true})
    {
        holding_owner owner;
        task_type* t = make_task(owner);
        std::jthread canceller([&] { (void)t->cancel(interrupt); });
        BOOST_TEST_REQUIRE(owner.told.wait_for_at_least(1));
        const future_state transient =
            interrupt ? future_state::interrupting : future_state::cancelling;
        BOOST_TEST((t->state() == transient));
        // Its outcome is fixed already: a waiter returns, and it reads as done and cancelled.
        t->wait();
        BOOST_TEST(t->is_done());
        BOOST_TEST(t->is_cancelled());
        // A holder waits for the cancel to end before it lets go.
        const future_state final_state =
            interrupt ? future_state::interrupted : future_state::cancelled;
        std::atomic<bool> waiting{false};
        std::atomic<bool> let_go{false};
        future_state seen_on_return = future_state::pending;
        std::jthread holder([&] {
            waiting.store(true);
            t->await_canceller();
            seen_on_return = t->state(); // transient if it returned before the owner ended it
            let_go.store(true);
        });
        BOOST_TEST_REQUIRE(eventually([&] { return waiting.load(); }));
        BOOST_TEST(!within(50ms, [&] { return let_go.load(); }));
        owner.may_go_on.release();
        holder.join();
        canceller.join();
        BOOST_TEST((seen_on_return == final_state));
        BOOST_TEST((t->state() == final_state));
        t->release();
    }
}

BOOST_AUTO_TEST_CASE(disown_waits_for_a_cancel_that_found_the_owner, *boost::unit_test::timeout(60))
{
    holding_owner owner;
    task_type* t = make_task(owner);
    std::jthread canceller([&] { (void)t->cancel(false); });
    BOOST_TEST_REQUIRE(owner.told.wait_for_at_least(1));
    std::atomic<bool> leaving{false};
    std::atomic<bool> disowned{false};
    future_state seen_on_return = future_state::pending;
    std::jthread owner_leaving([&] {
        leaving.store(true);
        t->disown();
        seen_on_return = t->state(); // transient if it returned before the owner ended it
        disowned.store(true);
    });
    BOOST_TEST_REQUIRE(eventually([&] { return leaving.load(); }));
    BOOST_TEST(!within(50ms, [&] { return disowned.load(); }));
    owner.may_go_on.release();
    owner_leaving.join();
    canceller.join();
    BOOST_TEST((seen_on_return == future_state::cancelled));
    BOOST_TEST((t->state() == future_state::cancelled));
    t->release();
}

BOOST_AUTO_TEST_CASE(a_cancel_after_disown_tells_no_one_and_ends_at_once)
{
    holding_owner owner;
    task_type* t = make_task(owner);
    t->disown();
    BOOST_TEST(t->cancel(false));
    BOOST_TEST(owner.told.value() == 0);
    BOOST_TEST((t->state() == future_state::cancelled));
    t->await_canceller(); // nothing under way: returns at once
    t->release();
}

BOOST_AUTO_TEST_CASE(only_the_first_cancel_wins_and_tells_the_owner)
{
    holding_owner owner;
    task_type* t = make_task(owner);
    owner.may_go_on.release(); // the first tell goes straight through
    BOOST_TEST(t->cancel(true));
    BOOST_TEST(!t->cancel(false));
    BOOST_TEST(!t->cancel(true));
    BOOST_TEST(owner.told.value() == 1);
    BOOST_TEST((t->state() == future_state::interrupted));
    t->release();
}

BOOST_AUTO_TEST_CASE(the_owner_learns_whether_the_canceller_holds_a_reference)
{
    for (const bool holds : {false, true})
    {
        holding_owner owner;
        task_type* t = make_task(owner, 2); // the test's reference and the queue's, say
        owner.may_go_on.release();
        BOOST_TEST(t->cancel(false, holds));
        BOOST_TEST(owner.told.value() == 1);
        BOOST_TEST(owner.told_caller_holds.load() == holds);
        t->release();
        t->release();
    }
}

// What a pool does with the queue's reference to a task that a future's cancel took out.
BOOST_AUTO_TEST_CASE(a_reference_released_beside_its_holders_own_leaves_every_other_holder)
{
    using impl = sched::detail::task_impl<counted_callable, void, clock_type, false>;
    for (const std::uint32_t refs : {2u, 3u})
    {
        holding_owner owner;
        std::atomic<int> live{0};
        task_type* t =
            impl::create({}, counted_callable(live), sched::detail::period_kind::one_shot,
                         sched::detail::no_schedule{}, refs, owner.registration.number());
        BOOST_TEST_REQUIRE(live.load() == 1);
        t->release_beside_own();
        // One reference fewer, and the task still there for the others.
        BOOST_TEST(t->held_elsewhere() == (refs == 3u));
        BOOST_TEST(live.load() == 1);
        if (refs == 3u)
        {
            t->release();
            BOOST_TEST(!t->held_elsewhere());
            BOOST_TEST(live.load() == 1);
        }
        t->release(); // the last: the task goes, with its callable
        BOOST_TEST(live.load() == 0);
    }
}

// Whether the pool may take the caller's reference to be still there after release_body().
BOOST_AUTO_TEST_CASE(a_body_goes_quietly_if_its_destructor_is_trivial_or_it_has_gone)
{
    holding_owner owner;
    task_type* trivial = make_task(owner);
    BOOST_TEST(trivial->body_goes_quietly());
    trivial->release();

    using impl = sched::detail::task_impl<counted_callable, void, clock_type, false>;
    std::atomic<int> live{0};
    task_type* counted =
        impl::create({}, counted_callable(live), sched::detail::period_kind::one_shot,
                     sched::detail::no_schedule{}, 1, owner.registration.number());
    BOOST_TEST(!counted->body_goes_quietly());
    counted->release_body();
    BOOST_TEST(live.load() == 0);
    BOOST_TEST(counted->body_goes_quietly());
    counted->release();
}

BOOST_AUTO_TEST_SUITE_END()
