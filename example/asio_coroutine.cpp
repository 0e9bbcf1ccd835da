// Teaches: the Asio front from C++20 coroutines and with futures. The same operation takes any
// completion token; a work's exception comes out of co_await (or future::get) unchanged.
#include <sched/scheduler.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>

#include <chrono>
#include <future>
#include <iostream>
#include <stdexcept>
#include <thread>

using namespace std::chrono_literals;

boost::asio::awaitable<void> heartbeat_then_work(sched::scheduler& scheduler)
{
    for (int beat = 1; beat <= 3; ++beat)
    {
        co_await scheduler.async_wait(5ms, boost::asio::use_awaitable);
        std::cout << "beat " << beat << '\n';
    }
    const int sum = co_await scheduler.async_schedule(
        0ms, [] { return 1 + 2 + 3; }, boost::asio::use_awaitable);
    std::cout << "sum: " << sum << '\n';
    try
    {
        co_await scheduler.async_schedule(
            0ms, []() -> int { throw std::runtime_error("work failed"); },
            boost::asio::use_awaitable);
    }
    catch (const std::runtime_error& e)
    {
        std::cout << "caught: " << e.what() << '\n';
    }
}

int main()
{
    boost::asio::io_context io;
    sched::scheduled_thread_pool pool(2);
    sched::scheduler scheduler(io, pool);

    boost::asio::co_spawn(io, heartbeat_then_work(scheduler), boost::asio::detached);

    // With use_future, from a thread that is not running the io_context.
    std::thread io_thread([&] { io.run(); });
    std::future<int> later = scheduler.async_schedule(
        20ms, [] { return 42; }, boost::asio::use_future);
    std::cout << "future: " << later.get() << '\n';
    io_thread.join();
}
