// The machine's floor for timed wake-ups: how late a thread that sleeps until a due time wakes,
// and what one such wake-up costs in CPU, with no timer library around it (no queue, no lock, no
// handler but the one that records). A timer that sleeps pays at least this for each of its
// wake-ups (a timer that the wake-up for an earlier one catches may start sooner), so these rows
// say where W3's lateness and W4's CPU (see /work/shared/workloads.md) stand on this machine.
//
// Rows, one thread each (the benchmark's), K wake-ups (--wakeups) due G apart (--gap_us), each
// due time absolute (start + k·G; one already passed is moved to now + G, so that every sleep is
// a real one):
//   Floor_wakeup/sleep       clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME) with the thread's
//                            timer slack at 1 ns, as the pool's workers set theirs (a futex wait
//                            with a timeout takes the same path in the kernel).
//   Floor_wakeup/asio_timer  one steady_timer on an io_context run by this thread, re-armed by its
//                            handler (expires_at, async_wait): how Asio's reactor wakes, through
//                            its timerfd, and how sched's scheduler wakes an io_context.
//
// Lateness = steady_clock::now() on waking (first thing in the handler) − the due time. Counters:
// wakeups, p50_us, p99_us, p999_us, max_us, early (wake-ups before their due time: must be 0;
// fails the benchmark otherwise), moved (due times moved to now + G because the wake-up before
// came more than G late), cpu_us_per_wakeup (process user + sys CPU over the row / K).
//
// --lateness_out=DIR (default: off) writes DIR/floor_<row>.K.dat (sleep, asio_timer), one file a
// repetition (K = 0, 1, ..., also in counter cdf_index): the empirical CDF of the lateness, as the
// W3 and W4 rows write theirs, so that their plots can show the floor.
//
// Sizes are flags (see --help). The machine is shared and noisy: run several times and quote
// medians.

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstdint>
#include <ctime>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include <sys/prctl.h>

namespace {

using clock_type = std::chrono::steady_clock;
namespace asio = boost::asio;

enum class waker
{
    sleep,
    asio_timer,
};

const char* name_of(waker how)
{
    return how == waker::sleep ? "sleep" : "asio_timer";
}

// --lateness_out: where each row writes its lateness CDF; empty: nowhere.
std::string lateness_out;

// The due times of one row: start + k·gap; one not after now (the last wake-up came more than a
// gap late) is moved to now + gap, and the grid goes on from there, so that every sleep is a real
// one (a due time already passed would return at once and record a lateness no wake-up had).
class due_times
{
public:
    explicit due_times(std::chrono::microseconds gap) : gap_(gap), next_(clock_type::now() + gap) {}

    clock_type::time_point next()
    {
        const clock_type::time_point now = clock_type::now();
        if (next_ <= now)
        {
            next_ = now + gap_;
            ++moved_;
        }
        const clock_type::time_point due = next_;
        next_ += gap_;
        return due;
    }

    // Due times moved so far.
    std::int64_t moved() const { return moved_; }

private:
    clock_type::duration gap_;
    clock_type::time_point next_;
    std::int64_t moved_ = 0;
};

// Sleeps until each due time with the thread's timer slack at 1 ns; records the lateness.
void sleep_until_each(due_times& due, std::int64_t wakeups, std::vector<std::int64_t>& late)
{
    const int slack = ::prctl(PR_GET_TIMERSLACK, 0UL, 0UL, 0UL, 0UL);
    (void)::prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
    for (std::int64_t k = 0; k < wakeups; ++k)
    {
        const clock_type::time_point at = due.next();
        const auto ns = at.time_since_epoch() / std::chrono::nanoseconds(1);
        const timespec ts{static_cast<std::time_t>(ns / 1'000'000'000),
                          static_cast<long>(ns % 1'000'000'000)};
        while (::clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) != 0)
        {} // interrupted by a signal: sleep on
        late.push_back((clock_type::now() - at).count());
    }
    if (slack > 0)
        (void)::prctl(PR_SET_TIMERSLACK, static_cast<unsigned long>(slack), 0UL, 0UL, 0UL);
}

// A steady_timer re-armed by its own handler until `wakeups` have run; records the lateness.
void wait_on_timer_each(due_times& due,
                        std::int64_t wakeups,
                        std::vector<std::int64_t>& late,
                        std::int64_t& errors)
{
    asio::io_context io(1);
    asio::steady_timer timer(io);
    std::int64_t left = wakeups;
    auto arm = [&](auto& self) -> void {
        timer.expires_at(due.next());
        timer.async_wait([&, self](const boost::system::error_code& ec) {
            const clock_type::time_point now = clock_type::now();
            if (ec)
                ++errors;
            late.push_back((now - timer.expiry()).count());
            if (--left > 0)
                self(self);
        });
    };
    arm(arm);
    io.run();
}

void floor_wakeup(benchmark::State& state, waker how)
{
    const std::int64_t wakeups = state.range(0);
    const std::chrono::microseconds gap(state.range(1));
    for (auto _ : state)
    {
        std::vector<std::int64_t> late;
        late.reserve(static_cast<std::size_t>(wakeups));
        std::int64_t errors = 0;
        due_times due(gap);
        const std::chrono::nanoseconds cpu_before = bench::process_cpu_time();
        const std::chrono::nanoseconds elapsed = bench::timed([&] {
            if (how == waker::sleep)
                sleep_until_each(due, wakeups, late);
            else
                wait_on_timer_each(due, wakeups, late, errors);
        });
        const std::chrono::nanoseconds cpu = bench::process_cpu_time() - cpu_before;
        state.SetIterationTime(std::chrono::duration<double>(elapsed).count());

        std::sort(late.begin(), late.end());
        const auto early = std::count_if(late.begin(), late.end(), [](auto l) { return l < 0; });
        if (errors != 0 || early != 0 || static_cast<std::int64_t>(late.size()) != wakeups)
        {
            state.SkipWithError(("wake-ups: " + std::to_string(late.size()) + " of " +
                                 std::to_string(wakeups) + ", early " + std::to_string(early) +
                                 ", errors " + std::to_string(errors))
                                    .c_str());
            return;
        }
        if (!lateness_out.empty() &&
            !bench::write_run_cdf(state, lateness_out, std::string("floor_") + name_of(how), late))
        {
            state.SkipWithError("cannot write the lateness CDF to --lateness_out");
            return;
        }
        state.counters["wakeups"] = static_cast<double>(wakeups);
        state.counters["p50_us"] = bench::percentile_us(late, 0.50);
        state.counters["p99_us"] = bench::percentile_us(late, 0.99);
        state.counters["p999_us"] = bench::percentile_us(late, 0.999);
        state.counters["max_us"] = static_cast<double>(late.back()) / 1000.0;
        state.counters["early"] = static_cast<double>(early);
        state.counters["moved"] = static_cast<double>(due.moved());
        state.counters["cpu_us_per_wakeup"] =
            static_cast<double>(cpu.count()) / 1000.0 / static_cast<double>(wakeups);
    }
}

} // namespace

int main(int argc, char** argv)
{
    bench::flags flags({
        {"wakeups", "20k", "wake-ups per row (K)"},
        {"gap_us", "100", "time between two due times, in µs (G)"},
        {"lateness_out", "", "a folder to write each row's lateness CDF into (floor_<row>.dat)"},
    });
    flags.parse(argc, argv);
    const std::int64_t wakeups = flags.size("wakeups");
    const std::int64_t gap_us = flags.size("gap_us");
    lateness_out = flags.text("lateness_out");

    for (const waker how : {waker::sleep, waker::asio_timer})
    {
        const std::string name = std::string("Floor_wakeup/") + name_of(how);
        benchmark::RegisterBenchmark(name.c_str(), floor_wakeup, how)
            ->Args({wakeups, gap_us})
            ->ArgNames({"K", "gap_us"})
            ->Iterations(1)
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond);
    }

    return bench::run_registered(argc, argv);
}
