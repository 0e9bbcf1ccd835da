// The Asio front: sched::scheduler::async_wait and sched::deadline (on a real
// sched::scheduled_thread_pool, steady_clock, one worker) against the baseline Boost.Asio 1.81
// steady_timer on an io_context, in the same run, on the same threads, at the same sizes.
//
// Workloads (see /work/shared/workloads.md):
//   W1  timeout churn through the Asio front: P pending timeouts due in [1 s, 10 s]; M times
//       cancel the oldest and arm a new one. Every cancelled operation's handler must run
//       (operation_aborted). A second row arms a timeout and cancels it at once (the fixed cost
//       of an operation, with no heap work: the new timeout is always the latest).
//   W5  idle-deadline resets: N connections each with a deadline armed 30 s ahead; M times pick a
//       random connection and push its deadline to now + 30 s.
//   W3  lateness: T timers armed as fast as possible, each due a random delay after it is armed;
//       lateness = when the handler ran on an io_context thread − the due time.
//
// W1 and W5 measure every contestant in the same benchmark, interleaved: the M operations are
// split into R rounds (--rounds), and each round runs one block per contestant, in an order that
// rotates from round to round, so that the machine's noise (it is shared: ±20% from one minute to
// the next) falls on all of them alike. Each contestant has its own io_context (concurrency hint
// 1) and its own standing population; one thread, the benchmark's, runs everything. A block runs
// its operations in chunks of 256 (--chunk), each chunk inside a handler posted to the contestant's
// io_context followed by io_context::poll(), which runs the chunk and then every completion
// handler it queued. Running inside a handler is Asio's best case: its completions (and ours,
// posted through the scheduler's executor) take the io_context's thread-private queue, with no
// lock and no wake-up. Only the blocks are timed; setting up the populations, and at the end
// cancelling them and draining their handlers, are not.
//
// Every handler carries an operation number and counts its runs and its error_code; at the end
// each benchmark checks that every handler ran exactly once, with the expected code (any other
// outcome fails the benchmark with an error). Counters: <name>_per_s (operations per second),
// <name>_ns (ns per operation), ratio_<name> = <name>_ns / sched_ns (above 1: sched is faster;
// this run's ratio: scripts/bench_report.py divides the medians of the _ns counters instead),
// handlers (handlers run, all contestants), fired (handlers that saw success: should be 0).
//
// W1 (row W1_churn_asio_front), contestants:
//   sched       scheduler.async_wait(timeout, bind_cancellation_slot(signals[k].slot(), handler))
//               for timeout k of a ring of P; each operation emits signals[k] (terminal) to cancel
//               the oldest, whose handler is posted to the io_context with operation_aborted,
//               then arms a new timeout on signals[k]. The pool's worker sleeps throughout.
//   asio        The workload's baseline: a steady_timer object per timeout, in a slot of a ring
//               (std::optional, no allocation of its own). The oldest timer is destroyed, which
//               cancels its wait, and a new one made in its slot and armed (async_wait).
//   asio_reuse  Asio's cheapest idiom: the timer of the oldest timeout is reused for the new one
//               (expires_after cancels its pending wait; then a new async_wait).
//   asio_slot   As asio_reuse, but cancelled as sched is, through a cancellation signal per timer.
//   All draw the same timeouts from the same random sequence. The row runs twice: with a
//   16-byte handler (a small capture) and with a 112-byte one (handler_bytes:112), as large as a
//   coroutine's (use_awaitable) or a lambda's that holds a few shared_ptrs.
//
// W1 (row W1_arm_cancel_asio_front): P standing timeouts due in [10 s, 30 s]; each operation
// arms a 30 s timeout and cancels it at once. A second row has no standing timeouts (P = 0: the
// last pending timeout of a connection), so that each timeout armed is the earliest: Asio's
// reactor then sets its timerfd for it, a system call. Contestants:
//   sched       scheduler.async_wait(30s, bind_cancellation_slot(signal.slot(), handler)), then
//               signal.emit(terminal). One signal, reused by every operation.
//   asio        One steady_timer reused: expires_after(30s); async_wait(handler); cancel().
//   asio_slot   As asio, but cancelled as sched is: async_wait(bind_cancellation_slot(
//               signal.slot(), handler)); signal.emit(terminal).
//
// W5 (row W5_resets_asio_front), contestants:
//   sched   N sched::deadline objects, each expires_after(30s) then async_wait(handler); a
//           reset is deadline.expires_after(30s), which moves the armed wait in place and must
//           return true (counted: resets_true). No handler runs until the end, when every
//           deadline is cancelled.
//   asio    N steady_timers with a pending async_wait; a reset is timer.expires_after(30s)
//           (which cancels the pending wait: its handler runs with operation_aborted, drained by
//           the poll after the chunk; its return value, 1, is counted) and a new
//           async_wait(handler).
//   The connections are picked by the same random sequence for both.
//
// W5 counted whole (row W5_whole_run_asio_front): the same contestants, one at a time, each
// made just before its run; counts CPU, not time: the resetting thread's inside its blocks, and
// every other thread's (the pool's worker, which puts a deadline pushed back into the queue again
// when its old expiry comes) from the first reset until those re-queues are done. Counters
// sched_cpu_ns, asio_cpu_ns (per reset), ratio_asio, fired (connections no reset picked before
// their first expiry: sched's time out; steady_timer's io_context is not run after the resets, so
// its expired waits are cancelled with the rest at the end). Two runs: as W5 (rate 0: the resets
// as fast as they go; the deadlines first expire idle_ms after they are armed, a reset pushes one
// 3 × idle_ms ahead, and the run lasts until 0.3 × idle_ms after the first expiries), and a
// server's steady state (--steady_n connections, --steady_rate resets a second for --steady_s
// seconds, each connection in its turn, a 1 s idle deadline; the thread wakes every
// --steady_tick_us and makes the resets whose time has come), with a third contestant that resets
// nothing: pacing_cpu_ns, what the waking and the polling cost alone.
//
// W3 (rows W3_lateness/sched, W3_lateness/sched_no_slack, W3_lateness/sched_spin and
// W3_lateness/asio), each on its own io_context run by --threads threads. The benchmark thread
// arms T timers (--timers) as fast as it can, each due a delay uniform in [0, window]
// (--window_ms) after it is armed (the clock read as it is armed), so that the first timers fall
// due while the later ones are armed, as in the workload; then it waits. Counters: arm_ms (how long
// arming took) and wall_ms (from the first arm until the last handler ran).
//   sched   scheduler.async_wait(due, handler) on a pool with --threads workers: the scheduler's
//           timer on the io_context wakes one of its threads when the operation at the head of
//           the pool's queue is due (plus the pool's timer_slack, 50 µs by default, which lets
//           one wake-up take every timer that falls due meanwhile), and the handler runs there
//           (the workers sleep).
//   sched_no_slack  The same, with pool_options::timer_slack = 0 (wake on time).
//   sched_spin  The same, with pool_options::spin_before_due = --spin_us (200 µs): the timer
//           wakes that long before the head is due, and one io thread polls the clock for it,
//           in turns of 10 µs between other handlers; counter spin_us.
//   asio    steady_timer per timer, expires_at(due), async_wait(handler) (the io threads only,
//           woken by the reactor's timerfd).
//   The handler reads steady_clock::now() first thing. Counters: p50_us, p99_us, p999_us,
//   max_us (lateness), early (handlers that ran before their due time: must be 0; fails the
//   benchmark otherwise), errors (handlers with an error_code: must be 0); due_while_arming (the
//   timers due before the last was armed), p99_while_arming_us and p99_after_arming_us (the
//   lateness p99 of those and of the rest: the first come while the benchmark thread contends
//   with the io threads for the queue, as a server's own threads would).
//
// W3 burst (rows W3_burst/sched and W3_burst/asio): as W3, but the --burst_timers timers all fall
// due within --burst_spread_us (uniform), --burst_after_ms after the first is armed (a server
// whose connections all time out together): how soon the first handler runs (min_us) and the
// last (max_us) show how fast each contestant fires a backlog.
//
// Sizes are flags (see --help): --p, --m, --n, --resets, --timers, --window_ms, --rounds,
// --chunk, --threads; --lateness_out=DIR writes W3's lateness CDFs for the plots, one file a
// repetition (DIR/w3_<contestant>.K.dat, and counter cdf_index = K). Run several times
// and quote medians and the ratios; the machine is shared and noisy.

#include <sched/deadline.hpp>
#include <sched/scheduled_thread_pool.hpp>
#include <sched/scheduler.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/system/error_code.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench_common.hpp"
#include "io_threads.hpp"

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
namespace asio = boost::asio;
using error_code = boost::system::error_code;

// Operations per handler posted to the io_context (then poll() drains what they completed):
// --chunk. Asio's per-thread recycling allocator keeps two blocks per purpose, so with more than
// two completions queued at once, the operations that allocate at completion (sched's posts
// through an any_io_executor) go to malloc.
std::int64_t chunk_ops = 256;

// W3 writes each contestant's lateness CDF here when not empty, one file a repetition
// (w3_sched.0.dat, w3_asio.0.dat, ...: bench::write_run_cdf): --lateness_out.
std::string lateness_out;

// W3_lateness/sched_spin's pool_options::spin_before_due (--spin_us).
std::chrono::microseconds spin{0};

// W3_burst: the span its timers fall due within (--burst_spread_us).
std::chrono::microseconds burst_spread{0};

// ----- handlers that count
// ------------------------------------------------------------------------

// What the handlers of one contestant saw. Handlers run on the io_context's thread only.
struct handler_log
{
    std::vector<std::uint8_t> runs; // per operation number: how many times its handler ran
    std::uint64_t aborted = 0;      // operation_aborted
    std::uint64_t succeeded = 0;    // success: the timeout fired
    std::uint64_t other = 0;        // any other code

    explicit handler_log(std::size_t operations) : runs(operations, 0) {}

    std::uint64_t total() const { return aborted + succeeded + other; }

    // Whether the handlers of the first `operations` operations each ran once, and no other did.
    bool each_ran_once(std::size_t operations) const
    {
        for (std::size_t i = 0; i < runs.size(); ++i)
        {
            if (runs[i] != (i < operations ? 1 : 0))
                return false;
        }
        return true;
    }
};

// A handler of operation number `id`: 16 bytes, like a small capture.
struct counted_handler
{
    handler_log* log;
    std::uint32_t id;

    void operator()(const error_code& ec) const
    {
        ++log->runs[id];
        if (ec == asio::error::operation_aborted)
            ++log->aborted;
        else if (!ec)
            ++log->succeeded;
        else
            ++log->other;
    }
};

// A handler as large as a coroutine's (use_awaitable's makes sched's operation 80 bytes larger
// than counted_handler's) or a lambda holding a few shared_ptrs: counted_handler and 96 bytes it
// carries along.
struct large_handler
{
    counted_handler counted;
    std::array<std::byte, 96> payload{};

    void operator()(const error_code& ec) const { counted(ec); }
};

// Runs `ops` calls of `op` in chunks, each chunk inside a handler on `io`, each followed by poll()
// (which runs the chunk, then the completions it queued).
template <class Op>
void run_chunks(asio::io_context& io, std::int64_t ops, Op& op)
{
    while (ops > 0)
    {
        const std::int64_t n = std::min(ops, chunk_ops);
        asio::post(io, [&op, n] {
            for (std::int64_t i = 0; i < n; ++i)
                op();
        });
        if (io.stopped()) // it stops when it runs out of work; pending operations prevent that
            io.restart();
        io.poll();
        ops -= n;
    }
}

// Drains what is left on `io` once everything has been cancelled.
void drain(asio::io_context& io)
{
    io.restart();
    io.poll();
}

// ----- interleaved contestants ----------------------------------------------------------------

// A contestant in an interleaved benchmark: setup in its constructor (not timed); block(n) runs n
// operations (timed); finish() cancels what is left and drains it (not timed) and says whether its
// handlers all ran as expected. Its handlers, numbered in the order they are made, count their
// runs in its log.
class contestant
{
public:
    contestant(std::string name, std::size_t operations) : log_(operations), name_(std::move(name))
    {}
    virtual ~contestant() = default;

    const std::string& name() const { return name_; }

    virtual void block(std::int64_t ops) = 0;

    // Cancels and drains what is left; returns an error message, or "" if every handler ran as
    // expected.
    virtual std::string finish() = 0;

    std::uint64_t handlers() const { return log_.total(); }
    std::uint64_t fired() const { return log_.succeeded; }

    std::chrono::nanoseconds elapsed{};
    std::int64_t done = 0;

protected:
    counted_handler next_handler() { return {&log_, next_id_++}; }

    handler_log log_;
    std::uint32_t next_id_ = 0; // handlers made so far

private:
    std::string name_;
};

// Checks a log in which the first `operations` operations each completed once with
// operation_aborted.
std::string check_aborted(const std::string& name, const handler_log& log, std::size_t operations)
{
    if (log.total() != operations || log.aborted != operations || !log.each_ran_once(operations))
    {
        return name + ": expected " + std::to_string(operations) +
               " handlers each run once with operation_aborted; got " +
               std::to_string(log.total()) + " runs (" + std::to_string(log.aborted) +
               " aborted, " + std::to_string(log.succeeded) + " succeeded, " +
               std::to_string(log.other) + " other)";
    }
    return {};
}

// Runs the contestants interleaved and reports them; the first one is sched, the one that the
// ratios divide by.
void run_interleaved(benchmark::State& state,
                     const std::vector<std::unique_ptr<contestant>>& all,
                     std::int64_t ops,
                     std::int64_t rounds)
{
    rounds = std::clamp<std::int64_t>(rounds, 1, ops);
    for (std::int64_t r = 0; r < rounds; ++r)
    {
        // Round r's share of the operations (the last round takes the remainder).
        const std::int64_t n = r + 1 < rounds ? ops / rounds : ops - ops / rounds * (rounds - 1);
        for (std::size_t k = 0; k < all.size(); ++k)
        {
            contestant& c = *all[(static_cast<std::size_t>(r) + k) % all.size()];
            c.elapsed += bench::timed([&] { c.block(n); });
            c.done += n;
        }
    }
    std::string error;
    std::uint64_t handlers = 0;
    std::uint64_t fired = 0;
    std::chrono::nanoseconds total{};
    for (const auto& c : all)
    {
        std::string e = c->finish();
        if (error.empty())
            error = std::move(e);
        handlers += c->handlers();
        fired += c->fired();
        total += c->elapsed;
    }
    state.SetIterationTime(std::chrono::duration<double>(total).count());
    const double sched_ns =
        static_cast<double>(all.front()->elapsed.count()) / static_cast<double>(ops);
    for (const auto& c : all)
    {
        const auto count = static_cast<double>(c->done);
        state.counters[c->name() + "_per_s"] = bench::per_second(c->elapsed, count);
        state.counters[c->name() + "_ns"] = bench::ns_per(c->elapsed, count);
        if (c != all.front())
            state.counters["ratio_" + c->name()] = bench::ns_per(c->elapsed, count) / sched_ns;
    }
    state.counters["handlers"] = static_cast<double>(handlers);
    state.counters["fired"] = static_cast<double>(fired);
    if (!error.empty())
        state.SkipWithError(error.c_str());
}

// ----- W1: timeout churn ----------------------------------------------------------------------

// The workload's timeouts: uniform in [1 s, 10 s].
std::chrono::nanoseconds timeout(bench::rng& rng)
{
    return rng.uniform(1s, 10s);
}

// Checks a log in which the first `operations` operations each completed once, cancelled or (a
// timeout that fell due during a slow run) fired.
std::string check_ran_once(const std::string& name, const handler_log& log, std::size_t operations)
{
    if (log.total() != operations || log.other != 0 || !log.each_ran_once(operations))
    {
        return name + ": expected " + std::to_string(operations) +
               " handlers each run once with operation_aborted or success; got " +
               std::to_string(log.total()) + " runs (" + std::to_string(log.other) + " other)";
    }
    return {};
}

// W1 as the workload defines it: P pending timeouts; each operation cancels the oldest and arms a
// new one. Timeout k of the ring is cancelled through signal k, then signal k's slot takes the new
// timeout (the cancelled operation's completion, still queued, no longer owns the slot).
template <class Handler>
class w1_sched final : public contestant
{
public:
    w1_sched(std::size_t p, std::int64_t m)
        : contestant("sched", p + static_cast<std::size_t>(m)),
          signals_(std::make_unique<asio::cancellation_signal[]>(p)), p_(p)
    {
        for (std::size_t k = 0; k < p; ++k)
            arm(k);
    }

    ~w1_sched() override
    {
        (void)pool_.shutdown_now(); // before the io_context and the signals go (nothing is left)
    }

    void block(std::int64_t ops) override
    {
        auto op = [this] {
            const std::size_t k = oldest_;
            oldest_ = k + 1 == p_ ? 0 : k + 1;
            signals_[k].emit(asio::cancellation_type::terminal);
            arm(k);
        };
        run_chunks(io_, ops, op);
    }

    std::string finish() override
    {
        for (std::size_t k = 0; k < p_; ++k)
            signals_[k].emit(asio::cancellation_type::terminal);
        drain(io_);
        return check_ran_once(name(), log_, next_id_);
    }

private:
    void arm(std::size_t k)
    {
        scheduler_.async_wait(timeout(rng_), asio::bind_cancellation_slot(signals_[k].slot(),
                                                                          Handler{next_handler()}));
    }

    asio::io_context io_{1};
    sched::scheduled_thread_pool pool_{1};
    sched::scheduler scheduler_{io_, pool_};
    bench::rng rng_{1};
    std::unique_ptr<asio::cancellation_signal[]> signals_;
    std::size_t p_;
    std::size_t oldest_ = 0;
};

// The baseline, three ways. "asio": the workload's, a steady_timer object per timeout: the oldest
// is destroyed (which cancels its wait), a new one made in its slot and armed. The slots are
// std::optional, as in the pool's W1 baseline: no timer costs an allocation of its own.
// "asio_reuse": Asio's cheapest idiom, a timer per pending timeout reused for the one that replaces
// it: expires_after (which cancels the pending wait) and a new async_wait. "asio_slot": reused, and
// cancelled as sched is, through a cancellation signal per timer.
template <class Handler>
class w1_asio final : public contestant
{
public:
    enum class way
    {
        new_timer,
        reuse,
        slot
    };

    w1_asio(std::size_t p, std::int64_t m, way w)
        : contestant(w == way::new_timer ? "asio"
                     : w == way::reuse   ? "asio_reuse"
                                         : "asio_slot",
                     p + static_cast<std::size_t>(m)),
          signals_(std::make_unique<asio::cancellation_signal[]>(p)), way_(w)
    {
        timers_ = std::vector<std::optional<asio::steady_timer>>(p);
        for (std::size_t k = 0; k < p; ++k)
        {
            timers_[k].emplace(io_);
            arm(k);
        }
    }

    void block(std::int64_t ops) override
    {
        auto op = [this] {
            const std::size_t k = oldest_;
            oldest_ = k + 1 == timers_.size() ? 0 : k + 1;
            switch (way_)
            {
            case way::new_timer:
                timers_[k].emplace(io_); // destroying the old timer cancels its wait
                break;
            case way::reuse:
                break; // expires_after cancels
            case way::slot:
                signals_[k].emit(asio::cancellation_type::terminal);
                break;
            }
            arm(k);
        };
        run_chunks(io_, ops, op);
    }

    std::string finish() override
    {
        for (auto& timer : timers_)
            timer->cancel();
        drain(io_);
        return check_ran_once(name(), log_, next_id_);
    }

private:
    void arm(std::size_t k)
    {
        asio::steady_timer& timer = *timers_[k];
        timer.expires_after(timeout(rng_));
        const Handler handler{next_handler()};
        if (way_ == way::slot)
            timer.async_wait(asio::bind_cancellation_slot(signals_[k].slot(), handler));
        else
            timer.async_wait(handler);
    }

    asio::io_context io_{1};
    bench::rng rng_{1};
    std::unique_ptr<asio::cancellation_signal[]> signals_;
    way way_;
    std::vector<std::optional<asio::steady_timer>> timers_;
    std::size_t oldest_ = 0;
};

template <class Handler>
void w1_churn_with(benchmark::State& state)
{
    const auto p = static_cast<std::size_t>(state.range(0));
    const std::int64_t m = state.range(1);
    using asio_side = w1_asio<Handler>;
    for (auto _ : state)
    {
        std::vector<std::unique_ptr<contestant>> all;
        all.push_back(std::make_unique<w1_sched<Handler>>(p, m));
        all.push_back(std::make_unique<asio_side>(p, m, asio_side::way::new_timer));
        all.push_back(std::make_unique<asio_side>(p, m, asio_side::way::reuse));
        all.push_back(std::make_unique<asio_side>(p, m, asio_side::way::slot));
        run_interleaved(state, all, m, state.range(2));
    }
}

// range(0) = P, range(1) = M, range(2) = rounds, range(3) = the handler's size in bytes.
void w1_churn(benchmark::State& state)
{
    static_assert(sizeof(counted_handler) == 16 && sizeof(large_handler) == 112);
    if (state.range(3) == sizeof(large_handler))
        w1_churn_with<large_handler>(state);
    else
        w1_churn_with<counted_handler>(state);
}

// ----- W1, arm and cancel at once -----------------------------------------------------------

// Standing timeouts for the arm-and-cancel row: due in [10 s, 30 s], as if armed earlier with a
// 30 s timeout; never due within a run.
std::chrono::nanoseconds standing_delay(bench::rng& rng)
{
    return rng.uniform(10s, 30s);
}

class w1_now_sched final : public contestant
{
public:
    w1_now_sched(std::size_t p, std::int64_t m)
        : contestant("sched", p + static_cast<std::size_t>(m)), standing_(p),
          signals_(std::make_unique<asio::cancellation_signal[]>(p))
    {
        bench::rng rng(1);
        for (std::size_t i = 0; i < p; ++i)
        {
            scheduler_.async_wait(standing_delay(rng),
                                  asio::bind_cancellation_slot(signals_[i].slot(), next_handler()));
        }
    }

    ~w1_now_sched() override
    {
        (void)pool_.shutdown_now(); // before the io_context and the signals go (nothing is left)
    }

    void block(std::int64_t ops) override
    {
        auto op = [this] {
            scheduler_.async_wait(30s,
                                  asio::bind_cancellation_slot(signal_.slot(), next_handler()));
            signal_.emit(asio::cancellation_type::terminal);
        };
        run_chunks(io_, ops, op);
    }

    std::string finish() override
    {
        for (std::size_t i = 0; i < standing_; ++i)
            signals_[i].emit(asio::cancellation_type::terminal);
        drain(io_);
        return check_aborted(name(), log_, next_id_);
    }

private:
    asio::io_context io_{1};
    sched::scheduled_thread_pool pool_{1};
    sched::scheduler scheduler_{io_, pool_};
    std::size_t standing_;
    std::unique_ptr<asio::cancellation_signal[]> signals_; // the standing operations'
    asio::cancellation_signal signal_;                     // the churn's, reused
};

class w1_now_asio final : public contestant
{
public:
    w1_now_asio(std::size_t p, std::int64_t m, bool slot)
        : contestant(slot ? "asio_slot" : "asio", p + static_cast<std::size_t>(m)), slot_(slot)
    {
        bench::rng rng(1);
        standing_.reserve(p);
        for (std::size_t i = 0; i < p; ++i)
        {
            standing_.emplace_back(io_, standing_delay(rng));
            standing_.back().async_wait(next_handler());
        }
    }

    void block(std::int64_t ops) override
    {
        if (slot_)
        {
            auto op = [this] {
                timer_.expires_after(30s);
                timer_.async_wait(asio::bind_cancellation_slot(signal_.slot(), next_handler()));
                signal_.emit(asio::cancellation_type::terminal);
            };
            run_chunks(io_, ops, op);
        }
        else
        {
            auto op = [this] {
                timer_.expires_after(30s);
                timer_.async_wait(next_handler());
                timer_.cancel();
            };
            run_chunks(io_, ops, op);
        }
    }

    std::string finish() override
    {
        for (auto& timer : standing_)
            timer.cancel();
        drain(io_);
        return check_aborted(name(), log_, next_id_);
    }

private:
    asio::io_context io_{1};
    bool slot_;
    std::vector<asio::steady_timer> standing_;
    asio::steady_timer timer_{io_};
    asio::cancellation_signal signal_;
};

// range(0) = P, range(1) = M, range(2) = rounds.
void w1_arm_cancel(benchmark::State& state)
{
    const auto p = static_cast<std::size_t>(state.range(0));
    const std::int64_t m = state.range(1);
    for (auto _ : state)
    {
        std::vector<std::unique_ptr<contestant>> all;
        all.push_back(std::make_unique<w1_now_sched>(p, m));
        all.push_back(std::make_unique<w1_now_asio>(p, m, false));
        all.push_back(std::make_unique<w1_now_asio>(p, m, true));
        run_interleaved(state, all, m, state.range(2));
    }
}

// ----- W5: idle-deadline resets ---------------------------------------------------------------

// The idle deadlines of W5's connections: connection i of n first expires `first` plus its share
// of `spread` from when it is armed (spread evenly, as a server's connections are), and a reset
// pushes one to `reset_to` from now. The resets pick connections at random, or `in_turn` (each
// connection once every n resets). A connection that no reset picks before its first expiry
// times out if `may_fire`; otherwise none may.
struct w5_idle
{
    clock_type::duration first = 30s;
    clock_type::duration spread = 0s;
    clock_type::duration reset_to = 30s;
    bool in_turn = false;
    bool may_fire = false;

    clock_type::duration first_expiry(std::size_t i, std::size_t n) const
    {
        return first +
               spread * static_cast<clock_type::rep>(i + 1) / static_cast<clock_type::rep>(n);
    }
};

// The connections a run of W5 resets, in order.
class w5_picks
{
public:
    w5_picks(std::size_t n, bool in_turn) : n_(n), in_turn_(in_turn) {}

    std::size_t next() { return in_turn_ ? turn_++ % n_ : rng_.next() % n_; }

private:
    std::size_t n_;
    bool in_turn_;
    bench::rng rng_{5};
    std::size_t turn_ = 0;
};

class w5_sched final : public contestant
{
public:
    explicit w5_sched(std::size_t n, w5_idle idle = {})
        : contestant("sched", n), picks_(n, idle.in_turn), reset_to_(idle.reset_to),
          may_fire_(idle.may_fire)
    {
        connections_.reserve(n);
        for (std::size_t i = 0; i < n; ++i)
        {
            sched::deadline& d = connections_.emplace_back(scheduler_);
            d.expires_after(idle.first_expiry(i, n)); // not armed yet: sets the wait's expiry
            d.async_wait(next_handler());
        }
    }

    ~w5_sched() override
    {
        connections_.clear();
        (void)pool_.shutdown_now();
    }

    void block(std::int64_t ops) override
    {
        auto op = [this] {
            resets_ += connections_[picks_.next()].expires_after(reset_to_) ? 1 : 0;
        };
        run_chunks(io_, ops, op);
    }

    std::string finish() override
    {
        for (auto& d : connections_)
            d.cancel();
        drain(io_);
        if (resets_ != static_cast<std::uint64_t>(done))
        {
            return "sched: expires_after returned true " + std::to_string(resets_) + " times of " +
                   std::to_string(done);
        }
        return may_fire_ ? check_ran_once(name(), log_, connections_.size())
                         : check_aborted(name(), log_, connections_.size());
    }

    std::uint64_t resets() const { return resets_; }

private:
    asio::io_context io_{1};
    sched::scheduled_thread_pool pool_{1};
    sched::scheduler scheduler_{io_, pool_};
    w5_picks picks_;
    clock_type::duration reset_to_;
    bool may_fire_;
    std::uint64_t resets_ = 0;
    std::vector<sched::deadline> connections_;
};

class w5_asio final : public contestant
{
public:
    w5_asio(std::size_t n, std::int64_t m, w5_idle idle = {})
        : contestant("asio", n + static_cast<std::size_t>(m)), picks_(n, idle.in_turn),
          reset_to_(idle.reset_to), may_fire_(idle.may_fire)
    {
        connections_.reserve(n);
        for (std::size_t i = 0; i < n; ++i)
        {
            asio::steady_timer& t = connections_.emplace_back(io_, idle.first_expiry(i, n));
            t.async_wait(next_handler());
        }
    }

    void block(std::int64_t ops) override
    {
        auto op = [this] {
            asio::steady_timer& t = connections_[picks_.next()];
            resets_ += t.expires_after(reset_to_); // cancels the pending wait: 1
            t.async_wait(next_handler());
        };
        run_chunks(io_, ops, op);
    }

    std::string finish() override
    {
        for (auto& t : connections_)
            t.cancel();
        drain(io_);
        if (resets_ != static_cast<std::uint64_t>(done))
        {
            return "asio: expires_after cancelled " + std::to_string(resets_) + " waits in " +
                   std::to_string(done) + " resets";
        }
        return may_fire_ ? check_ran_once(name(), log_, next_id_)
                         : check_aborted(name(), log_, next_id_);
    }

    std::uint64_t resets() const { return resets_; }

private:
    asio::io_context io_{1};
    w5_picks picks_;
    clock_type::duration reset_to_;
    bool may_fire_;
    std::uint64_t resets_ = 0;
    std::vector<asio::steady_timer> connections_;
};

// range(0) = N, range(1) = M (resets), range(2) = rounds.
void w5_resets(benchmark::State& state)
{
    const auto n = static_cast<std::size_t>(state.range(0));
    const std::int64_t m = state.range(1);
    for (auto _ : state)
    {
        auto sched_side = std::make_unique<w5_sched>(n);
        auto asio_side = std::make_unique<w5_asio>(n, m);
        w5_sched* s = sched_side.get();
        std::vector<std::unique_ptr<contestant>> all;
        all.push_back(std::move(sched_side));
        all.push_back(std::move(asio_side));
        run_interleaved(state, all, m, state.range(2));
        state.counters["resets_true"] = static_cast<double>(s->resets());
    }
}

// A contestant that resets nothing: its block() posts and polls as the others' do, so that a
// paced run of it costs what the pacing alone costs. Its io_context has a reactor, as theirs
// (and a server's) do: a wait that never ends keeps one, and each poll() asks it for events.
class w5_pacing final : public contestant
{
public:
    w5_pacing() : contestant("pacing", 1) { reactor_.async_wait(next_handler()); }

    void block(std::int64_t ops) override
    {
        auto op = [] {
        };
        run_chunks(io_, ops, op);
    }

    std::string finish() override
    {
        reactor_.cancel();
        drain(io_);
        return check_aborted(name(), log_, 1);
    }

private:
    asio::io_context io_{1};
    asio::steady_timer reactor_{io_, clock_type::time_point::max()};
};

// One contestant's whole run: `m` resets, as fast as it can (`interval` zero) or reset k at
// `interval` × k from the start, the thread waking every `tick` to make the resets whose time has
// come (as a server's thread makes those of the packets that came since it last woke); then it
// idles until `idle_until` from the start, if the resets ended sooner, and then for `tail`.
// Returns the CPU time of the resets (this thread's, in its blocks) and of every other thread
// (the pool's worker, re-queueing what the resets put off) from the first reset to the end: not
// this thread's sleeping and waking, which a server's thread would do for its packets anyway.
std::chrono::nanoseconds whole_run(contestant& c,
                                   std::int64_t m,
                                   clock_type::duration interval,
                                   clock_type::duration tick,
                                   clock_type::duration idle_until,
                                   clock_type::duration tail)
{
    std::chrono::nanoseconds in_blocks{};
    const auto block = [&](std::int64_t n) {
        const std::chrono::nanoseconds before = bench::thread_cpu_time();
        c.block(n);
        in_blocks += bench::thread_cpu_time() - before;
    };
    const std::chrono::nanoseconds process_start = bench::process_cpu_time();
    const std::chrono::nanoseconds thread_start = bench::thread_cpu_time();
    const clock_type::time_point start = clock_type::now();
    if (interval == clock_type::duration::zero())
        block(m);
    clock_type::time_point wake = start;
    for (std::int64_t done = 0; interval != clock_type::duration::zero() && done < m;)
    {
        const std::int64_t due =
            std::min<std::int64_t>(m, (clock_type::now() - start) / interval + 1);
        if (due > done)
        {
            block(due - done);
            done = due;
        }
        wake += tick;
        std::this_thread::sleep_until(wake);
    }
    c.done = m;
    std::this_thread::sleep_until(std::max(start + idle_until, clock_type::now()) + tail);
    const std::chrono::nanoseconds others =
        (bench::process_cpu_time() - process_start) - (bench::thread_cpu_time() - thread_start);
    return others + in_blocks;
}

// W5 counted whole: range(0) = N, range(1) = M (resets), range(2) = resets per second (0: as
// fast as it can), range(3) = the idle deadline in ms, range(4) = how often the resetting
// thread wakes, in µs. The contestants run one after the other
// (the process's CPU is theirs alone meanwhile), each made just before its run, in an order
// that alternates from one repetition to the next.
void w5_whole_run(benchmark::State& state)
{
    const auto n = static_cast<std::size_t>(state.range(0));
    const std::int64_t m = state.range(1);
    const std::int64_t rate = state.range(2);
    const clock_type::duration idle = std::chrono::milliseconds(state.range(3));
    const clock_type::duration tick = std::chrono::microseconds(state.range(4));
    static std::map<std::int64_t, int> repetitions; // of each row (its rate)
    int& repetition = repetitions[rate];
    for (auto _ : state)
    {
        w5_idle deadlines;
        clock_type::duration interval{};
        clock_type::duration idle_until{};
        clock_type::duration tail{};
        std::vector<std::function<std::unique_ptr<contestant>()>> make;
        if (rate == 0)
        {
            // As W5: every deadline first expires `idle` after it is armed, just before the
            // resets begin (which end sooner); a reset pushes it 3 × `idle` ahead. The run lasts
            // until the first expiries have come due and some time after (when the worker
            // re-queues every deadline that a reset pushed back), and ends before the pushed
            // expiries. The few connections that no reset picked time out (counter fired: sched's;
            // steady_timer's io_context is not run then, and cancels them at the end).
            deadlines = {idle, 0s, 3 * idle, false, true};
            idle_until = idle;
            tail = idle * 3 / 10;
        }
        else
        {
            // A server's steady state: the first expiries spread over the second half of
            // `idle`, and a reset pushes a deadline `idle` ahead; the resets come at `rate` a
            // second, each connection in its turn (every N / rate, which must be shorter than
            // half of `idle`: no deadline fires).
            deadlines = {idle / 2, idle / 2, idle, true};
            interval = std::chrono::nanoseconds(1s) / rate;
            make.emplace_back([] { return std::make_unique<w5_pacing>(); });
        }
        make.emplace_back([&] { return std::make_unique<w5_sched>(n, deadlines); });
        make.emplace_back([&] { return std::make_unique<w5_asio>(n, m, deadlines); });
        if (repetition++ % 2 != 0)
            std::reverse(make.begin(), make.end());
        std::map<std::string, double> cpu_ns;
        std::uint64_t fired = 0;
        std::string error;
        for (const auto& f : make)
        {
            const std::unique_ptr<contestant> c = f();
            const std::chrono::nanoseconds cpu = whole_run(*c, m, interval, tick, idle_until, tail);
            cpu_ns[c->name()] = static_cast<double>(cpu.count()) / static_cast<double>(m);
            if (std::string e = c->finish(); error.empty())
                error = std::move(e);
            fired += c->fired();
        }
        for (const auto& [name, ns] : cpu_ns)
            state.counters[name + "_cpu_ns"] = ns;
        state.counters["ratio_asio"] = cpu_ns["asio"] / cpu_ns["sched"];
        state.counters["fired"] = static_cast<double>(fired);
        state.SetIterationTime(1); // the row reports its counters only
        if (!error.empty())
            state.SkipWithError(error.c_str());
    }
}

// ----- W3: lateness ---------------------------------------------------------------------------

// The lateness of T timers, written by their handlers on the io_context's thread.
struct lateness_run
{
    std::vector<clock_type::time_point> due;
    std::vector<std::int64_t> late_ns;
    std::atomic<std::size_t> ran{0}; // the io threads'
    std::atomic<std::uint64_t> errors{0};

    std::mutex mutex;
    std::condition_variable all_ran;
    bool finished = false;
    clock_type::time_point last_ran; // when the last handler ran

    explicit lateness_run(std::size_t timers) : due(timers), late_ns(timers) {}

    // Waits until every handler has run, or `limit` has passed; returns whether they all ran.
    bool wait(clock_type::duration limit)
    {
        std::unique_lock lock(mutex);
        return all_ran.wait_for(lock, limit, [this] { return finished; });
    }
};

struct lateness_handler
{
    lateness_run* run;
    std::uint32_t i;

    void operator()(const error_code& ec) const
    {
        const clock_type::time_point now = clock_type::now(); // first thing
        run->late_ns[i] = (now - run->due[i]).count();
        if (ec)
            ++run->errors;
        if (++run->ran == run->due.size())
        {
            std::lock_guard lock(run->mutex);
            run->finished = true;
            run->last_ran = now;
            run->all_ran.notify_one();
        }
    }
};

// W3's contestants: range(3) of its rows.
enum w3_contestant : std::int64_t
{
    w3_asio = 0,
    w3_sched = 1,
    w3_sched_no_slack = 2,
    w3_sched_spin = 3,
};

// The contestant's CDF file name, without the extension.
const char* w3_name(std::int64_t contestant)
{
    return contestant == w3_asio             ? "w3_asio"
           : contestant == w3_sched          ? "w3_sched"
           : contestant == w3_sched_no_slack ? "w3_sched_no_slack"
                                             : "w3_sched_spin";
}

// range(0) = T, range(1) = window in ms, range(2) = threads, range(3) = a w3_contestant,
// range(4) = burst: 0, each timer due a random delay within the window after it is armed; 1, all
// due within burst_spread of the window's end (the window counted from the first arm).
void w3_lateness(benchmark::State& state)
{
    const auto timers = static_cast<std::size_t>(state.range(0));
    const std::chrono::milliseconds window(state.range(1));
    const auto threads = static_cast<std::size_t>(state.range(2));
    const std::int64_t contestant = state.range(3);
    const bool burst = state.range(4) != 0;
    const bool use_sched = contestant != w3_asio;
    sched::pool_options options;
    options.threads = threads;
    if (contestant == w3_sched_no_slack)
        options.timer_slack = 0ns;
    if (contestant == w3_sched_spin)
        options.spin_before_due = spin;
    for (auto _ : state)
    {
        lateness_run run(timers);
        asio::io_context io(static_cast<int>(threads));
        bench::io_threads io_threads(io, threads);
        sched::scheduled_thread_pool pool(options);
        sched::scheduler scheduler(io, pool);
        std::vector<asio::steady_timer> asio_timers;
        asio_timers.reserve(use_sched ? 0 : timers);

        bench::rng rng(3);
        std::vector<clock_type::duration> delay(timers);
        for (clock_type::duration& d : delay)
            d = rng.uniform(0ns, burst ? std::chrono::nanoseconds(burst_spread) : window);
        const clock_type::time_point armed_from = clock_type::now();
        for (std::size_t i = 0; i < timers; ++i)
        {
            run.due[i] = (burst ? armed_from + window : clock_type::now()) + delay[i];
            const lateness_handler handler{&run, static_cast<std::uint32_t>(i)};
            if (use_sched)
                scheduler.async_wait(run.due[i], handler);
            else
            {
                asio_timers.emplace_back(io, run.due[i]);
                asio_timers.back().async_wait(handler);
            }
        }
        const clock_type::duration arm_time = clock_type::now() - armed_from;
        const bool all_ran = run.wait(window + 10s);

        io.stop();
        io_threads.join();
        (void)pool.shutdown_now();

        state.SetIterationTime(
            std::chrono::duration<double>(clock_type::now() - armed_from).count());
        if (!all_ran)
        {
            state.SkipWithError("W3: not every handler ran within the window + 10 s");
            return;
        }
        std::vector<std::int64_t> sorted = run.late_ns;
        std::sort(sorted.begin(), sorted.end());
        const auto early = static_cast<std::size_t>(
            std::lower_bound(sorted.begin(), sorted.end(), std::int64_t(0)) - sorted.begin());
        state.counters["p50_us"] = bench::percentile_us(sorted, 0.50);
        state.counters["p99_us"] = bench::percentile_us(sorted, 0.99);
        state.counters["p999_us"] = bench::percentile_us(sorted, 0.999);
        state.counters["max_us"] = static_cast<double>(sorted.back()) / 1000.0;
        state.counters["min_us"] = static_cast<double>(sorted.front()) / 1000.0;
        state.counters["early"] = static_cast<double>(early);
        state.counters["errors"] = static_cast<double>(run.errors.load());
        {
            // The timers due while the benchmark thread still armed others, and the rest.
            const clock_type::time_point armed_until = armed_from + arm_time;
            std::vector<std::int64_t> during;
            std::vector<std::int64_t> after;
            for (std::size_t i = 0; i < timers; ++i)
                (run.due[i] < armed_until ? during : after).push_back(run.late_ns[i]);
            std::sort(during.begin(), during.end());
            std::sort(after.begin(), after.end());
            state.counters["due_while_arming"] = static_cast<double>(during.size());
            if (!during.empty())
                state.counters["p99_while_arming_us"] = bench::percentile_us(during, 0.99);
            if (!after.empty())
                state.counters["p99_after_arming_us"] = bench::percentile_us(after, 0.99);
        }
        state.counters["arm_ms"] = std::chrono::duration<double, std::milli>(arm_time).count();
        state.counters["wall_ms"] =
            std::chrono::duration<double, std::milli>(run.last_ran - armed_from).count();
        state.counters["spin_us"] =
            std::chrono::duration<double, std::micro>(options.spin_before_due).count();
        if (burst)
            state.counters["spread_us"] = static_cast<double>(burst_spread.count());
        if (!burst && !lateness_out.empty() &&
            !bench::write_run_cdf(state, lateness_out, w3_name(contestant), sorted))
            state.SkipWithError("W3: cannot write the lateness CDF to --lateness_out");
        if (early != 0 || run.errors != 0)
            state.SkipWithError("W3: a handler ran early or with an error");
    }
}

} // namespace

int main(int argc, char** argv)
{
    bench::flags flags({
        {"p", "100k", "W1 standing population of pending timeouts (P), per contestant"},
        {"m", "1M", "W1 arm+cancel operations per contestant (M)"},
        {"n", "100k", "W5 connections, each with an armed deadline (N)"},
        {"resets", "1M", "W5 deadline resets per contestant"},
        {"rounds", "10", "W1 and W5: the operations are split into this many interleaved rounds"},
        {"chunk", "256",
         "W1 and W5: operations per handler, each followed by a poll() draining them"},
        {"steady_n", "10k", "W5_whole_run's steady state: connections"},
        {"steady_rate", "100k", "W5_whole_run's steady state: resets per second"},
        {"steady_s", "3", "W5_whole_run's steady state: seconds of resets"},
        {"steady_tick_us", "200",
         "W5_whole_run's steady state: the resetting thread wakes this often, in µs"},
        {"timers", "200k", "W3 timers"},
        {"window_ms", "2000", "W3 window over which the timers fall due, in ms"},
        {"threads", "2", "W3 threads running the io_context (and the pool's workers)"},
        {"lateness_out", "", "W3: a folder to write each contestant's lateness CDF into"},
        {"spin_us", "200", "W3_lateness/sched_spin's pool_options::spin_before_due, in µs"},
        {"burst_timers", "100k", "W3_burst: timers, all due together"},
        {"burst_spread_us", "1000", "W3_burst: the span they fall due within, in µs"},
        {"burst_after_ms", "1000", "W3_burst: when they are due, in ms after the first is armed"},
    });
    flags.parse(argc, argv);
    const std::int64_t p = flags.size("p");
    const std::int64_t m = flags.size("m");
    const std::int64_t n = flags.size("n");
    const std::int64_t resets = flags.size("resets");
    const std::int64_t rounds = flags.size("rounds");
    const std::int64_t steady_n = flags.size("steady_n");
    const std::int64_t steady_rate = flags.size("steady_rate");
    const std::int64_t steady_s = flags.size("steady_s");
    const std::int64_t steady_tick_us = flags.size("steady_tick_us");
    const std::int64_t timers = flags.size("timers");
    const std::int64_t window_ms = flags.size("window_ms");
    const std::int64_t threads = flags.size("threads");
    const std::int64_t burst_timers = flags.size("burst_timers");
    const std::int64_t burst_after_ms = flags.size("burst_after_ms");
    chunk_ops = flags.size("chunk");
    lateness_out = flags.text("lateness_out");
    spin = std::chrono::microseconds(flags.size("spin_us"));
    burst_spread = std::chrono::microseconds(flags.size("burst_spread_us"));

    benchmark::RegisterBenchmark("W1_churn_asio_front", w1_churn)
        ->Args({p, m, rounds, sizeof(counted_handler)})
        ->Args({p, m, rounds, sizeof(large_handler)})
        ->ArgNames({"P", "M", "rounds", "handler_bytes"})
        ->Iterations(1)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark("W1_arm_cancel_asio_front", w1_arm_cancel)
        ->Args({p, m, rounds})
        ->Args({0, m, rounds})
        ->ArgNames({"P", "M", "rounds"})
        ->Iterations(1)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark("W5_resets_asio_front", w5_resets)
        ->Args({n, resets, rounds})
        ->ArgNames({"N", "M", "rounds"})
        ->Iterations(1)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark("W5_whole_run_asio_front", w5_whole_run)
        ->Args({n, resets, 0, 2000, 0})
        ->Args({steady_n, steady_rate * steady_s, steady_rate, 1000, steady_tick_us})
        ->ArgNames({"N", "M", "rate", "idle_ms", "tick_us"})
        ->Iterations(1)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
    for (const auto& [name, contestant] :
         std::array{std::pair{"W3_lateness/sched", w3_sched},
                    std::pair{"W3_lateness/sched_no_slack", w3_sched_no_slack},
                    std::pair{"W3_lateness/sched_spin", w3_sched_spin},
                    std::pair{"W3_lateness/asio", w3_asio}})
    {
        benchmark::RegisterBenchmark(name, w3_lateness)
            ->Args({timers, window_ms, threads, contestant, 0})
            ->ArgNames({"T", "window_ms", "threads", "contestant", "burst"})
            ->Iterations(1)
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond);
    }
    for (const auto& [name, contestant] :
         std::array{std::pair{"W3_burst/sched", w3_sched}, std::pair{"W3_burst/asio", w3_asio}})
    {
        benchmark::RegisterBenchmark(name, w3_lateness)
            ->Args({burst_timers, burst_after_ms, threads, contestant, 1})
            ->ArgNames({"T", "window_ms", "threads", "contestant", "burst"})
            ->Iterations(1)
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond);
    }

    return bench::run_registered(argc, argv);
}
