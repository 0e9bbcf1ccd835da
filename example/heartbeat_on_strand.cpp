// Teaches: a connection's heartbeat as a periodic operation whose ticks run on the connection's
// strand (boost::asio::bind_executor), spread by jitter so that many connections do not beat
// together, and stopped through a cancellation slot: the completion handler then learns
// operation_aborted and how many beats ran.
#include <sched/scheduler.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>

#include <chrono>
#include <cstdio>
#include <exception>

using namespace std::chrono_literals;

int main()
{
    boost::asio::io_context io;
    sched::scheduled_thread_pool pool(1);
    sched::scheduler scheduler(io, pool);
    auto strand = boost::asio::make_strand(io);

    boost::asio::cancellation_signal stop;
    int beats = 0;
    bool on_strand = true;
    bool ended_by_cancel = false;
    std::size_t ticks_at_end = 0;
    scheduler.async_schedule_at_fixed_rate(
        10ms, 10ms,
        boost::asio::bind_executor(strand,
                                   [&](const sched::tick& t) {
                                       on_strand = on_strand && strand.running_in_this_thread();
                                       std::printf("beat %llu, %lld µs late\n",
                                                   static_cast<unsigned long long>(t.index),
                                                   static_cast<long long>(t.lag() / 1us));
                                       if (++beats == 5) // the connection closes
                                           stop.emit(boost::asio::cancellation_type::terminal);
                                   }),
        {.spread = sched::jitter::fraction_of_period(0.2)}, // each beat within ±2 ms
        boost::asio::bind_cancellation_slot(
            stop.slot(),
            boost::asio::bind_executor(strand, [&](std::exception_ptr e, std::size_t ticks) {
                try
                {
                    if (e)
                        std::rethrow_exception(e);
                }
                catch (const boost::system::system_error& error)
                {
                    ended_by_cancel = error.code() == boost::asio::error::operation_aborted;
                }
                ticks_at_end = ticks;
                std::printf("heartbeat ended after %zu beats\n", ticks);
            })));
    io.run();
    return on_strand && ended_by_cancel && ticks_at_end == 5 && beats == 5 ? 0 : 1;
}
