// Teaches: the Asio front with plain callbacks. Work runs on the pool's workers; completions come
// back to the io_context's thread. Also a timer that costs one queue entry, and cancelling it.
#include <sched/scheduler.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/io_context.hpp>

#include <chrono>
#include <exception>
#include <iostream>

using namespace std::chrono_literals;

int main()
{
    boost::asio::io_context io;
    sched::scheduled_thread_pool pool(2);
    sched::scheduler scheduler(io, pool); // completions are posted back to io

    // Runs on a worker in 10 ms; the handler gets what it returned (or threw) on io's thread.
    int answer = 0;
    scheduler.async_schedule(
        10ms, [] { return 6 * 7; },
        [&](std::exception_ptr error, int result) {
            if (!error)
                answer = result;
            std::cout << "answer: " << answer << '\n';
        });

    // A timeout armed and cancelled before it fires: it leaves the queue at once.
    boost::asio::cancellation_signal cancel_timeout;
    boost::system::error_code timeout_error;
    scheduler.async_wait(30s, boost::asio::bind_cancellation_slot(
                                  cancel_timeout.slot(), [&](boost::system::error_code ec) {
                                      timeout_error = ec;
                                      std::cout << "timeout: " << ec.message() << '\n';
                                  }));
    cancel_timeout.emit(boost::asio::cancellation_type::terminal);

    io.run(); // returns once both handlers have run
    return answer == 42 && timeout_error == boost::asio::error::operation_aborted ? 0 : 1;
}
