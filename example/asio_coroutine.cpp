// Teaches: the Asio front from C++20 coroutines and with futures. The same operation takes any
// completion token; a work's exception comes out of co_await (or future::get) unchanged.
#include <sched/scheduler.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>

#include <chrono>
#include <future>
#include <iostream>
#include <stdexcept>
#include <string>
#include <thread>

using namespace std::chrono_literals;

// Beats three times, then awaits work on the pool: a result, then an exception. Returns whether
// it saw each as expected.
boost::asio::awaitable<bool> heartbeat_then_work(sched::scheduler& scheduler)
{
    int beats = 0;
    while (beats < 3)
    {
        co_await scheduler.async_wait(5ms, boost::asio::use_awaitable);
        std::cout << "beat " << ++beats << '\n';
    }
    const int sum = co_await scheduler.async_schedule(
        0ms, [] { return 1 + 2 + 3; }, boost::asio::use_awaitable);
    std::cout << "sum: " << sum << '\n';
    std::string caught;
    try
    {
        co_await scheduler.async_schedule(
            0ms, []() -> int { throw std::runtime_error("work failed"); },
            boost::asio::use_awaitable);
    }
    catch (const std::runtime_error& e)
    {
        caught = e.what();
    }
    std::cout << "caught: " << caught << '\n';
    co_return beats == 3 && sum == 6 && caught == "work failed";
}

int main()
{
    boost::asio::io_context io;
    sched::scheduled_thread_pool pool(2);
    sched::scheduler scheduler(io, pool);

    std::future<bool> coroutine_ok =
        boost::asio::co_spawn(io, heartbeat_then_work(scheduler), boost::asio::use_future);

    // With use_future, from a thread that is not running the io_context.
    std::thread io_thread([&] { io.run(); });
    std::future<int> later = scheduler.async_schedule(
        20ms, [] { return 42; }, boost::asio::use_future);
    const int answer = later.get();
    std::cout << "future: " << answer << '\n';
    const bool ok = coroutine_ok.get() && answer == 42;
    io_thread.join();
    return ok ? 0 : 1;
}
