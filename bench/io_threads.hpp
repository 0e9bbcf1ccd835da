// An io_context run by several threads of its own, for the benchmarks whose completions run on
// more than the benchmark's thread (W3, W4).
#ifndef SCHED_BENCH_IO_THREADS_HPP
#define SCHED_BENCH_IO_THREADS_HPP

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <cstddef>
#include <thread>
#include <vector>

namespace bench {

/// Runs `io` on `threads` threads. It holds the io_context's work until join(), so run() does not
/// return while the benchmark is still arming its first operations.
class io_threads
{
public:
    io_threads(boost::asio::io_context& io, std::size_t threads) : guard_(io.get_executor())
    {
        for (std::size_t i = 0; i < threads; ++i)
            threads_.emplace_back([&io] { io.run(); });
    }

    io_threads(const io_threads&) = delete;
    io_threads& operator=(const io_threads&) = delete;

    ~io_threads() { join(); }

    /// Lets go of the work and waits for the threads: run() returns once the io_context is out
    /// of work (or stopped).
    void join()
    {
        guard_.reset();
        for (std::thread& t : threads_)
            t.join();
        threads_.clear();
    }

private:
    boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard_;
    std::vector<std::thread> threads_;
};

} // namespace bench

#endif // SCHED_BENCH_IO_THREADS_HPP
