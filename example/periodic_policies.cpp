// Teaches: sched::periodic_options. After a deliberately slow run, missed_tick_policy::skip()
// waits for the next point of the grid and the next tick counts what it skipped; with
// failure_policy::stop_after(2), a failure goes to the pool's error_sink and the task runs on,
// but two in a row end it, and its future rethrows the last. On sched::manual_clock, so every
// time below is exact.
#include <sched/manual_clock.hpp>
#include <sched/scheduled_thread_pool.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <future>
#include <stdexcept>

using namespace std::chrono_literals;
using clock_type = sched::manual_clock;

int main()
{
    std::atomic<int> sunk{0};
    sched::pool_options options;
    options.error_sink = [&](std::exception_ptr) {
        ++sunk;
    };
    sched::basic_scheduled_thread_pool<clock_type> pool(options);

    // Skip: the first run takes 35 s of a 10 s period; the points 10, 20 and 30 pass meanwhile.
    std::promise<sched::basic_tick<clock_type>> second_run;
    auto skipping = pool.schedule_at_fixed_rate(0s, 10s,
                                                [&](const sched::basic_tick<clock_type>& t) {
                                                    if (t.index == 0)
                                                        clock_type::advance(35s);
                                                    else if (t.index == 1)
                                                        second_run.set_value(t);
                                                },
                                                {.missed = sched::missed_tick_policy::skip()});
    auto next = second_run.get_future();
    clock_type::advance(5s); // 40 s: the next point of the grid
    const sched::basic_tick<clock_type> t = next.get();
    skipping.cancel();
    std::printf("second run: due at %lld s, %llu runs skipped\n",
                static_cast<long long>(t.scheduled.time_since_epoch() / 1s),
                static_cast<unsigned long long>(t.missed));

    // Stop after two failures in a row: run 0 fails, run 1 succeeds, runs 2 and 3 fail and end it.
    auto failing = pool.schedule_at_fixed_rate(
        1s, 1s,
        [](const sched::basic_tick<clock_type>& t) {
            if (t.index != 1)
                throw std::runtime_error("run " + std::to_string(t.index) + " failed");
        },
        {.on_failure = sched::failure_policy::stop_after(2)});
    for (int k = 0; k < 10 && !failing.is_done(); ++k)
    {
        clock_type::advance(1s);
        failing.wait_for(50ms);
    }
    std::string last;
    try
    {
        failing.get();
    }
    catch (const std::runtime_error& e)
    {
        last = e.what();
    }
    pool.shutdown();
    pool.await_termination(); // every run, and every error_sink call, is done
    std::printf("the failing task ended with \"%s\"; the error sink saw %d failures\n",
                last.c_str(), sunk.load());
    const bool ok = t.scheduled == clock_type::time_point(40s) && t.missed == 3 &&
                    last == "run 3 failed" && sunk.load() == 3;
    std::printf(ok ? "as expected\n" : "NOT as expected\n");
    return ok ? 0 : 1;
}
