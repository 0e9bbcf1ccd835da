// The demo: one-shot and periodic tasks on a scheduled_thread_pool, printing what ran when.
//
// It shows the Java-shaped API: schedule() with a future, a timeout cancelled before it fires
// (the common case in a server), fixed rate against fixed delay, a failing task whose exception
// reaches its future, and shutdown_now() handing back what never ran.

#include <sched/sched.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

#if defined(__linux__)
#include <pthread.h>
#endif

using namespace std::chrono_literals;

namespace {

const auto start = std::chrono::steady_clock::now();
std::mutex print_mutex;

const std::thread::id main_thread = std::this_thread::get_id();

std::string thread_name()
{
    char name[16] = "worker";
    if (std::this_thread::get_id() == main_thread)
        return "main";
#if defined(__linux__)
    pthread_getname_np(pthread_self(), name, sizeof name); // the pool names its workers
#endif
    return name;
}

void say(const std::string& what)
{
    const std::chrono::duration<double, std::milli> elapsed =
        std::chrono::steady_clock::now() - start;
    std::lock_guard lock(print_mutex);
    std::printf("%+8.1f ms  [%-7s]  %s\n", elapsed.count(), thread_name().c_str(), what.c_str());
}

} // namespace

int main()
{
    sched::pool_options options;
    options.threads = 2;
    options.thread_name = "demo";
    sched::scheduled_thread_pool pool(options);

    // One-shot tasks with results.
    auto answer = pool.schedule(50ms, [] {
        say("one-shot: computing the answer");
        return 42;
    });
    auto late = pool.schedule(120ms, [] { say("one-shot: a later task"); });

    // A timeout that is cancelled before it fires: it never runs, and its memory is freed at once.
    auto timeout = pool.schedule(80ms, [] { say("timeout fired (should not happen)"); });
    say(std::string("timeout armed; cancelled before it fired: ") +
        (timeout.cancel() ? "yes" : "no"));

    // Fixed rate keeps a grid; fixed delay waits after each (30 ms long) run.
    std::atomic<int> beats{0};
    auto heartbeat = pool.schedule_at_fixed_rate(
        0ms, 40ms, [&beats] { say("fixed rate 40 ms: heartbeat " + std::to_string(++beats)); });
    std::atomic<int> polls{0};
    auto poller = pool.schedule_with_fixed_delay(10ms, 40ms, [&polls] {
        say("fixed delay 40 ms: poll " + std::to_string(++polls) + " (takes 30 ms)");
        std::this_thread::sleep_for(30ms);
    });

    // A failing task: its exception goes to its future, and the worker lives on.
    auto failing = pool.schedule(60ms, []() -> int { throw std::runtime_error("disk full"); });

    say("the answer is " + std::to_string(answer.get()));
    try
    {
        failing.get();
    }
    catch (const std::exception& e)
    {
        say(std::string("the failing task reported: ") + e.what());
    }
    late.get();

    std::this_thread::sleep_for(100ms);
    heartbeat.cancel();
    poller.cancel();
    say("periodic tasks cancelled after " + std::to_string(beats.load()) + " heartbeats and " +
        std::to_string(polls.load()) + " polls");

    // shutdown_now() hands back what never ran; dropping a handle cancels its task.
    auto far = pool.schedule(1h, [] { return 0; });
    auto never_ran = pool.shutdown_now();
    say("shutdown_now handed back " + std::to_string(never_ran.size()) + " task(s)");
    never_ran.clear();
    say(std::string("its future says cancelled: ") + (far.is_cancelled() ? "yes" : "no"));
    pool.await_termination();
    say("terminated");

    return answer.get() == 42 && timeout.is_cancelled() && far.is_cancelled() ? 0 : 1;
}
