#include <sched/deadline.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_allocator.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/experimental/promise.hpp>
#include <boost/asio/experimental/use_promise.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <deque>
#include <memory>
#include <optional>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "support/counting_allocator.hpp"
#include "support/failing_allocation.hpp"
#include "support/io_fixture.hpp"
#include "support/promise_waiter.hpp"
#include "support/wait.hpp"

using namespace std::chrono_literals;
using sched::manual_clock;

namespace {

using manual_deadline = sched::basic_deadline<manual_clock>;
using error_code = boost::system::error_code;

struct deadline_fixture : sched::test::io_fixture
{
    manual_deadline deadline{io, pool};
    std::optional<error_code> result;

    auto on_expiry()
    {
        return [this](error_code ec) {
            result = ec;
        };
    }
};

// An io_context's executor whose copies that track outstanding work count themselves in
// `*work`, and whose move is a copy (no move constructor, as a user's executor may be written):
// a moved-from tracked copy goes on counting until it is destroyed.
template <bool Tracked>
class work_counting_executor
{
public:
    work_counting_executor(boost::asio::io_context& io, std::atomic<int>& work) noexcept
        : inner_(io.get_executor()), work_(&work)
    {
        count(1);
    }
    work_counting_executor(const work_counting_executor& other) noexcept
        : inner_(other.inner_), work_(other.work_)
    {
        count(1);
    }
    work_counting_executor& operator=(const work_counting_executor& other) noexcept
    {
        work_counting_executor copy(other);
        std::swap(inner_, copy.inner_);
        std::swap(work_, copy.work_);
        return *this;
    }
    ~work_counting_executor() { count(-1); }

    work_counting_executor<true>
    require(boost::asio::execution::outstanding_work_t::tracked_t) const
    {
        return {inner_.context(), *work_};
    }
    work_counting_executor<false>
    require(boost::asio::execution::outstanding_work_t::untracked_t) const
    {
        return {inner_.context(), *work_};
    }
    boost::asio::io_context& query(boost::asio::execution::context_t) const noexcept
    {
        return inner_.context();
    }
    static constexpr boost::asio::execution::blocking_t
    query(boost::asio::execution::blocking_t) noexcept
    {
        return boost::asio::execution::blocking.never;
    }
    template <class Function>
    void execute(Function&& f) const
    {
        boost::asio::post(inner_, std::forward<Function>(f));
    }
    friend bool operator==(const work_counting_executor& a,
                           const work_counting_executor& b) noexcept
    {
        return a.inner_ == b.inner_ && a.work_ == b.work_;
    }
    friend bool operator!=(const work_counting_executor& a,
                           const work_counting_executor& b) noexcept
    {
        return !(a == b);
    }

private:
    void count(int n) noexcept
    {
        if (Tracked)
            *work_ += n;
    }

    boost::asio::io_context::executor_type inner_;
    std::atomic<int>* work_;
};

} // namespace

BOOST_AUTO_TEST_SUITE(test_deadline)

BOOST_FIXTURE_TEST_CASE(an_unarmed_deadline_keeps_its_expiry_for_the_next_wait, deadline_fixture)
{
    BOOST_TEST(!deadline.armed());
    BOOST_TEST(deadline.expiry() == manual_clock::time_point::max());
    BOOST_TEST(!deadline.expires_after(2s)); // nothing armed to move
    BOOST_TEST(deadline.expiry() == at(2s));
    deadline.async_wait(on_expiry());
    BOOST_TEST(deadline.armed());
    manual_clock::advance(2s);
    complete_one();
    BOOST_TEST((result && !*result));
    BOOST_TEST(!deadline.armed());
}

// The deadline keeps its wait after the handler has run (until it next arms): the wait's memory
// is the recycler's, so whatever the handler's allocator gave has gone back before it runs.
BOOST_FIXTURE_TEST_CASE(a_handlers_allocator_has_every_byte_back_before_it_runs, deadline_fixture)
{
    sched::test::allocation_log log;
    std::optional<long> live_as_it_ran;
    deadline.expires_after(1s);
    deadline.async_wait(
        boost::asio::bind_allocator(sched::test::counting_allocator<void>(log), [&](error_code ec) {
            result = ec;
            live_as_it_ran = log.live();
        }));
    manual_clock::advance(1s);
    complete_one();
    BOOST_TEST((result && !*result));
    BOOST_TEST(live_as_it_ran.value_or(-1) == 0);
    BOOST_TEST(log.live() == 0);
}

// A handler whose move is a copy (a lambda capturing a const shared_ptr) leaves nothing in the
// deadline once it has run: the idle-timeout pattern, where the connection owns its deadline and
// the handler owns the connection, would otherwise keep the connection alive until it re-arms.
BOOST_FIXTURE_TEST_CASE(a_handler_that_ran_leaves_nothing_of_it_in_the_deadline, deadline_fixture)
{
    const auto owner = std::make_shared<int>(0);
    {
        const std::shared_ptr<int> captured = owner;
        deadline.expires_after(1s);
        deadline.async_wait([captured, this](error_code ec) { result = ec; });
    }
    BOOST_TEST(owner.use_count() == 2); // the armed wait's handler
    manual_clock::advance(1s);
    complete_one();
    BOOST_TEST((result && !*result));
    BOOST_TEST(owner.use_count() == 1);
}

// Nor does it leave work counted on the handler's executor: a copy of it that tracks work,
// moved from as the handler leaves for that executor, goes too (here its move is a copy, which
// would keep counting), so that the executor's context may run out of work with the deadline
// still there. (The worker that posted the completion may still hold its own tracked copies
// for a moment after the handler has run: those go as its post returns, so the count is waited
// for; the moved-from copy in the node never went.)
BOOST_FIXTURE_TEST_CASE(a_handler_that_ran_leaves_no_work_counted_on_its_executor, deadline_fixture)
{
    std::atomic<int> work{0};
    deadline.expires_after(1s);
    deadline.async_wait(
        boost::asio::bind_executor(work_counting_executor<false>(io, work), on_expiry()));
    BOOST_TEST(work.load() > 0); // the armed wait's
    manual_clock::advance(1s);
    complete_one();
    BOOST_TEST((result && !*result));
    BOOST_TEST(sched::test::eventually([&] { return work.load() == 0; }));
}

BOOST_FIXTURE_TEST_CASE(pushing_an_armed_deadline_back_fires_it_only_at_the_last_expiry,
                        deadline_fixture)
{
    deadline.expires_after(2s);
    deadline.async_wait(on_expiry());
    BOOST_TEST(deadline.expires_after(2s)); // to 2 s: lazily, the entry stays where it was
    BOOST_TEST(pool.queue().size() == 1u);
    BOOST_TEST((pool.queue().due_time(*pool.queue().peek()) == at(2s)));
    for (int i = 1; i <= 5; ++i)
    {
        manual_clock::advance(1s);
        settle(pool); // at 2 s, a worker finds the entry early and puts it back at its expiry
        BOOST_TEST(deadline.expires_after(2s)); // moved, no handler invoked
        BOOST_TEST(pool.queue().size() == 1u);  // the same entry, not a new one
        BOOST_TEST(deadline.armed());
    }
    BOOST_TEST(
        (pool.queue().due_time(*pool.queue().peek()) > at(2s))); // it went back once, at least
    manual_clock::advance(1s);
    settle(pool);
    BOOST_TEST(run_ready() == 0u);
    BOOST_TEST(!result);
    manual_clock::advance(1s);
    complete_one();
    BOOST_TEST((result && !*result)); // at 7 s, not before (checked above)
}

// When a worker finds a deadline pushed back, it also puts back the waits queued right behind it
// (due within 10 ms) that were pushed back too, rather than wake for each; it stops at a wait
// that is really due, and leaves those due later to their time.
BOOST_FIXTURE_TEST_CASE(the_waits_pushed_back_right_behind_one_go_back_with_it, deadline_fixture)
{
    std::vector<manual_deadline> waits;
    waits.reserve(4);
    std::vector<std::optional<error_code>> results(4);
    for (const auto expiry : {1000ms, 1005ms, 1008ms, 1020ms})
    {
        manual_deadline& d = waits.emplace_back(io, pool);
        d.expires_after(expiry);
        d.async_wait([&results, i = waits.size() - 1](error_code ec) { results[i] = ec; });
    }
    for (const std::size_t i : {0u, 1u, 3u})
        BOOST_TEST(waits[i].expires_after(10s)); // lazily
    const auto head_due = [&] {
        return pool.queue().due_time(*pool.queue().peek());
    };

    // The first goes back, and the second with it; the third is due at its time. (Not waited
    // for with settle(): its task, due now, would stand at the head in the way.)
    manual_clock::advance(1s);
    BOOST_TEST(sched::test::within(10s, [&] { return head_due() == at(1008ms); }));
    BOOST_TEST(pool.queue().size() == 4u);
    manual_clock::advance(8ms);
    complete_one();
    BOOST_TEST((results[2] && !*results[2]));
    BOOST_TEST((head_due() == at(1020ms))); // more than 10 ms after the first: left to its time
    manual_clock::advance(12ms);
    settle(pool);
    BOOST_TEST((head_due() == at(10s)));
    BOOST_TEST(run_ready() == 0u);
    manual_clock::advance(10s);
    for (int i = 0; i < 3; ++i)
        complete_one();
    for (const std::size_t i : {0u, 1u, 3u})
        BOOST_TEST((results[i] && !*results[i]));
}

BOOST_FIXTURE_TEST_CASE(a_deadline_pushed_back_then_pulled_in_fires_at_the_pulled_in_time,
                        deadline_fixture)
{
    deadline.expires_after(2s);
    deadline.async_wait(on_expiry());
    BOOST_TEST(deadline.expires_after(10s)); // lazily: the entry stays at 2 s
    BOOST_TEST(deadline.expires_at(at(5s))); // earlier than 10 s: moved in place
    BOOST_TEST((pool.queue().due_time(*pool.queue().peek()) == at(5s)));
    manual_clock::advance(2s);
    settle(pool);
    BOOST_TEST(run_ready() == 0u);
    manual_clock::advance(3s);
    complete_one();
    BOOST_TEST((result && !*result));
}

BOOST_FIXTURE_TEST_CASE(pulling_an_armed_deadline_in_fires_it_earlier, deadline_fixture)
{
    deadline.expires_after(1h);
    deadline.async_wait(on_expiry());
    BOOST_TEST(deadline.expires_at(at(5s)));
    manual_clock::advance(5s);
    complete_one();
    BOOST_TEST((result && !*result));
}

BOOST_FIXTURE_TEST_CASE(after_it_fired_expires_after_reports_false, deadline_fixture)
{
    deadline.expires_after(1s);
    deadline.async_wait(on_expiry());
    manual_clock::advance(1s);
    complete_one();
    BOOST_TEST(!deadline.expires_after(1s)); // it had already fired
    BOOST_TEST(pool.queue().size() == 0u);
}

BOOST_FIXTURE_TEST_CASE(cancel_returns_true_exactly_when_it_prevented_the_expiry, deadline_fixture)
{
    deadline.expires_after(1s);
    deadline.async_wait(on_expiry());
    BOOST_TEST(deadline.cancel());
    BOOST_TEST(pool.queue().size() == 0u);
    BOOST_TEST(!deadline.cancel());
    complete_one();
    BOOST_TEST((result && *result == boost::asio::error::operation_aborted));

    result.reset();
    deadline.expires_after(1s);
    deadline.async_wait(on_expiry());
    manual_clock::advance(1s);
    complete_one(); // fired
    BOOST_TEST(!deadline.cancel());
    BOOST_TEST((result && !*result));
}

BOOST_FIXTURE_TEST_CASE(a_second_wait_while_armed_completes_with_already_started, deadline_fixture)
{
    deadline.expires_after(1s);
    deadline.async_wait(on_expiry());
    std::optional<error_code> second;
    deadline.async_wait([&](error_code ec) { second = ec; });
    complete_one();
    BOOST_TEST((second && *second == boost::asio::error::already_started));
    BOOST_TEST(deadline.armed()); // the first is untouched
    manual_clock::advance(1s);
    complete_one();
    BOOST_TEST((result && !*result));
}

BOOST_FIXTURE_TEST_CASE(the_cancellation_slot_cancels_the_wait, deadline_fixture)
{
    boost::asio::cancellation_signal signal;
    deadline.expires_after(1s);
    deadline.async_wait(boost::asio::bind_cancellation_slot(signal.slot(), on_expiry()));
    signal.emit(boost::asio::cancellation_type::total);
    BOOST_TEST(!deadline.armed());
    complete_one();
    BOOST_TEST((result && *result == boost::asio::error::operation_aborted));
}

namespace {

// Waits on deadlines of their own, each with a cancellation slot, due 1 ms from now: a race of
// the slots with the pool's worker.
struct slotted_waits : deadline_fixture
{
    static constexpr std::size_t count = 4000;
    std::deque<manual_deadline> deadlines;
    std::deque<boost::asio::cancellation_signal> signals;
    std::vector<std::optional<error_code>> results = std::vector<std::optional<error_code>>(count);
    std::vector<int> calls = std::vector<int>(count);

    slotted_waits()
    {
        for (std::size_t i = 0; i < count; ++i)
        {
            manual_deadline& d = deadlines.emplace_back(io, pool);
            d.expires_after(1ms);
            d.async_wait(boost::asio::bind_cancellation_slot(signals.emplace_back().slot(),
                                                             [this, i](error_code ec) {
                                                                 ++calls[i];
                                                                 results[i] = ec;
                                                             }));
        }
    }

    // How many handlers got `code`, once every handler has run exactly once.
    std::size_t completed_with(error_code code)
    {
        run_to_end();
        BOOST_TEST_REQUIRE(std::count(calls.begin(), calls.end(), 1) ==
                           static_cast<std::ptrdiff_t>(count));
        return static_cast<std::size_t>(std::count(results.begin(), results.end(), code));
    }
};

} // namespace

// Once the expiry has fired (armed() reads false), the wait's slot is too late, as the deadline's
// cancel() is: the handler gets success. The worker chased here begins the completion while it
// holds the word it fires; before, a slot emitted just after the word read `fired` still
// cancelled (a sixth of these under TSan, far fewer in Release: a review's finding).
BOOST_FIXTURE_TEST_CASE(a_slot_emitted_once_the_expiry_has_fired_is_too_late,
                        slotted_waits,
                        *boost::unit_test::timeout(300))
{
    manual_clock::advance(1ms); // the worker fires them one by one, in order
    for (std::size_t i = 0; i < count; ++i)
    {
        while (deadlines[i].armed())
        {} // close behind the worker
        signals[i].emit(boost::asio::cancellation_type::terminal);
    }
    BOOST_TEST(completed_with(error_code()) == count);
}

// Slots emitted while the worker takes the waits at their old expiries (pushed back an hour)
// cancel every one: none completes with success an hour early. (A worker that finds the word
// claimed by a cancel waits for the cancel to end the task.)
BOOST_FIXTURE_TEST_CASE(a_slot_racing_the_worker_at_an_old_expiry_cancels_the_wait,
                        slotted_waits,
                        *boost::unit_test::timeout(300))
{
    for (manual_deadline& d : deadlines)
        BOOST_TEST_REQUIRE(d.expires_after(1h));
    manual_clock::advance(1ms); // the worker takes them one by one, to put them back
    for (boost::asio::cancellation_signal& signal : signals)
        signal.emit(boost::asio::cancellation_type::terminal);
    BOOST_TEST(completed_with(boost::asio::error::operation_aborted) == count);
}

BOOST_FIXTURE_TEST_CASE(destroying_a_deadline_cancels_its_wait_and_a_move_carries_it,
                        deadline_fixture)
{
    {
        manual_deadline doomed(io, pool);
        doomed.expires_after(1s);
        doomed.async_wait(on_expiry());
        manual_deadline moved(std::move(doomed)); // the wait goes with it
        BOOST_TEST(moved.armed());
        BOOST_TEST(!doomed.armed());
    }
    complete_one();
    BOOST_TEST((result && *result == boost::asio::error::operation_aborted));
}

BOOST_FIXTURE_TEST_CASE(moving_over_an_armed_deadline_cancels_its_wait_and_takes_the_other,
                        deadline_fixture)
{
    deadline.expires_after(1s);
    deadline.async_wait(on_expiry());
    std::optional<error_code> other_result;
    manual_deadline other(io, pool);
    other.expires_after(2s);
    other.async_wait([&](error_code ec) { other_result = ec; });
    deadline = std::move(other);
    complete_one();
    BOOST_TEST((result && *result == boost::asio::error::operation_aborted));
    BOOST_TEST(!other_result);
    BOOST_TEST(deadline.armed());
    BOOST_TEST(!other.armed());
    BOOST_TEST(pool.queue().size() == 1u); // the other's wait, and not the cancelled one
    manual_clock::advance(2s);
    complete_one();
    BOOST_TEST((other_result && !*other_result));
}

BOOST_FIXTURE_TEST_CASE(a_moved_deadline_keeps_moving_its_wait_and_fires_once_at_its_last_expiry,
                        deadline_fixture)
{
    deadline.expires_after(2s);
    deadline.async_wait(on_expiry());
    manual_deadline moved(std::move(deadline));
    BOOST_TEST(moved.expires_after(3s)); // lazily, through the moved-to deadline
    manual_deadline assigned(io, pool);
    assigned = std::move(moved);
    BOOST_TEST(assigned.armed());
    BOOST_TEST(!moved.armed());
    BOOST_TEST(!moved.expires_after(1s)); // the moved-from deadline has no wait to move
    manual_clock::advance(2s);
    settle(pool); // the entry comes out at 2 s and goes back at 3 s
    BOOST_TEST(run_ready() == 0u);
    BOOST_TEST(assigned.expires_after(2s)); // to 4 s
    manual_clock::advance(1s);
    settle(pool);
    BOOST_TEST(run_ready() == 0u);
    BOOST_TEST(assigned.armed());
    manual_clock::advance(1s);
    complete_one();
    BOOST_TEST((result && !*result));
    BOOST_TEST(!assigned.armed());
    BOOST_TEST(!assigned.expires_after(1s));
    BOOST_TEST(pool.queue().size() == 0u);
}

BOOST_FIXTURE_TEST_CASE(a_wait_that_fired_does_not_touch_the_next_one, deadline_fixture)
{
    deadline.expires_after(1s);
    deadline.async_wait(on_expiry());
    manual_clock::advance(1s);
    complete_one();
    result.reset();
    deadline.expires_after(5s);
    deadline.async_wait(on_expiry());
    BOOST_TEST(deadline.armed());
    BOOST_TEST(deadline.expires_after(10s)); // to 11 s
    manual_clock::advance(5s);
    settle(pool);
    BOOST_TEST(run_ready() == 0u);
    manual_clock::advance(5s);
    complete_one();
    BOOST_TEST((result && !*result)); // at 11 s, not before (checked above)
}

BOOST_FIXTURE_TEST_CASE(after_a_shutdown_ended_the_wait_expires_after_reports_false,
                        deadline_fixture)
{
    deadline.expires_after(1s);
    deadline.async_wait(on_expiry());
    (void)pool.shutdown_now();
    BOOST_TEST(!deadline.armed());
    BOOST_TEST(!deadline.expires_after(1s));
    complete_one();
    BOOST_TEST((result && *result == sched::error::shutdown));
}

BOOST_FIXTURE_TEST_CASE(after_a_shutdown_that_keeps_delayed_tasks_the_wait_moves_and_fires,
                        deadline_fixture)
{
    deadline.expires_after(1s);
    deadline.async_wait(on_expiry());
    pool.shutdown(); // execute_existing_delayed_tasks_after_shutdown is true by default
    BOOST_TEST(deadline.expires_after(2s)); // lazily: the entry stays at 1 s
    manual_clock::advance(1s);
    // At 1 s the entry comes out early and goes back at 2 s.
    BOOST_TEST_REQUIRE(sched::test::eventually([&] {
        const auto* head = pool.queue().peek(); // the worker may be moving it meanwhile
        return head && pool.queue().due_time(*head) == at(2s);
    }));
    BOOST_TEST(run_ready() == 0u);
    BOOST_TEST(deadline.armed());
    manual_clock::advance(1s);
    complete_one();
    BOOST_TEST((result && !*result));
    BOOST_TEST(pool.await_termination(60s));
}

BOOST_FIXTURE_TEST_CASE(a_wait_pushed_back_to_never_does_not_hold_a_shut_down_pool_open,
                        deadline_fixture)
{
    deadline.expires_after(1s);
    deadline.async_wait(on_expiry());
    BOOST_TEST(deadline.expires_at(manual_clock::time_point::max())); // lazily: still at 1 s
    pool.shutdown(); // a delayed wait may still run; one due never would keep the pool forever
    manual_clock::advance(1s);
    BOOST_TEST(pool.await_termination(60s));
    complete_one();
    BOOST_TEST((result && *result == sched::error::shutdown));
}

// A wait that has fired (a move finds it too late), then a shutdown that ends delayed tasks
// before it runs (here from before_execute, whose end the run checks again, as Java's does): the
// shutdown ended it, as it ends a scheduler's plain wait there. It was told operation_aborted,
// and its task stayed completing (a review's probe).
BOOST_AUTO_TEST_CASE(a_fired_wait_that_a_shutdown_keeps_from_running_completes_with_shutdown)
{
    sched::test::manual_clock_fixture time;
    manual_deadline* watched = nullptr;
    sched::test::manual_pool* shut = nullptr;
    std::optional<bool> moved;
    sched::pool_options options = sched::test::pool_fixture::single_worker();
    options.before_execute = [&] {
        moved = watched->expires_after(1h);
        (void)shut->shutdown_now();
    };
    sched::test::manual_pool pool(options);
    shut = &pool;
    boost::asio::io_context io;
    manual_deadline deadline(io, pool);
    watched = &deadline;
    std::optional<error_code> result;
    deadline.expires_after(1s);
    deadline.async_wait([&result](error_code ec) { result = ec; });
    manual_clock::advance(1s);
    BOOST_TEST_REQUIRE(io.run_one_for(std::chrono::minutes(1)) == 1u);
    BOOST_TEST((moved && !*moved)); // the expiry had won
    BOOST_TEST((result && *result == sched::error::shutdown));
    BOOST_TEST(!deadline.armed());
    BOOST_TEST(pool.await_termination(60s));
}

namespace {

// Rounds of a deadline's move racing a shut-down pool's end of its wait, each on a pool of its
// own: a move that returned true holds (the wait fires at its new expiry, 1 ms on); one that
// returned false came too late (the wait ended with error::shutdown).
struct moves_racing_a_shutdown : deadline_fixture
{
    static constexpr int rounds = 300;

    // arm(deadline, handler) arms the round's wait; race(round, pool, deadline) races the move
    // against the pool's end of it, and returns what the move returned once both are done.
    template <class Arm, class Race>
    void check_rounds(Arm arm, Race race)
    {
        int moved = 0;
        for (int round = 0; round < rounds; ++round)
        {
            sched::test::manual_pool round_pool(single_worker());
            manual_deadline d(io, round_pool);
            std::optional<error_code> round_result;
            arm(d, [&](error_code ec) { round_result = ec; });
            const bool move_returned = race(round, round_pool, d);
            manual_clock::advance(1ms);
            complete_one();
            BOOST_TEST_REQUIRE(round_result.has_value());
            if (move_returned)
            {
                ++moved;
                BOOST_TEST_REQUIRE(!*round_result,
                                   "round " << round << ": " << round_result->message());
            }
            else
                BOOST_TEST_REQUIRE((*round_result == sched::error::shutdown));
        }
        BOOST_TEST_MESSAGE(moved << " of " << rounds << " moves came in time");
    }
};

} // namespace

// A wait pushed back to "never", then moved to a finite expiry after a shutdown that keeps delayed
// tasks, just as the worker takes its entry at the old expiry to put it back at the expiry it
// read ("never", which a shut-down pool refuses): a move that returned true holds, and the wait
// fires at it. Before, the worker judged the entry by the expiry it had read, and the wait ended
// with error::shutdown after the move had returned true (a review's finding: 14 rounds in 1,000).
BOOST_FIXTURE_TEST_CASE(a_move_racing_the_worker_of_a_shut_down_pool_holds,
                        moves_racing_a_shutdown,
                        *boost::unit_test::timeout(300))
{
    check_rounds(
        [](manual_deadline& d, auto handler) {
            d.expires_after(1ms);
            d.async_wait(std::move(handler));
            BOOST_TEST_REQUIRE(d.expires_at(manual_clock::time_point::max())); // lazily
        },
        [](int, sched::test::manual_pool& pool, manual_deadline& d) {
            pool.shutdown();
            bool move_returned = false;
            std::thread mover([&] {
                while (pool.queue().size() != 0) // until the worker has taken the entry
                {}
                move_returned = d.expires_after(1ms);
            });
            manual_clock::advance(1ms);
            mover.join();
            return move_returned;
        });
}

// A wait armed "never" (before its deadline has an expiry), moved to a finite expiry as a
// shutdown that keeps delayed tasks drops it for being due "never": a move that returned true
// holds, and the wait fires at it. Before, the shutdown judged the entry by its due time, and
// ended the wait after the move had returned true (a review's finding).
BOOST_FIXTURE_TEST_CASE(a_move_racing_a_shutdown_that_drops_the_wait_holds,
                        moves_racing_a_shutdown,
                        *boost::unit_test::timeout(300))
{
    check_rounds([](manual_deadline& d, auto handler) { d.async_wait(std::move(handler)); },
                 [](int round, sched::test::manual_pool& pool, manual_deadline& d) {
                     std::atomic<bool> moving{false};
                     bool move_returned = false;
                     std::thread mover([&] {
                         moving.store(true);
                         move_returned = d.expires_after(1ms);
                     });
                     while (!moving.load())
                     {}
                     // A little later each round, through the move.
                     for (int spin = 0; spin < round * 8; ++spin)
                         (void)moving.load();
                     pool.shutdown();
                     mover.join();
                     return move_returned;
                 });
}

// A shut-down pool moves no wait early with another (see the_waits_pushed_back_right_behind_one_
// go_back_with_it): one pushed back to "never" comes out at its old expiry, where it ends.
BOOST_FIXTURE_TEST_CASE(a_shut_down_pool_moves_no_wait_pushed_back_to_never_with_another,
                        deadline_fixture)
{
    manual_deadline never(io, pool);
    std::optional<error_code> never_result;
    deadline.expires_after(1s);
    deadline.async_wait(on_expiry());
    never.expires_after(1005ms);
    never.async_wait([&](error_code ec) { never_result = ec; });
    BOOST_TEST(deadline.expires_after(10s));
    BOOST_TEST(never.expires_at(manual_clock::time_point::max()));
    pool.shutdown();
    manual_clock::advance(1s); // the first goes back to 10 s, the other stays
    BOOST_TEST(sched::test::within(
        10s, [&] { return pool.queue().due_time(*pool.queue().peek()) == at(1005ms); }));
    manual_clock::advance(5ms);
    complete_one();
    BOOST_TEST((never_result && *never_result == sched::error::shutdown));
    BOOST_TEST(!result);
    manual_clock::advance(9s);
    complete_one();
    BOOST_TEST((result && !*result));
    BOOST_TEST(pool.await_termination(60s));
}

// "Never" stays never for a deadline pushed back to it lazily, as for one armed there: the
// queue's time_point::max() is never due, even once the clock gets there (it fired with success
// before: a review's probe).
BOOST_FIXTURE_TEST_CASE(a_wait_pushed_back_to_never_does_not_fire_when_the_clock_reaches_the_end,
                        deadline_fixture)
{
    deadline.expires_after(1s);
    deadline.async_wait(on_expiry());
    BOOST_TEST(deadline.expires_at(manual_clock::time_point::max())); // lazily: still at 1 s
    manual_clock::advance(manual_clock::duration::max());             // saturates at the end
    // The worker takes the entry at 1 s and puts it back at its expiry.
    BOOST_TEST_REQUIRE(sched::test::eventually([&] {
        const auto* head = pool.queue().peek();
        return head && pool.queue().due_time(*head) == manual_clock::time_point::max();
    }));
    BOOST_TEST(run_ready() == 0u);
    BOOST_TEST(deadline.armed());
    BOOST_TEST(deadline.cancel());
    complete_one();
    BOOST_TEST((result && *result == boost::asio::error::operation_aborted));
}

BOOST_AUTO_TEST_CASE(an_io_context_destroyed_first_takes_an_armed_deadlines_handler_with_it)
{
    sched::test::manual_clock_fixture time;
    sched::test::manual_pool pool(1);
    auto alive = std::make_shared<int>(0);
    std::weak_ptr<int> watch = alive;
    std::optional<manual_deadline> deadline;
    {
        boost::asio::io_context io;
        deadline.emplace(io, pool);
        deadline->expires_after(1h);
        // Bound to a strand: the wait counts work on the io_context until its handler goes.
        deadline->async_wait(
            boost::asio::bind_executor(boost::asio::make_strand(io), [alive](error_code) {}));
        alive.reset();
    } // the io_context goes first, with the wait pending and the deadline still there
    BOOST_TEST(watch.expired()); // the handler (and the work it counted) went with the context
    deadline.reset();
    sched::test::pool_fixture::settle(pool);
}

// A deadline pushed back goes back in the queue when its old expiry comes. If there is no memory
// for that, its wait ends with no_memory, and the deadline is no longer armed: it can wait again.
BOOST_FIXTURE_TEST_CASE(a_wait_that_cannot_go_back_in_the_queue_completes_with_no_memory,
                        deadline_fixture)
{
    deadline.expires_after(10ms); // near: in the main heap
    deadline.async_wait(on_expiry());
    BOOST_TEST(deadline.expires_after(1h)); // lazily: at 10 ms, the worker puts it back at 1 h
    // On the worker: fill its shard of the far tier (its own pushes) to capacity with tasks due
    // before 1 h; then the next heap growth on that thread fails: the wait's, going back.
    std::vector<sched::test::manual_future<void>> fillers;
    const bool full = pool.submit([&] {
                              fillers.push_back(pool.schedule(30min, [] {})); // the far tier opens
                              for (int i = 0; i < 100'000; ++i)
                              {
                                  sched::test::fail_next_aligned_allocation();
                                  try
                                  {
                                      fillers.push_back(pool.schedule(30min, [] {}));
                                  }
                                  catch (const std::bad_alloc&)
                                  {
                                      sched::test::fail_next_aligned_allocation();
                                      return true;
                                  }
                              }
                              return false;
                          })
                          .get();
    BOOST_TEST_REQUIRE(full);
    manual_clock::advance(10ms);
    complete_one();
    BOOST_TEST((result && *result == boost::asio::error::no_memory));
    BOOST_TEST(!deadline.armed());
    BOOST_TEST(!deadline.expires_after(1s)); // nothing armed to move
    result.reset();
    deadline.async_wait(on_expiry());
    BOOST_TEST(deadline.armed());
    manual_clock::advance(1s);
    complete_one();
    BOOST_TEST((result && !*result));
}

// A promise completes through the executor of its operation's initiation, which the deadline
// gives as its own (as Asio's timers do): the promise's waiters run on the io_context, not on
// Asio's system executor.
BOOST_FIXTURE_TEST_CASE(a_promise_completes_on_the_deadlines_executor, deadline_fixture)
{
    deadline.expires_after(1s);
    auto promise = deadline.async_wait(boost::asio::experimental::use_promise);
    BOOST_TEST(
        (std::is_same_v<decltype(promise), boost::asio::experimental::promise<
                                               void(error_code), manual_deadline::executor_type>>));
    sched::test::promise_waiter waiter(io);
    waiter.wait_on(promise);
    manual_clock::advance(1s);
    run_to_end();
    BOOST_TEST(waiter.ran_on_io_with(error_code())); // success, on the io_context
}

// As Asio's timers: `as_default_on` rebinds a deadline to another executor type, with its expiry
// and its armed wait (which completes as it was started to).
BOOST_FIXTURE_TEST_CASE(a_deadline_rebound_to_another_executor_type_keeps_its_armed_wait,
                        deadline_fixture)
{
    deadline.expires_after(5s);
    deadline.async_wait(on_expiry());
    auto rebound = boost::asio::as_tuple(boost::asio::deferred).as_default_on(std::move(deadline));
    static_assert(!std::is_same_v<decltype(rebound), manual_deadline>);
    BOOST_TEST(rebound.armed());
    BOOST_TEST(rebound.expiry() == at(5s));
    BOOST_TEST(!deadline.armed());         // moved from
    BOOST_TEST(rebound.expires_after(1s)); // the wait moves with it
    manual_clock::advance(1s);
    complete_one();
    BOOST_TEST((result && !*result));
    BOOST_TEST(!rebound.armed());
}

BOOST_AUTO_TEST_SUITE_END()
