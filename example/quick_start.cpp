// The README's example: schedule a task, get its result, and cancel a timeout before it fires.
#include <sched/scheduled_thread_pool.hpp>

#include <chrono>
#include <iostream>

using namespace std::chrono_literals;

int main()
{
    sched::scheduled_thread_pool pool(2); // two worker threads

    // Runs once, 10 ms from now; the future gives its result (or rethrows its exception).
    sched::scheduled_future<int> answer = pool.schedule(10ms, [] { return 42; });

    // A timeout that is cancelled before it fires: it leaves the queue at once, in O(log n).
    auto timeout = pool.schedule(30s, [] { std::cout << "timed out\n"; });
    const bool cancelled = timeout.cancel(); // true: it had not run, and now never will

    // Runs every 5 ms on a fixed grid until cancelled.
    auto heartbeat = pool.schedule_at_fixed_rate(0ms, 5ms, [] { std::cout << "beat\n"; });

    const int result = answer.get();
    std::cout << "answer: " << result << '\n';
    heartbeat.cancel();
    return result == 42 && cancelled ? 0 : 1;
}
