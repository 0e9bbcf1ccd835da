// The Asio front: sched::scheduler::async_wait and sched::deadline (on a real
// sched::scheduled_thread_pool, steady_clock, one worker) against the baseline Boost.Asio 1.81
// steady_timer on an io_context, in the same run, on the same threads, at the same sizes.
//
// Workloads (see /work/shared/workloads.md):
//   W1  timeout churn through the Asio front: P pending long timeouts, then M times "arm a 30 s
//       timeout, cancel it"; every cancelled operation's handler must run (operation_aborted).
//   W5  idle-deadline resets: N connections each with a deadline armed 30 s ahead; M times pick a
//       random connection and push its deadline to now + 30 s.
//   W3  lateness: T timers due at random times within a short window; lateness = when the handler
//       ran on the io_context's thread − the due time.
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
// <name>_ns (ns per operation), ratio_<name> = <name>_ns / sched_ns (above 1: sched is faster),
// handlers (handlers run, all contestants), fired (handlers that saw success: should be 0).
//
// W1 (row W1_churn_asio_front), contestants:
//   sched       scheduler.async_wait(30s, bind_cancellation_slot(signal.slot(), handler)), then
//               signal.emit(terminal): the operation leaves the pool's queue and its handler is
//               posted to the io_context with operation_aborted. One signal, reused by every
//               operation: safe here only because each operation is cancelled before the next
//               one connects (sched clears the slot when a completion runs, so an operation
//               connected to the signal before an earlier operation's completion has run would
//               lose its cancellation handler). The P standing operations have a signal each.
//               The pool's worker sleeps throughout.
//   asio        One steady_timer reused: expires_after(30s); async_wait(handler); cancel().
//               The P standing waits are one steady_timer each.
//   asio_slot   As asio, but cancelled as sched is: async_wait(bind_cancellation_slot(
//               signal.slot(), handler)); signal.emit(terminal). Asio's per-operation
//               cancellation, for reference.
//   The standing timeouts are due uniformly in [10 s, 30 s] (armed earlier with a 30 s timeout):
//   a new 30 s timeout is then the latest, as in a server.
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
// W3 (rows W3_lateness/sched and W3_lateness/asio), each on its own io_context run by its own
// thread (the benchmark thread arms the timers, then sleeps): T timers (--timers) due at
// start + uniform [0, window] (--window_ms), start = 50 ms after the arming begins (arming all T
// takes a few ms: arm_ms says how long it took).
//   sched   scheduler.async_wait(due, handler) on a pool with one worker: the worker takes the due
//           operation from the queue and posts the handler to the io_context, whose thread runs
//           it (two threads: the worker and the io thread).
//   asio    steady_timer per timer, expires_at(due), async_wait(handler) (one thread: the io
//           thread, woken by its reactor's timerfd).
//   The handler reads steady_clock::now() first thing. Counters: p50_us, p99_us, p999_us,
//   max_us (lateness), early (handlers that ran before their due time: must be 0; fails the
//   benchmark otherwise), errors (handlers with an error_code: must be 0).
//
// Sizes are flags (see --help): --p, --m, --n, --resets, --timers, --window_ms, --rounds,
// --chunk. Run several times and quote medians and the ratios; the machine is shared and noisy.

#include <sched/deadline.hpp>
#include <sched/scheduled_thread_pool.hpp>
#include <sched/scheduler.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/system/error_code.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench_common.hpp"

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
// handlers all ran as expected.
class contestant
{
public:
    explicit contestant(std::string name) : name_(std::move(name)) {}
    virtual ~contestant() = default;

    const std::string& name() const { return name_; }

    virtual void block(std::int64_t ops) = 0;

    // Cancels and drains what is left; returns an error message, or "" if every handler ran as
    // expected.
    virtual std::string finish() = 0;

    virtual std::uint64_t handlers() const = 0;
    virtual std::uint64_t fired() const = 0;

    std::chrono::nanoseconds elapsed{};
    std::int64_t done = 0;

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

// Standing timeouts: due in [10 s, 30 s], as if armed earlier with a 30 s timeout; never due
// within a run.
std::chrono::nanoseconds standing_delay(bench::rng& rng)
{
    return rng.uniform(10s, 30s);
}

class w1_sched final : public contestant
{
public:
    w1_sched(std::size_t p, std::int64_t m)
        : contestant("sched"), log_(p + static_cast<std::size_t>(m)), standing_(p),
          signals_(std::make_unique<asio::cancellation_signal[]>(p))
    {
        bench::rng rng(1);
        for (std::size_t i = 0; i < p; ++i)
        {
            scheduler_.async_wait(standing_delay(rng),
                                  asio::bind_cancellation_slot(signals_[i].slot(), next_handler()));
        }
    }

    ~w1_sched() override
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

    std::uint64_t handlers() const override { return log_.total(); }
    std::uint64_t fired() const override { return log_.succeeded; }

private:
    counted_handler next_handler() { return {&log_, next_id_++}; }

    asio::io_context io_{1};
    sched::scheduled_thread_pool pool_{1};
    sched::scheduler scheduler_{io_, pool_};
    handler_log log_;
    std::uint32_t next_id_ = 0;
    std::size_t standing_;
    std::unique_ptr<asio::cancellation_signal[]> signals_; // the standing operations'
    asio::cancellation_signal signal_;                     // the churn's, reused
};

class w1_asio final : public contestant
{
public:
    w1_asio(std::size_t p, std::int64_t m, bool slot)
        : contestant(slot ? "asio_slot" : "asio"), log_(p + static_cast<std::size_t>(m)),
          slot_(slot)
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

    std::uint64_t handlers() const override { return log_.total(); }
    std::uint64_t fired() const override { return log_.succeeded; }

private:
    counted_handler next_handler() { return {&log_, next_id_++}; }

    asio::io_context io_{1};
    handler_log log_;
    std::uint32_t next_id_ = 0;
    bool slot_;
    std::vector<asio::steady_timer> standing_;
    asio::steady_timer timer_{io_};
    asio::cancellation_signal signal_;
};

// range(0) = P, range(1) = M, range(2) = rounds.
void w1_churn(benchmark::State& state)
{
    const auto p = static_cast<std::size_t>(state.range(0));
    const std::int64_t m = state.range(1);
    for (auto _ : state)
    {
        std::vector<std::unique_ptr<contestant>> all;
        all.push_back(std::make_unique<w1_sched>(p, m));
        all.push_back(std::make_unique<w1_asio>(p, m, false));
        all.push_back(std::make_unique<w1_asio>(p, m, true));
        run_interleaved(state, all, m, state.range(2));
    }
}

// ----- W5: idle-deadline resets ---------------------------------------------------------------

class w5_sched final : public contestant
{
public:
    explicit w5_sched(std::size_t n) : contestant("sched"), log_(n), rng_(5)
    {
        connections_.reserve(n);
        for (std::size_t i = 0; i < n; ++i)
        {
            sched::deadline& d = connections_.emplace_back(scheduler_);
            d.expires_after(30s); // not armed yet: sets the expiry for the wait
            d.async_wait(counted_handler{&log_, static_cast<std::uint32_t>(i)});
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
            const std::size_t i = rng_.next() % connections_.size();
            resets_ += connections_[i].expires_after(30s) ? 1 : 0;
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
        return check_aborted(name(), log_, connections_.size());
    }

    std::uint64_t handlers() const override { return log_.total(); }
    std::uint64_t fired() const override { return log_.succeeded; }
    std::uint64_t resets() const { return resets_; }

private:
    asio::io_context io_{1};
    sched::scheduled_thread_pool pool_{1};
    sched::scheduler scheduler_{io_, pool_};
    handler_log log_;
    bench::rng rng_;
    std::uint64_t resets_ = 0;
    std::vector<sched::deadline> connections_;
};

class w5_asio final : public contestant
{
public:
    w5_asio(std::size_t n, std::int64_t m)
        : contestant("asio"), log_(n + static_cast<std::size_t>(m)), rng_(5)
    {
        connections_.reserve(n);
        for (std::size_t i = 0; i < n; ++i)
        {
            asio::steady_timer& t = connections_.emplace_back(io_, 30s);
            t.async_wait(next_handler());
        }
    }

    void block(std::int64_t ops) override
    {
        auto op = [this] {
            asio::steady_timer& t = connections_[rng_.next() % connections_.size()];
            resets_ += t.expires_after(30s); // cancels the pending wait: 1
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
        return check_aborted(name(), log_, next_id_);
    }

    std::uint64_t handlers() const override { return log_.total(); }
    std::uint64_t fired() const override { return log_.succeeded; }
    std::uint64_t resets() const { return resets_; }

private:
    counted_handler next_handler() { return {&log_, next_id_++}; }

    asio::io_context io_{1};
    handler_log log_;
    std::uint32_t next_id_ = 0;
    bench::rng rng_;
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

// ----- W3: lateness ---------------------------------------------------------------------------

// The lateness of T timers, written by their handlers on the io_context's thread.
struct lateness_run
{
    std::vector<clock_type::time_point> due;
    std::vector<std::int64_t> late_ns;
    std::size_t ran = 0; // io thread only
    std::uint64_t errors = 0;

    std::mutex mutex;
    std::condition_variable all_ran;
    bool finished = false;

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
            run->all_ran.notify_one();
        }
    }
};

double percentile_us(const std::vector<std::int64_t>& sorted, double q)
{
    const auto at = std::min(sorted.size() - 1, static_cast<std::size_t>(q * sorted.size()));
    return static_cast<double>(sorted[at]) / 1000.0;
}

// range(0) = T, range(1) = window in ms, range(2) = 1 for sched, 0 for asio.
void w3_lateness(benchmark::State& state)
{
    const auto timers = static_cast<std::size_t>(state.range(0));
    const std::chrono::milliseconds window(state.range(1));
    const bool use_sched = state.range(2) != 0;
    constexpr auto lead = 50ms;
    for (auto _ : state)
    {
        lateness_run run(timers);
        asio::io_context io(1);
        auto guard = asio::make_work_guard(io);
        std::thread io_thread([&io] { io.run(); });
        sched::scheduled_thread_pool pool(1);
        sched::scheduler scheduler(io, pool);
        std::vector<asio::steady_timer> asio_timers;
        asio_timers.reserve(use_sched ? 0 : timers);

        bench::rng rng(3);
        const clock_type::time_point armed_from = clock_type::now();
        const clock_type::time_point start = armed_from + lead;
        for (std::size_t i = 0; i < timers; ++i)
            run.due[i] = start + rng.uniform(0ns, window);
        for (std::size_t i = 0; i < timers; ++i)
        {
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
        const bool all_ran = run.wait(lead + window + 10s);

        guard.reset();
        io.stop();
        io_thread.join();
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
        state.counters["p50_us"] = percentile_us(sorted, 0.50);
        state.counters["p99_us"] = percentile_us(sorted, 0.99);
        state.counters["p999_us"] = percentile_us(sorted, 0.999);
        state.counters["max_us"] = static_cast<double>(sorted.back()) / 1000.0;
        state.counters["min_us"] = static_cast<double>(sorted.front()) / 1000.0;
        state.counters["early"] = static_cast<double>(early);
        state.counters["errors"] = static_cast<double>(run.errors);
        state.counters["arm_ms"] = std::chrono::duration<double, std::milli>(arm_time).count();
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
        {"n", "10k", "W5 connections, each with an armed deadline (N)"},
        {"resets", "1M", "W5 deadline resets per contestant"},
        {"rounds", "10", "W1 and W5: the operations are split into this many interleaved rounds"},
        {"chunk", "256",
         "W1 and W5: operations per handler, each followed by a poll() draining them"},
        {"timers", "10k", "W3 timers"},
        {"window_ms", "200", "W3 window over which the timers fall due, in ms"},
    });
    flags.parse(argc, argv);
    const std::int64_t p = flags.size("p");
    const std::int64_t m = flags.size("m");
    const std::int64_t n = flags.size("n");
    const std::int64_t resets = flags.size("resets");
    const std::int64_t rounds = flags.size("rounds");
    const std::int64_t timers = flags.size("timers");
    const std::int64_t window_ms = flags.size("window_ms");
    chunk_ops = flags.size("chunk");

    benchmark::RegisterBenchmark("W1_churn_asio_front", w1_churn)
        ->Args({p, m, rounds})
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
    for (const auto& [name, use_sched] :
         std::array{std::pair{"W3_lateness/sched", 1}, std::pair{"W3_lateness/asio", 0}})
    {
        benchmark::RegisterBenchmark(name, w3_lateness)
            ->Args({timers, window_ms, use_sched})
            ->ArgNames({"T", "window_ms", "sched"})
            ->Iterations(1)
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond);
    }

    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv))
        return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
