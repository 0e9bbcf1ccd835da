// Periodic work: fixed-rate heartbeats on sched (the pool, and the Asio front) against the
// baseline Boost.Asio 1.81 steady_timer re-armed by its own handler, one after another in the
// same process, at the same sizes, with the same phases.
//
// Workload W4 (see /work/shared/workloads.md): N fixed-rate periodic items (--items), period P
// (--period_ms), each with a random initial phase in [0, P), for S seconds (--seconds). All items'
// first due times are start + phase, with start = 200 ms after the arming begins, so that arming
// is not measured (arm_ms says how long it took; the benchmark fails if it took longer). The
// ideal time of an item's k-th tick is start + phase + k·P. Each tick reads
// std::chrono::steady_clock::now() first thing; its lateness is that minus its ideal time.
// Only ticks whose ideal time falls before stop = start + S are recorded (and, for the baseline,
// re-armed); the items are stopped a grace of P + 100 ms after stop, so that a late tick of the
// window still gets recorded, then everything is joined.
//
// Each item records its ticks' lateness (ns) in its own preallocated slice of one buffer (S/P + 2
// slots), written only by its own ticks, which never overlap: no lock and no shared counter per
// tick. The slices' headers are cache-line aligned, so that threads do not share lines.
//
// Rows, each with `--threads` threads (T):
//   W4_heartbeats/sched_pool  sched::scheduled_thread_pool pool(T);
//                             pool.schedule_at_fixed_rate(first_due - now, P, tick) where tick
//                             takes a `const sched::tick&` (its index gives the ideal time); the
//                             default missed-tick policy (burst: Java's). Ticks run on the pool's
//                             workers. Stopped by future.cancel() on every item, then shutdown()
//                             and await_termination().
//   W4_heartbeats/sched_asio  io_context(T) run by T threads, a pool of T workers,
//                             sched::scheduler(io, pool); scheduler.async_schedule_at_fixed_rate(
//                             first_due - now, P, bind_executor(io.get_executor(), tick),
//                             bind_cancellation_slot(signal[i].slot(), completion)). The ticks
//                             run ON THE IO_CONTEXT, and are woken by it: the scheduler's timer
//                             on the io_context wakes one of its threads when a tick at the head
//                             of the pool's queue is due (plus the pool's timer_slack), and that
//                             thread posts the tick to itself (the workers sleep). Stopped by
//                             emitting terminal cancellation on every item's signal; every
//                             completion must then arrive with operation_aborted (else the
//                             benchmark fails); then join.
//   W4_heartbeats/asio        io_context(T) run by T threads, one steady_timer per item:
//                             expires_at(first_due), async_wait(handler); the handler records
//                             now - timer.expiry() (the ideal time), then
//                             expires_at(expiry() + P) and async_wait again (the standard
//                             fixed-rate re-arm loop). A chain ends by itself at its first expiry
//                             at or after stop (within a period of it), so every wait completes
//                             and the io_context runs out of work; the threads are then joined.
//                             (No timer.cancel() from outside: with T > 1 threads a cancel posted
//                             to the io_context could run while another thread runs that timer's
//                             handler, a data race on the timer object unless every item had a
//                             strand, which the baseline would then pay for on every tick.)
//
// sched's fixed-rate calls take only a delay from now, not a time point: the item's grid is
// (now() inside the call) + delay + k·P, a little later than the intended first_due. The
// lateness is measured against the intended grid all the same (so sched is charged for that
// gap); grid_shift_max_us reports the largest gap, read from the first tick's tick::scheduled.
//
// Counters: ticks (recorded), missing (ticks of the window that never ran: must be 0), p50_us,
// p99_us, max_us (lateness), early (ticks that started before their ideal time: must be 0),
// cpu_s (process user + sys CPU, getrusage(RUSAGE_SELF), from start to stop), cpu_ms_per_1k_ticks,
// arm_ms, grid_shift_max_us (sched rows). A benchmark with missing or early ticks, or any other
// unexpected outcome, fails with an error.
//
// --lateness_out=DIR (default: off) writes DIR/w4_<row>.K.dat (sched_pool, sched_asio, asio) per
// row and repetition (K = 0, 1, ..., also in counter cdf_index): the empirical CDF of the
// lateness, "lateness_us fraction", at most 2,000 points, for gnuplot:
//   plot for [f in "sched_pool sched_asio asio"] "DIR/w4_".f.".0.dat" using 1:2 with lines
//
// --slack_us=N sets the sched pools' pool_options::timer_slack (default: the option's default), to
// weigh lateness against CPU.
//
// Sizes are flags (see --help): --items, --period_ms, --seconds, --threads. The machine is shared
// and noisy: run several times and quote medians.

#include <sched/scheduled_thread_pool.hpp>
#include <sched/scheduler.hpp>
#include <sched/tick.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/system/error_code.hpp>
#include <boost/system/system_error.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "bench_common.hpp"
#include "io_threads.hpp"

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
namespace asio = boost::asio;
using error_code = boost::system::error_code;

// --lateness_out: where each row writes its lateness CDF; empty: nowhere.
std::string lateness_out;

// --slack_us: the sched pools' timer_slack; empty: pool_options' default.
std::optional<std::chrono::microseconds> pool_slack;

sched::pool_options pool_options_for(std::size_t threads)
{
    sched::pool_options options;
    options.threads = threads;
    if (pool_slack)
        options.timer_slack = *pool_slack;
    return options;
}

// How long after the arming begins the first ticks may fall due.
constexpr auto lead = 200ms;

enum class contestant
{
    sched_pool,
    sched_asio,
    asio,
};

const char* name_of(contestant c)
{
    switch (c)
    {
    case contestant::sched_pool:
        return "sched_pool";
    case contestant::sched_asio:
        return "sched_asio";
    case contestant::asio:
        return "asio";
    }
    return "?";
}

// ----- what the ticks record -----------------------------------------------------------------

// One item's ticks: written only by them (they never overlap), read once every thread that ran
// them has been joined. Aligned so that two items' counts never share a cache line.
struct alignas(64) item_log
{
    std::int64_t* late_ns = nullptr; // its slice of the run's buffer
    std::uint32_t capacity = 0;
    std::uint32_t count = 0;     // ticks recorded
    std::uint32_t overflow = 0;  // ticks beyond the capacity (a bug: fails the benchmark)
    std::uint32_t errors = 0;    // asio: waits that completed with an error_code
    std::int64_t grid_shift = 0; // sched: its first tick's tick::scheduled - first_due, ns
    clock_type::time_point first_due;

    void record(clock_type::duration late) noexcept
    {
        if (count < capacity)
            late_ns[count++] = late.count();
        else
            ++overflow;
    }
};

// The items of one row: their phases (the same for every row) and their logs.
struct w4_run
{
    clock_type::duration period;
    std::chrono::seconds seconds;
    std::vector<std::int64_t> buffer;
    std::vector<item_log> items;
    std::vector<clock_type::duration> phases;
    clock_type::time_point armed_from; // when the arming began
    clock_type::time_point start;      // armed_from + lead
    clock_type::time_point stop;       // start + seconds: later ticks are not recorded
    clock_type::time_point armed;      // when the arming ended

    w4_run(std::size_t n, clock_type::duration p, std::chrono::seconds s)
        : period(p), seconds(s), items(n), phases(n)
    {
        const auto capacity = static_cast<std::uint32_t>(seconds / period + 2);
        buffer.resize(n * capacity);
        bench::rng rng(4);
        for (std::size_t i = 0; i < n; ++i)
        {
            items[i].late_ns = buffer.data() + i * capacity;
            items[i].capacity = capacity;
            phases[i] = rng.uniform(0ns, period - 1ns);
        }
    }

    // Sets the times, the arming beginning now.
    void begin_arming()
    {
        armed_from = clock_type::now();
        start = armed_from + lead;
        stop = start + seconds;
        for (std::size_t i = 0; i < items.size(); ++i)
            items[i].first_due = start + phases[i];
    }

    // When the items are stopped: a late tick of the window has this long to run.
    clock_type::time_point stop_items_at() const { return stop + period + 100ms; }

    // Once every item is armed: notes when, sleeps through the window and returns the process's
    // CPU time over it.
    std::chrono::nanoseconds end_arming_and_measure()
    {
        armed = clock_type::now();
        std::this_thread::sleep_until(start);
        const auto cpu_start = bench::process_cpu_time();
        std::this_thread::sleep_until(stop);
        return bench::process_cpu_time() - cpu_start;
    }

    // The ideal time of an item's tick `index`.
    clock_type::time_point ideal(const item_log& item, std::uint64_t index) const
    {
        return item.first_due + period * static_cast<std::int64_t>(index);
    }

    // The ticks of `item` whose ideal time is before stop.
    std::uint64_t expected(const item_log& item) const
    {
        if (item.first_due >= stop)
            return 0;
        return static_cast<std::uint64_t>((stop - item.first_due + period - 1ns) / period);
    }
};

// A sched tick (on a pool worker, or on the io_context for the Asio front).
struct sched_tick
{
    const w4_run* run;
    item_log* item;

    void operator()(const sched::tick& t) const
    {
        const clock_type::time_point now = clock_type::now(); // first thing
        if (t.index == 0)
            item->grid_shift = (t.scheduled - item->first_due).count();
        const clock_type::time_point ideal = run->ideal(*item, t.index);
        if (ideal < run->stop)
            item->record(now - ideal);
    }
};

// The baseline's handler: records, then re-arms its timer one period later, until stop.
struct asio_heartbeat
{
    const w4_run* run;
    item_log* item;
    asio::steady_timer* timer;

    void operator()(const error_code& ec) const
    {
        const clock_type::time_point now = clock_type::now(); // first thing
        if (ec)
        {
            ++item->errors;
            return;
        }
        const clock_type::time_point ideal = timer->expiry();
        if (ideal >= run->stop)
            return; // the chain ends
        item->record(now - ideal);
        timer->expires_at(ideal + run->period);
        timer->async_wait(*this);
    }
};

// ----- the contestants ------------------------------------------------------------------------

// Each runs the items from arming to join; the CPU time from start to stop goes in `cpu`.
// Returns an error message, or "" if everything ended as expected.

std::string run_sched_pool(w4_run& run, std::size_t threads, std::chrono::nanoseconds& cpu)
{
    sched::scheduled_thread_pool pool(pool_options_for(threads));
    std::vector<sched::scheduled_thread_pool::future_type<void>> futures;
    futures.reserve(run.items.size());
    run.begin_arming();
    for (item_log& item : run.items)
    {
        futures.push_back(pool.schedule_at_fixed_rate(item.first_due - clock_type::now(),
                                                      run.period, sched_tick{&run, &item}));
    }
    cpu = run.end_arming_and_measure();
    std::this_thread::sleep_until(run.stop_items_at());
    std::size_t not_cancelled = 0;
    for (auto& f : futures)
        not_cancelled += f.cancel() ? 0 : 1;
    pool.shutdown();
    pool.await_termination();
    if (not_cancelled != 0)
        return "sched_pool: " + std::to_string(not_cancelled) + " items had ended before cancel()";
    return {};
}

std::string run_sched_asio(w4_run& run, std::size_t threads, std::chrono::nanoseconds& cpu)
{
    asio::io_context io(static_cast<int>(threads));
    bench::io_threads io_threads(io, threads);
    std::string error;
    {
        sched::scheduled_thread_pool pool(pool_options_for(threads));
        sched::scheduler scheduler(io, pool);
        const std::size_t n = run.items.size();
        auto signals = std::make_unique<asio::cancellation_signal[]>(n);

        // The completions, on the io_context: each must say operation_aborted.
        std::mutex mutex;
        std::condition_variable all_done;
        std::size_t completed = 0; // guarded by mutex
        std::size_t aborted = 0;   // guarded by mutex
        const auto completion = [&](std::exception_ptr e, std::size_t) {
            bool was_aborted = false;
            try
            {
                if (e)
                    std::rethrow_exception(e);
            }
            catch (const boost::system::system_error& se)
            {
                was_aborted = se.code() == asio::error::operation_aborted;
            }
            catch (...)
            {}
            std::lock_guard lock(mutex);
            aborted += was_aborted ? 1 : 0;
            if (++completed == n)
                all_done.notify_one();
        };

        run.begin_arming();
        for (std::size_t i = 0; i < n; ++i)
        {
            item_log& item = run.items[i];
            scheduler.async_schedule_at_fixed_rate(
                item.first_due - clock_type::now(), run.period,
                asio::bind_executor(io.get_executor(), sched_tick{&run, &item}),
                asio::bind_cancellation_slot(signals[i].slot(), completion));
        }
        cpu = run.end_arming_and_measure();
        std::this_thread::sleep_until(run.stop_items_at());
        for (std::size_t i = 0; i < n; ++i)
            signals[i].emit(asio::cancellation_type::terminal);
        {
            std::unique_lock lock(mutex);
            if (!all_done.wait_for(lock, 10s, [&] { return completed == n; }))
                error = "sched_asio: not every operation completed within 10 s of its cancellation";
            else if (aborted != n)
            {
                error = "sched_asio: " + std::to_string(n - aborted) +
                        " operations completed with something else than operation_aborted";
            }
        }
        io_threads.join();
        pool.shutdown();
        pool.await_termination();
    } // the signals go after the io_context's threads: no completion can touch their slots
    return error;
}

std::string run_asio(w4_run& run, std::size_t threads, std::chrono::nanoseconds& cpu)
{
    asio::io_context io(static_cast<int>(threads));
    bench::io_threads io_threads(io, threads);
    std::vector<asio::steady_timer> timers;
    timers.reserve(run.items.size()); // never reallocates: the handlers point at the timers
    run.begin_arming();
    for (item_log& item : run.items)
    {
        asio::steady_timer& timer = timers.emplace_back(io, item.first_due);
        timer.async_wait(asio_heartbeat{&run, &item, &timer});
    }
    cpu = run.end_arming_and_measure();
    // Every chain ends at its first expiry at or after stop; then the io_context runs out of work.
    io_threads.join();
    return {};
}

// ----- reporting ------------------------------------------------------------------------------

// range(0) = items, range(1) = period in ms, range(2) = seconds, range(3) = threads.
void w4_heartbeats(benchmark::State& state, contestant who)
{
    const auto n = static_cast<std::size_t>(state.range(0));
    const std::chrono::milliseconds period(state.range(1));
    const std::chrono::seconds seconds(state.range(2));
    const auto threads = static_cast<std::size_t>(state.range(3));
    for (auto _ : state)
    {
        w4_run run(n, period, seconds);
        std::chrono::nanoseconds cpu{};
        std::string error;
        switch (who)
        {
        case contestant::sched_pool:
            error = run_sched_pool(run, threads, cpu);
            break;
        case contestant::sched_asio:
            error = run_sched_asio(run, threads, cpu);
            break;
        case contestant::asio:
            error = run_asio(run, threads, cpu);
            break;
        }
        const clock_type::time_point joined = clock_type::now();
        state.SetIterationTime(std::chrono::duration<double>(joined - run.armed_from).count());

        std::vector<std::int64_t> late;
        late.reserve(run.buffer.size());
        std::uint64_t missing = 0;
        std::uint64_t overflow = 0;
        std::uint64_t errors = 0;
        std::int64_t grid_shift = 0;
        for (const item_log& item : run.items)
        {
            late.insert(late.end(), item.late_ns, item.late_ns + item.count);
            missing += run.expected(item) - std::min<std::uint64_t>(item.count, run.expected(item));
            overflow += item.overflow;
            errors += item.errors;
            grid_shift = std::max(grid_shift, item.grid_shift);
        }
        if (late.empty())
        {
            state.SkipWithError("W4: no tick ran");
            return;
        }
        std::sort(late.begin(), late.end());
        const auto early = static_cast<std::size_t>(
            std::lower_bound(late.begin(), late.end(), std::int64_t(0)) - late.begin());
        const auto ticks = static_cast<double>(late.size());
        const double cpu_s = std::chrono::duration<double>(cpu).count();
        state.counters["ticks"] = ticks;
        state.counters["missing"] = static_cast<double>(missing);
        state.counters["p50_us"] = bench::percentile_us(late, 0.50);
        state.counters["p99_us"] = bench::percentile_us(late, 0.99);
        state.counters["max_us"] = static_cast<double>(late.back()) / 1000.0;
        state.counters["early"] = static_cast<double>(early);
        state.counters["cpu_s"] = cpu_s;
        state.counters["cpu_ms_per_1k_ticks"] = cpu_s * 1000.0 / (ticks / 1000.0);
        state.counters["arm_ms"] =
            std::chrono::duration<double, std::milli>(run.armed - run.armed_from).count();
        if (who != contestant::asio)
            state.counters["grid_shift_max_us"] = static_cast<double>(grid_shift) / 1000.0;

        if (!lateness_out.empty())
        {
            std::error_code ec;
            std::filesystem::create_directories(lateness_out, ec);
            if (!bench::write_run_cdf(state, lateness_out, std::string("w4_") + name_of(who), late))
            {
                state.SkipWithError("W4: cannot write the lateness CDF to --lateness_out");
                return;
            }
        }

        if (!error.empty())
            state.SkipWithError(error.c_str());
        else if (early != 0)
            state.SkipWithError("W4: a tick ran before its ideal time");
        else if (missing != 0)
            state.SkipWithError("W4: ticks of the window never ran (later than the grace?)");
        else if (run.armed >= run.start)
            state.SkipWithError("W4: arming took longer than the lead: lateness includes it");
        else if (overflow != 0 || errors != 0)
            state.SkipWithError("W4: a buffer overflowed or a wait failed (a benchmark bug)");
    }
}

} // namespace

int main(int argc, char** argv)
{
    bench::flags flags({
        {"items", "10k", "W4 periodic items (N)"},
        {"period_ms", "100", "W4 period of every item, in ms (phases are uniform in [0, period))"},
        {"seconds", "5", "W4 length of the run, in s"},
        {"threads", "2", "W4 threads: the pool's workers and/or the io_context's threads"},
        {"slack_us", "", "W4 sched pools' timer_slack in µs (empty: pool_options' default)"},
        {"lateness_out", "",
         "W4 directory for each row's lateness CDF (w4_<row>.dat, for gnuplot); empty: none"},
    });
    flags.parse(argc, argv);
    const std::int64_t items = flags.size("items");
    const std::int64_t period_ms = flags.size("period_ms");
    const std::int64_t seconds = flags.size("seconds");
    const std::int64_t threads = flags.size("threads");
    lateness_out = flags.text("lateness_out");
    if (!flags.text("slack_us").empty())
        pool_slack = std::chrono::microseconds(std::stoll(flags.text("slack_us")));

    for (const contestant who : {contestant::sched_pool, contestant::sched_asio, contestant::asio})
    {
        const std::string name = std::string("W4_heartbeats/") + name_of(who);
        benchmark::RegisterBenchmark(name.c_str(), w4_heartbeats, who)
            ->Args({items, period_ms, seconds, threads})
            ->ArgNames({"N", "period_ms", "seconds", "threads"})
            ->Iterations(1)
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond);
    }

    return bench::run_registered(argc, argv);
}
