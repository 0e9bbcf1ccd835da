// Teaches: a fixed rate keeps its grid (run k is due at first + k·period, and runs missed during
// a slow run follow at once), while a fixed delay counts each period from the end of the
// previous run. Each run is told its sched::tick: when it was due, how late it started, and
// its index.
#include <sched/scheduled_thread_pool.hpp>

#include <chrono>
#include <cstdio>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

namespace {

struct run
{
    sched::tick tick;
    steady::time_point ended;
};

// Runs a task four times, the first run slow (50 ms of a 20 ms period), and returns its runs.
template <class Schedule>
std::vector<run> four_runs(const char* name, Schedule schedule)
{
    std::mutex mutex;
    std::vector<run> runs;
    std::promise<void> done;
    auto future = schedule([&](const sched::tick& t) {
        if (t.index == 0)
            std::this_thread::sleep_for(50ms); // a slow run
        std::lock_guard lock(mutex);
        runs.push_back({t, steady::now()});
        if (runs.size() == 4)
            done.set_value();
    });
    done.get_future().wait();
    future.cancel();
    std::lock_guard lock(mutex);
    const steady::time_point first = runs.front().tick.scheduled;
    for (const run& r : runs)
    {
        std::printf("%s run %llu: due at +%3lld ms, started %3lld ms late\n", name,
                    static_cast<unsigned long long>(r.tick.index),
                    static_cast<long long>((r.tick.scheduled - first) / 1ms),
                    static_cast<long long>(r.tick.lag() / 1ms));
    }
    return runs;
}

} // namespace

int main()
{
    sched::scheduled_thread_pool pool(1);
    const auto rate =
        four_runs("fixed rate ", [&](auto f) { return pool.schedule_at_fixed_rate(0ms, 20ms, f); });
    const auto delay = four_runs(
        "fixed delay", [&](auto f) { return pool.schedule_with_fixed_delay(0ms, 20ms, f); });

    // The grid: run k due exactly k periods after the first, however late it ran.
    bool ok = true;
    for (std::size_t k = 0; k < rate.size(); ++k)
        ok = ok && rate[k].tick.scheduled == rate[0].tick.scheduled + k * 20ms;
    // The fixed delay: the second run is due a period after the slow first one ended.
    ok = ok && delay[1].tick.scheduled >= delay[0].ended + 20ms - 1ms;
    std::printf(ok ? "as expected\n" : "NOT as expected\n");
    return ok ? 0 : 1;
}
