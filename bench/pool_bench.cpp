// The pool: sched::scheduled_thread_pool (steady_clock) against the baseline Boost.Asio 1.81
// steady_timer on an io_context, and (W1) libuv's timers, in the same run.
//
// Workloads (see /work/shared/workloads.md):
//   W1  timeout churn: a standing population of P pending one-shot items, delays uniform in
//       [1 s, 10 s]; then M times: cancel the oldest pending item, schedule a new one. Pairs/s,
//       with one producer thread, then with two.
//   W2  mass pending: schedule N items with delays in [60 s, 120 s]; schedule rate, VmRSS growth
//       per pending item; then cancel them all: cancel rate and VmRSS after.
//
// Every item's body is a lambda capturing one pointer (to a counter of items that actually ran,
// reported as `fired`, counted to the end of the timed part: 0 unless a churn lasts more than a
// second, W1's shortest delay; items that fall due during the teardown are not counted).
//
// Before the timed churn, every contestant churns P pairs untimed (a warm-up, part of the setup),
// so that the pairs timed see the churn's steady state, each page written once a cycle, rather
// than memory last written when the setup began: on the hosts this runs on, the first write to
// such a page costs several times a later one, so that at P = 10M sched's first 1M pairs cost
// 3-5 times the next ones (docs/performance.md, the twenty-sixth session).
//
// W1's standing population (the warm-up's items too) is due uniform in [1 s, 10 s] from the
// churn's start, not from when each item was armed: arming is not timed and at P = 10M takes
// seconds, so delays counted from arming would end during the churn (sched's worker would run
// those items, steady_timer's handlers would run between chunks, libuv's loop, which never turns,
// would run none: different work). So each row plans its churn's start, its longest setup time
// so far (x 1.5, + 20 ms) after the setup begins; it arms the standing items due at start +
// U[1 s, 10 s] and, if the setup is done sooner, waits (untimed) for the start. A row's first run
// has no measured setup time: it first rehearses the setup (untimed, no churn, items due an hour
// later) and tears it down. Counters: setup_ms (arming and the warm-up, untimed) and
// start_late_ms (how long after its planned start the churn began: a setup that overran its
// plan; the standing items are then due that much sooner).
//
// The contestants, W1 (timed: the M pairs only; setup and teardown are not timed):
//   sched            one pool; each producer keeps its futures in a ring of P slots:
//                    ring[oldest].cancel(), then ring[oldest] = pool.schedule(delay, f). Dropping
//                    the cancelled future frees the task (remove_on_cancel, the default, took it
//                    out of the queue already). Producers are threads outside the pool, which has
//                    as many workers as there are producers (they sleep: nothing falls due).
//   asio             Asio's best case: the churn runs inside the io_context's own thread, in
//                    handlers of K = 256 pairs each; every handler posts the next one. A pair
//                    destroys the oldest steady_timer (which cancels its pending async_wait) and
//                    constructs and arms a new one in its slot ("one timer object per item").
//                    The cancelled waits complete with operation_aborted: their handlers run
//                    between two chunks, so at most K of them are ever queued and memory stays
//                    flat. io_context(1) (concurrency hint: one thread).
//   asio_reuse       As asio, but a slot's timer object is reused: expires_after() cancels the
//                    pending wait, async_wait() arms the new one. Cheaper than a new object per
//                    item (no service lookup); shown for reference.
//   libuv            The fastest single-threaded timer heap a C++ user could pick instead: libuv's
//                    loop (no locks), one uv_timer_t per slot of the ring, reused as libuv's
//                    users do: uv_timer_stop() cancels, uv_timer_start() arms the new delay
//                    (millisecond resolution, no allocation). libuv reads the clock once per
//                    loop iteration, not per timer: the loop's time is updated every 256 pairs,
//                    as Asio's chunks are. The churn runs outside uv_run(), with no loop turns at
//                    all between chunks: libuv's best case. Single producer only (libuv loops are
//                    not thread-safe).
// Two producers:
//   sched_shared     2 producer threads, P/2 and M/2 each, on ONE pool (2 workers). Items due
//                    pool_options::far_tier_horizon (50 ms by default) or more ahead, as all of
//                    W1's are, wait in the queue's far tier: heaps of their own with a lock each,
//                    one picked by each pushing thread (2 per hardware thread, by the order the
//                    threads first push: the two producers usually get different ones); a push or
//                    a cancel takes that heap's lock only, the main queue's lock only for a push
//                    due before every far item. So the two producers seldom contend for a lock.
//                    This is what sched offers.
//   sched_sharded    2 producer threads, each on its own pool (1 worker each): no shared lock.
//   asio_sharded     2 io_contexts, each run by its own thread churning P/2 and M/2. This is the
//                    fair 2-thread Asio setup (an io_context's timer queue is shared state under
//                    a mutex too; sharding is how Asio scales), to compare with both sched rows.
//   asio_shared      1 io_context run by 2 threads, two churn chains (P/2, M/2 each): the
//                    like-for-like counterpart of sched/shared.
// Time for two threads = first start to last end (a barrier lines up the starts). cpu_util = the
// producer threads' CPU time over that span: the machine is shared, and a sharded row near 1
// instead of 2 means a core was taken by someone else during the run, not that sched or Asio
// failed to scale; in the shared rows it also drops when threads sleep on a contended lock.
//
// W2 (timed by phase; one run = one iteration):
//   sched   N x futures.push_back(pool.schedule(delay, [p] {...})) into a pre-reserved vector;
//           VmRSS growth per item, reported with and without the vector of futures (8 bytes a
//           future; the reserved vector's pages become resident as it fills, so they are in the
//           growth), and again after malloc_trim(0) (B_per_item_trimmed, vector included). Then
//           future.cancel() for all, in random order (as timeouts are cancelled; the order is
//           drawn before the first reading); VmRSS after (B_after_cancel: the futures still hold
//           their task objects, 56 bytes each here; the bodies and queue entries are gone), after
//           dropping the futures (B_after_drop: what cancelling all leaves, read once the
//           recycler's emptied spans have aged, about a second, and the unmapping thread has
//           unmapped them, a few ms more: bench::await_span_decay()), and
//           after malloc_trim(0) (B_after_trim: glibc may keep freed small blocks). The vectors of
//           handles are mapped from the kernel on their own (mapped_allocator below), so that
//           dropping one returns all of its pages whatever malloc did before.
//   asio    N x timers.emplace_back(io, delay).async_wait([p](error_code) {...}) into a
//           pre-reserved vector of steady_timer (with and without the vector's sizeof(steady_timer)
//           per item); then timer.cancel() for all, in the same random order, and io.poll() to
//           run the aborted handlers (the cancel rate counts both); VmRSS after, after destroying
//           the timers, after trim. One thread does everything: Asio's best case (no wake-ups
//           across threads).
//
// W1 runs the one-producer rows at every P in --p (a list: scripts/bench.sh passes 10k to 10M for
// the scaling plot), the two-producer rows at every P in --p2.
//
// Sizes are flags (see --help): --p, --p2, --m, --n. Run with repetitions and quote medians; the
// machine is shared and noisy, and only the ratios mean much.

#include <sched/scheduled_thread_pool.hpp>

#include <sched/detail/mapped_memory.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench_common.hpp"
#include <uv.h>

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
namespace asio = boost::asio;

// Item bodies count real runs here (items whose delay ended within the run).
std::atomic<std::uint64_t> fired{0};

void count_fired(std::atomic<std::uint64_t>* counter)
{
    counter->fetch_add(1, std::memory_order_relaxed);
}

// ----- running producers -------------------------------------------------------------------------

// CPU time this thread has used.
std::chrono::nanoseconds thread_cpu_time()
{
    timespec ts{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

// A run on several threads: when the last one was set up, first start, last end, and the CPU time
// the threads used in between.
struct span
{
    clock_type::time_point ready; // the last thread done with its setup
    clock_type::time_point first_start;
    clock_type::time_point last_end;
    std::chrono::nanoseconds cpu{}; // summed over the threads, timed parts only
    std::uint64_t fired = 0;        // items that had run by the last end (not in the teardown)

    std::chrono::nanoseconds elapsed() const { return last_end - first_start; }

    // CPUs busy on average: ~threads when every thread ran all the time; less when a thread
    // slept (waiting for a lock or for work) or the machine did not give it a core.
    double cpu_util() const
    {
        return static_cast<double>(cpu.count()) / static_cast<double>(elapsed().count());
    }
};

// Runs body(index, start, stop) on `threads` new threads. Each body does its untimed setup,
// calls start() (all threads meet at a barrier, wait for `start_at` if it is still ahead, then
// each takes its start time), does its timed part, calls stop() (takes its end time, then waits
// for all threads at a barrier, so that no thread's teardown overlaps another's timed part), then
// its untimed teardown.
template <class Body>
span run_threads(std::size_t threads, Body body, clock_type::time_point start_at = {})
{
    std::barrier sync(static_cast<std::ptrdiff_t>(threads));
    std::vector<clock_type::time_point> readies(threads), starts(threads), ends(threads);
    std::vector<std::chrono::nanoseconds> cpu(threads);
    std::uint64_t fired_by_end = 0;
    {
        std::vector<std::jthread> workers;
        for (std::size_t i = 0; i < threads; ++i)
        {
            workers.emplace_back([&, i] {
                const auto start = [&] {
                    readies[i] = clock_type::now();
                    sync.arrive_and_wait();
                    std::this_thread::sleep_until(start_at);
                    starts[i] = clock_type::now();
                    cpu[i] = thread_cpu_time();
                };
                const auto stop = [&] {
                    ends[i] = clock_type::now();
                    cpu[i] = thread_cpu_time() - cpu[i];
                    sync.arrive_and_wait();
                    if (i == 0)
                        fired_by_end = fired.load();
                };
                body(i, start, stop);
            });
        }
    }
    span out{*std::max_element(readies.begin(), readies.end()),
             *std::min_element(starts.begin(), starts.end()),
             *std::max_element(ends.begin(), ends.end())};
    for (const auto c : cpu)
        out.cpu += c;
    out.fired = fired_by_end;
    return out;
}

// Pairs/s (items_per_second), ns per pair, and cpu_util: read the two-thread rows with it. On
// this shared 2-core machine another tenant often holds a core; the sharded rows (no shared
// state) show cpu_util near 2 only when both cores were really there.
void report_w1(benchmark::State& state, const span& run, std::int64_t pairs)
{
    state.SetIterationTime(std::chrono::duration<double>(run.elapsed()).count());
    state.SetItemsProcessed(pairs); // items_per_second = pairs/s
    state.counters["ns_per_pair"] = bench::ns_per(run.elapsed(), static_cast<double>(pairs));
    state.counters["cpu_util"] = run.cpu_util();
    state.counters["fired"] = static_cast<double>(run.fired);
}

// ----- W1's standing population: due from the churn's start ----------------------------------

// When a W1 run's churn starts, and when its standing items are due from.
struct churn_plan
{
    clock_type::time_point start;    // the churn's planned start: it waits for it
    clock_type::time_point due_from; // the standing items are due from here + U[1 s, 10 s]
};

// The longest setup time measured for each W1 row (named by its arguments), to plan its next run.
std::map<std::string, clock_type::duration> setup_times;

double milliseconds(clock_type::duration d)
{
    return std::chrono::duration<double, std::milli>(d).count();
}

// One run of W1's row `row` (`pairs` cancel+schedule pairs): run(plan, pairs) sets up, churns
// and tears down, and returns the span. The churn is planned to start 1.5 times the row's longest
// setup so far, plus 20 ms, after the setup begins (the machine is shared: setup times vary by 2x
// from one run to the next). The row's first run rehearses its setup first (run(plan, 0), the
// items due an hour later), to measure it.
template <class Run>
void run_w1_row(benchmark::State& state, const std::string& row, std::int64_t pairs, Run run)
{
    auto known = setup_times.find(row);
    if (known == setup_times.end())
    {
        const clock_type::time_point begun = clock_type::now();
        const span rehearsal = run(churn_plan{begun, begun + 1h}, 0);
        known = setup_times.emplace(row, rehearsal.ready - begun).first;
    }
    fired = 0;
    const clock_type::time_point begun = clock_type::now();
    const clock_type::time_point start = begun + known->second * 3 / 2 + 20ms;
    const span done = run(churn_plan{start, start}, pairs);
    known->second = std::max(known->second, done.ready - begun);
    report_w1(state, done, pairs);
    state.counters["setup_ms"] = milliseconds(done.ready - begun);
    state.counters["start_late_ms"] = milliseconds(done.first_start - start);
}

// A row's name in setup_times: a contestant and its arguments.
std::string row_name(const char* contestant, std::initializer_list<std::int64_t> args)
{
    std::string out = contestant;
    for (const std::int64_t a : args)
    {
        out += '/';
        out += std::to_string(a);
    }
    return out;
}

// ----- W1 with sched -----------------------------------------------------------------------------

// One producer's churn on `pool`: p standing items due from `due_from`, then m cancel+schedule
// pairs (timed).
void sched_churn(sched::scheduled_thread_pool& pool,
                 std::size_t p,
                 std::int64_t m,
                 clock_type::time_point due_from,
                 std::uint64_t seed,
                 const std::function<void()>& start,
                 const std::function<void()>& stop)
{
    bench::rng rng(seed);
    std::atomic<std::uint64_t>* const counter = &fired;
    const auto body = [counter] {
        count_fired(counter);
    };
    const auto schedule = [&] {
        return pool.schedule(rng.uniform(1s, 10s), body);
    };
    std::vector<sched::scheduled_future<void>> ring;
    ring.reserve(p);
    for (std::size_t i = 0; i < p; ++i)
        ring.push_back(pool.schedule_at(due_from + rng.uniform(1s, 10s), body));
    for (auto& future : ring) // the warm-up
    {
        benchmark::DoNotOptimize(future.cancel());
        future = pool.schedule_at(due_from + rng.uniform(1s, 10s), body);
    }

    start();
    std::size_t head = 0;
    for (std::int64_t i = 0; i < m; ++i)
    {
        benchmark::DoNotOptimize(ring[head].cancel());
        ring[head] = schedule(); // drops the cancelled future, freeing its task
        if (++head == p)
            head = 0;
    }
    stop();

    for (auto& future : ring) // not timed
        future.cancel();
}

// range(0) = P, range(1) = M, range(2) = producers, range(3) = 1 for one pool per producer.
void w1_sched(benchmark::State& state)
{
    const auto p = static_cast<std::size_t>(state.range(0));
    const std::int64_t m = state.range(1);
    const auto producers = static_cast<std::size_t>(state.range(2));
    const bool sharded = state.range(3) != 0;
    if (producers < 1 || producers > 2)
    {
        state.SkipWithError("1 or 2 producers");
        return;
    }
    const auto count = static_cast<std::int64_t>(producers);
    for (auto _ : state)
    {
        const auto run = [&](const churn_plan& plan, std::int64_t pairs) {
            // Shared: one pool with a worker per producer; sharded: one single-worker pool each.
            // (Local objects, not a container: clang warns about destroying a pool anywhere else,
            // since it has virtual functions but no virtual destructor and is not final.)
            const auto run_on = [&](std::array<sched::scheduled_thread_pool*, 2> pools) {
                const auto body = [&](std::size_t i, const auto& start, const auto& stop) {
                    sched_churn(*pools[i], p / producers, pairs / count, plan.due_from, 1000 + i,
                                start, stop);
                };
                return run_threads(producers, body, plan.start);
            };
            sched::scheduled_thread_pool first(sharded ? 1 : producers);
            if (sharded && producers == 2)
            {
                sched::scheduled_thread_pool second(1);
                return run_on({&first, &second});
            }
            return run_on({&first, &first});
        };
        run_w1_row(state, row_name("sched", {std::int64_t(p), count, sharded}), m / count * count,
                   run);
    }
}

// ----- W1 with Asio ------------------------------------------------------------------------------

// One churn chain on an io_context: p standing timers in a ring of slots; chunk() does up to
// `chunk_pairs` pairs, then posts itself until m pairs are done; the last chunk calls `done` (which
// stops the io_context once every chain is done).
class asio_churn
{
public:
    static constexpr std::int64_t chunk_pairs = 256;

    asio_churn(asio::io_context& io,
               std::size_t p,
               std::int64_t m,
               clock_type::time_point due_from,
               std::uint64_t seed,
               bool reuse)
        : io_(io), ring_(p), left_(m), rng_(seed), reuse_(reuse)
    {
        for (auto& slot : ring_) // setup, not timed: due from `due_from`
        {
            slot.emplace(io_, due_from + rng_.uniform(1s, 10s));
            arm(*slot);
        }
        std::size_t warmed = 0;
        for (auto& slot : ring_) // the warm-up, draining the aborted waits as the chunks do
        {
            if (reuse_)
                slot->expires_at(due_from + rng_.uniform(1s, 10s));
            else
                slot.emplace(io_, due_from + rng_.uniform(1s, 10s));
            arm(*slot);
            if (++warmed % chunk_pairs == 0)
                io_.poll();
        }
        io_.poll();
    }

    // Starts the chain; `done` runs in the io_context's thread after the last pair.
    void post(std::function<void()> done)
    {
        done_ = std::move(done);
        asio::post(io_, [this] { chunk(); });
    }

    // Destroys the timers (cancelling their waits) and returns; run or poll the io_context after
    // to drain the aborted handlers.
    void clear() { ring_.clear(); }

private:
    void arm(asio::steady_timer& timer)
    {
        std::atomic<std::uint64_t>* const counter = &fired;
        timer.async_wait([counter](const boost::system::error_code& ec) {
            if (!ec)
                count_fired(counter);
        });
    }

    void chunk()
    {
        const std::int64_t n = std::min(left_, chunk_pairs);
        for (std::int64_t i = 0; i < n; ++i)
        {
            std::optional<asio::steady_timer>& slot = ring_[head_];
            if (reuse_)
                slot->expires_after(rng_.uniform(1s, 10s)); // cancels the pending wait
            else
                slot.emplace(io_, rng_.uniform(1s, 10s)); // destroying the old one cancels it
            arm(*slot);
            if (++head_ == ring_.size())
                head_ = 0;
        }
        left_ -= n;
        if (left_ > 0)
            asio::post(io_, [this] { chunk(); }); // runs after this chunk's aborted handlers
        else
            done_();
    }

    asio::io_context& io_;
    std::vector<std::optional<asio::steady_timer>> ring_;
    std::size_t head_ = 0;
    std::int64_t left_;
    bench::rng rng_;
    bool reuse_;
    std::function<void()> done_;
};

// Drains what cancelled timers left behind.
void drain(asio::io_context& io)
{
    io.restart();
    io.poll();
}

// range(0) = P, range(1) = M, range(2) = threads, range(3) = 1 for one io_context per thread,
// range(4) = 1 to reuse timer objects.
void w1_asio(benchmark::State& state)
{
    const auto p = static_cast<std::size_t>(state.range(0));
    const std::int64_t m = state.range(1);
    const auto threads = static_cast<std::size_t>(state.range(2));
    const bool sharded = state.range(3) != 0;
    const bool reuse = state.range(4) != 0;
    const std::size_t p_each = p / threads;
    const auto count = static_cast<std::int64_t>(threads);
    for (auto _ : state)
    {
        const auto run = [&](const churn_plan& plan, std::int64_t pairs) {
            const std::int64_t m_each = pairs / count;
            if (sharded || threads == 1)
            {
                // One io_context per thread, each with its own chain.
                const auto body = [&](std::size_t i, const auto& start, const auto& stop) {
                    asio::io_context io(1);
                    asio_churn churn(io, p_each, m_each, plan.due_from, 2000 + i, reuse);
                    churn.post([&io] { io.stop(); });
                    start();
                    io.run(); // the pending timers keep it busy: the last chunk stops it
                    stop();
                    churn.clear();
                    drain(io);
                };
                return run_threads(threads, body, plan.start);
            }
            // One io_context, run by all threads, one chain per thread.
            asio::io_context io(static_cast<int>(threads));
            std::vector<std::unique_ptr<asio_churn>> chains;
            std::atomic<std::size_t> chains_left{threads};
            for (std::size_t i = 0; i < threads; ++i) // each warms up polling the io_context:
                chains.push_back(std::make_unique<asio_churn>(io, p_each, m_each, plan.due_from,
                                                              2000 + i, reuse));
            for (const auto& chain : chains) // so none is posted before all are built
                chain->post([&] {
                    if (chains_left.fetch_sub(1) == 1)
                        io.stop();
                });
            const auto body = [&](std::size_t, const auto& start, const auto& stop) {
                start();
                io.run(); // until the last chain to finish stops it
                stop();
            };
            const span out = run_threads(threads, body, plan.start);
            for (const auto& chain : chains)
                chain->clear();
            drain(io);
            return out;
        };
        run_w1_row(state, row_name("asio", {std::int64_t(p), count, sharded, reuse}),
                   m / count * count, run);
    }
}

// ----- W1 with libuv -----------------------------------------------------------------------------

void on_uv_timer(uv_timer_t* timer)
{
    count_fired(static_cast<std::atomic<std::uint64_t>*>(timer->data));
}

// Checks a libuv call that cannot fail here; a failure aborts the benchmark run.
void uv_check(int rc)
{
    if (rc != 0)
    {
        std::fprintf(stderr, "libuv: %s\n", uv_strerror(rc));
        std::abort();
    }
}

std::uint64_t
uniform_ms(bench::rng& rng, std::chrono::milliseconds lo, std::chrono::milliseconds hi)
{
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(rng.uniform(lo, hi)).count());
}

// range(0) = P, range(1) = M. One thread: the benchmark's.
void w1_libuv(benchmark::State& state)
{
    const auto p = static_cast<std::size_t>(state.range(0));
    const std::int64_t m = state.range(1);
    for (auto _ : state)
    {
        const auto run = [&](const churn_plan& plan, std::int64_t pairs) {
            uv_loop_t loop;
            uv_check(uv_loop_init(&loop));
            std::vector<uv_timer_t> ring(p);
            bench::rng rng(1000);
            // Setup, not timed. libuv's timeouts count from the loop's time, read here.
            uv_update_time(&loop);
            const clock_type::time_point loop_time = clock_type::now();
            const auto start_timer = [&](uv_timer_t& timer) {
                const auto due = plan.due_from + rng.uniform(1s, 10s);
                const auto timeout =
                    std::chrono::duration_cast<std::chrono::milliseconds>(due - loop_time);
                uv_check(uv_timer_start(&timer, on_uv_timer,
                                        static_cast<std::uint64_t>(timeout.count()), 0));
            };
            for (uv_timer_t& timer : ring)
            {
                uv_check(uv_timer_init(&loop, &timer));
                timer.data = &fired;
                start_timer(timer);
            }
            for (uv_timer_t& timer : ring) // the warm-up
            {
                uv_check(uv_timer_stop(&timer));
                start_timer(timer);
            }

            const auto body = [&](std::size_t, const auto& start, const auto& stop) {
                start();
                std::size_t head = 0;
                for (std::int64_t i = 0; i < pairs; ++i)
                {
                    if (i % 256 == 0)
                        uv_update_time(&loop); // what a turn of the loop does
                    uv_timer_t& timer = ring[head];
                    uv_check(uv_timer_stop(&timer));
                    uv_check(uv_timer_start(&timer, on_uv_timer, uniform_ms(rng, 1s, 10s), 0));
                    if (++head == p)
                        head = 0;
                }
                stop();
            };
            const span out = run_threads(1, body, plan.start);

            for (uv_timer_t& timer : ring) // not timed
                uv_close(reinterpret_cast<uv_handle_t*>(&timer), nullptr);
            uv_check(uv_run(&loop, UV_RUN_NOWAIT)); // runs the close callbacks
            uv_check(uv_loop_close(&loop));
            return out;
        };
        run_w1_row(state, row_name("libuv", {std::int64_t(p)}), m, run);
    }
}

// ----- W2 ----------------------------------------------------------------------------------------

// An allocator that maps each allocation from the kernel and unmaps it when it is freed, for W2's
// vectors of handles. From malloc, they would come from its heap once its dynamic mmap threshold
// has grown (after the first large block freed in the process: a repetition's or another row's),
// and, freed below blocks still in use, their pages would stay resident: 8 bytes a future in
// every "after" reading but the first run's. The vector is the caller's, not the library's; with
// this it leaves nothing behind, and the readings after dropping the handles are the library's.
template <class T>
struct mapped_allocator
{
    using value_type = T;

    mapped_allocator() = default;
    template <class U>
    mapped_allocator(const mapped_allocator<U>&) noexcept
    {}

    T* allocate(std::size_t n)
    {
        return static_cast<T*>(
            sched::detail::map_memory(std::max<std::size_t>(n, 1) * sizeof(T), alignof(T)));
    }

    void deallocate(T* p, std::size_t n) noexcept
    {
        sched::detail::unmap_memory(p, std::max<std::size_t>(n, 1) * sizeof(T), alignof(T));
    }

    friend bool operator==(const mapped_allocator&, const mapped_allocator&) = default;
};

template <class T>
using mapped_vector = std::vector<T, mapped_allocator<T>>;

// The order W2 cancels its n items in: a random permutation of 0 .. n - 1, the same in each run.
mapped_vector<std::uint32_t> cancel_order(std::size_t n)
{
    mapped_vector<std::uint32_t> order(n);
    std::iota(order.begin(), order.end(), std::uint32_t(0));
    bench::rng rng(12);
    for (std::size_t i = n; i > 1; --i)
        std::swap(order[i - 1], order[rng.next() % i]);
    return order;
}

struct rss_readings
{
    std::int64_t before = 0;
    std::int64_t pending = 0;         // everything scheduled
    std::int64_t pending_trimmed = 0; // the same after malloc_trim(0)
    std::int64_t cancelled = 0;       // all cancelled, handles (futures / timers) still held
    std::int64_t dropped = 0;         // handles destroyed too
    std::int64_t trimmed = 0;         // after malloc_trim(0)
};

void report_w2(benchmark::State& state,
               std::size_t n,
               std::chrono::nanoseconds schedule_time,
               std::chrono::nanoseconds cancel_time,
               const rss_readings& rss,
               std::size_t handle_size)
{
    const auto count = static_cast<double>(n);
    state.SetIterationTime(std::chrono::duration<double>(schedule_time + cancel_time).count());
    state.counters["schedule_ns"] = bench::ns_per(schedule_time, count);
    state.counters["schedule_per_s"] = bench::per_second(schedule_time, count);
    state.counters["cancel_ns"] = bench::ns_per(cancel_time, count);
    state.counters["cancel_per_s"] = bench::per_second(cancel_time, count);
    const auto growth = static_cast<double>(rss.pending - rss.before) / count;
    state.counters["B_per_item"] = growth; // including the vector of handles
    state.counters["B_per_item_excl_vec"] = growth - static_cast<double>(handle_size);
    state.counters["B_per_item_trimmed"] =
        bench::bytes_per(rss.pending_trimmed - rss.before, count);
    state.counters["B_after_cancel"] = bench::bytes_per(rss.cancelled - rss.before, count);
    state.counters["B_after_drop"] = bench::bytes_per(rss.dropped - rss.before, count);
    state.counters["B_after_trim"] = bench::bytes_per(rss.trimmed - rss.before, count);
    state.counters["handle_size"] = static_cast<double>(handle_size);
    state.counters["fired"] = static_cast<double>(fired.load());
}

void w2_sched(benchmark::State& state)
{
    const auto n = static_cast<std::size_t>(state.range(0));
    fired = 0;
    for (auto _ : state)
    {
        bench::rng rng(11);
        std::atomic<std::uint64_t>* const counter = &fired;
        sched::scheduled_thread_pool pool(1);
        rss_readings rss;
        const auto order = cancel_order(n);
        mapped_vector<sched::scheduled_future<void>> futures;
        bench::trim_heap();
        rss.before = bench::vm_rss_bytes();
        futures.reserve(n); // reserved, not yet resident: its pages count as the futures fill it

        const auto schedule_time = bench::timed([&] {
            for (std::size_t i = 0; i < n; ++i)
                futures.push_back(
                    pool.schedule(rng.uniform(60s, 120s), [counter] { count_fired(counter); }));
        });
        rss.pending = bench::vm_rss_bytes();
        bench::trim_heap(); // drops what glibc kept of outgrown arrays
        rss.pending_trimmed = bench::vm_rss_bytes();
        const auto cancel_time = bench::timed([&] {
            for (const std::uint32_t i : order)
                benchmark::DoNotOptimize(futures[i].cancel());
        });
        rss.cancelled = bench::vm_rss_bytes();
        decltype(futures)().swap(futures);
        bench::await_span_decay();
        rss.dropped = bench::vm_rss_bytes();
        bench::trim_heap();
        rss.trimmed = bench::vm_rss_bytes();
        report_w2(state, n, schedule_time, cancel_time, rss, sizeof(sched::scheduled_future<void>));
    }
}

void w2_asio(benchmark::State& state)
{
    const auto n = static_cast<std::size_t>(state.range(0));
    fired = 0;
    for (auto _ : state)
    {
        bench::rng rng(11);
        std::atomic<std::uint64_t>* const counter = &fired;
        asio::io_context io(1);
        rss_readings rss;
        const auto order = cancel_order(n);
        mapped_vector<asio::steady_timer> timers;
        bench::trim_heap();
        rss.before = bench::vm_rss_bytes();
        timers.reserve(n);

        const auto schedule_time = bench::timed([&] {
            for (std::size_t i = 0; i < n; ++i)
            {
                timers.emplace_back(io, rng.uniform(60s, 120s));
                timers.back().async_wait([counter](const boost::system::error_code& ec) {
                    if (!ec)
                        count_fired(counter);
                });
            }
        });
        rss.pending = bench::vm_rss_bytes();
        bench::trim_heap(); // drops what glibc kept of outgrown arrays
        rss.pending_trimmed = bench::vm_rss_bytes();
        const auto cancel_time = bench::timed([&] {
            for (const std::uint32_t i : order)
                timers[i].cancel();
            io.poll(); // run the N aborted handlers: only then is a wait's memory released
        });
        rss.cancelled = bench::vm_rss_bytes();
        decltype(timers)().swap(timers);
        bench::await_span_decay();
        rss.dropped = bench::vm_rss_bytes();
        bench::trim_heap();
        rss.trimmed = bench::vm_rss_bytes();
        report_w2(state, n, schedule_time, cancel_time, rss, sizeof(asio::steady_timer));
    }
}

} // namespace

int main(int argc, char** argv)
{
    bench::flags flags({
        {"p", "100k", "W1 standing populations P for one producer (a list: 10k,100k,1M)"},
        {"p2", "100k", "W1 standing populations P for two producers (split between them)"},
        {"m", "1M", "W1 cancel+schedule pairs (M, split between producers)"},
        {"n", "1M", "W2 pending items (N)"},
    });
    flags.parse(argc, argv);
    const std::vector<std::int64_t> ps = flags.sizes("p");
    const std::vector<std::int64_t> p2s = flags.sizes("p2");
    const std::int64_t m = flags.size("m");
    const std::int64_t n = flags.size("n");

    const auto w1 = [](const char* name, auto fn, std::vector<std::int64_t> args,
                       std::vector<std::string> names) {
        benchmark::RegisterBenchmark(name, fn)
            ->Args(args)
            ->ArgNames(names)
            ->Iterations(1)
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond);
    };
    for (const std::int64_t p : ps) // one producer thread
    {
        w1("W1_churn/sched", w1_sched, {p, m, 1, 0}, {"P", "M", "threads", "sharded"});
        w1("W1_churn/asio", w1_asio, {p, m, 1, 1, 0}, {"P", "M", "threads", "sharded", "reuse"});
        w1("W1_churn/asio_reuse", w1_asio, {p, m, 1, 1, 1},
           {"P", "M", "threads", "sharded", "reuse"});
        w1("W1_churn/libuv", w1_libuv, {p, m}, {"P", "M"});
    }
    for (const std::int64_t p : p2s) // two producer threads
    {
        w1("W1_churn/sched_shared", w1_sched, {p, m, 2, 0}, {"P", "M", "threads", "sharded"});
        w1("W1_churn/sched_sharded", w1_sched, {p, m, 2, 1}, {"P", "M", "threads", "sharded"});
        w1("W1_churn/asio_sharded", w1_asio, {p, m, 2, 1, 0},
           {"P", "M", "threads", "sharded", "reuse"});
        w1("W1_churn/asio_shared", w1_asio, {p, m, 2, 0, 0},
           {"P", "M", "threads", "sharded", "reuse"});
    }

    const auto w2 = [n](const char* name, void (*fn)(benchmark::State&)) {
        benchmark::RegisterBenchmark(name, fn)
            ->Arg(n)
            ->ArgName("N")
            ->Iterations(1)
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond);
    };
    w2("W2_mass_pending/sched", w2_sched);
    w2("W2_mass_pending/asio", w2_asio);

    return bench::run_registered(argc, argv);
}
