// The server: a session per connection with an idle deadline, a heartbeat and request
// deadlines, all on sched.
#ifndef SCHED_EXAMPLE_HEARTBEAT_SERVER_HPP
#define SCHED_EXAMPLE_HEARTBEAT_SERVER_HPP

#include <sched/sched.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>

#include "line_socket.hpp"
#include "samples.hpp"
#include "settings.hpp"

namespace heartbeat {

struct server_stats
{
    counter accepted{0};
    counter open{0};
    counter idle_closes{0};
    counter deadline_errors{0};
    counter bad_requests{0};
    counter peer_closes{0};
    counter write_failures{0};
    counter responses{0};
    counter heartbeats_sent{0};  // queued; numbered 1, 2, 3... on each connection
    samples idle_close_lateness; // after idle deadline: when the server closed
    samples heartbeat_lag;       // tick.lag(): how late each heartbeat started
    samples deadline_lateness;   // after the request deadline: when the read was cancelled
};

struct server_context
{
    sched::scheduled_thread_pool& pool;
    sched::scheduler& scheduler;
    const settings& config;
    server_stats stats;
};

class session final : public line_socket, public std::enable_shared_from_this<session>
{
public:
    session(tcp::socket socket, server_context& server)
        : line_socket(std::move(socket), server.scheduler, server.config), server_(server),
          idle_(socket_.get_executor(), server.pool)
    {}

    // On the connection's strand.
    void start()
    {
        auto self = shared_from_this();
        ++server_.stats.open;
        touch();
        // The greeting tells the client when the idle deadline started, on steady_clock (the
        // same clock in both processes on one machine): the client times idle closes from it.
        send(self, "HELLO " + std::to_string(last_message_.time_since_epoch().count()) + "\n");
        wait_idle();
        // The heartbeat: a periodic operation whose ticks run on this connection's strand,
        // spread by ±20% so that connections accepted together do not beat together.
        const auto strand = socket_.get_executor();
        scheduler_.async_schedule_at_fixed_rate(
            config_.heartbeat, config_.heartbeat,
            asio::bind_executor(strand, [self](const sched::tick& t) { self->heartbeat(t); }),
            {.spread = sched::jitter::fraction_of_period(0.2)},
            asio::bind_cancellation_slot(heartbeat_stop_.slot(),
                                         asio::bind_executor(strand, [self](auto&&...) {})));
        read_request();
    }

private:
    void read_request()
    {
        read_line(shared_from_this(), [this](error_code ec, std::string line) {
            if (closed_)
                return;
            if (ec)
            {
                // asio::error::not_found: a line longer than the buffer allows.
                ++(ec == asio::error::not_found ? server_.stats.bad_requests
                                                : server_.stats.peer_closes);
                return close();
            }
            touch();
            if (line == "PING")
                read_request();
            else if (line == "REQ")
                read_body();
            else
                refuse_bad_request();
        });
    }

    // A request's body must follow within the request deadline.
    void read_body()
    {
        const steady::time_point started = steady::now();
        read_line_within(shared_from_this(), config_.request_deadline,
                         [this, started](error_code ec, std::string line) {
                             if (closed_)
                                 return;
                             if (ec == asio::error::operation_aborted)
                             {
                                 // Asio promises only that an object whose operation was
                                 // cancelled (terminal, cancel_after's default) can be closed;
                                 // the reply relies on what a TCP socket does, whose cancelled
                                 // read leaves its write side alone (an SSL stream would have
                                 // to close without a word).
                                 ++server_.stats.deadline_errors;
                                 server_.stats.deadline_lateness.add(
                                     ms_since(started) -
                                     static_cast<double>(config_.request_deadline.count()));
                                 return refuse("ERR deadline\n");
                             }
                             if (ec)
                             {
                                 ++server_.stats.peer_closes;
                                 return close();
                             }
                             touch();
                             if (line != "BODY")
                                 return refuse_bad_request();
                             ++server_.stats.responses;
                             send(shared_from_this(), "OK\n");
                             read_request();
                         });
    }

    // Answers `reply`, then closes.
    void refuse(std::string reply)
    {
        close_after_write_ = true;
        send(shared_from_this(), std::move(reply));
    }

    void refuse_bad_request()
    {
        ++server_.stats.bad_requests;
        refuse("ERR bad request\n");
    }

    void wait_idle()
    {
        idle_.async_wait([self = shared_from_this()](error_code ec) {
            if (!ec)
                self->on_idle();
        });
    }

    // A message arrived: the idle deadline moves, in place.
    void touch()
    {
        last_message_ = steady::now();
        (void)idle_.expires_after(config_.idle); // false if it has fired: see on_idle()
    }

    void on_idle()
    {
        if (closed_)
            return;
        // A message may have come after the deadline fired and before this ran on the strand:
        // touch() then set the expiry for the next wait, since no wait was armed to move.
        if (idle_.expiry() > steady::now())
            return wait_idle();
        ++server_.stats.idle_closes;
        server_.stats.idle_close_lateness.add(ms_since(last_message_) -
                                              static_cast<double>(config_.idle.count()));
        close();
    }

    void heartbeat(const sched::tick& t)
    {
        if (closed_)
            return;
        ++server_.stats.heartbeats_sent;
        server_.stats.heartbeat_lag.add(std::chrono::duration<double, std::milli>(t.lag()).count());
        send(shared_from_this(), "HB " + std::to_string(++heartbeats_) + "\n");
    }

    void on_write_error(error_code) override
    {
        if (!closed_)
            ++server_.stats.write_failures;
        close();
    }

    void on_written() override
    {
        if (close_after_write_)
            close();
    }

    void close()
    {
        if (closed_)
            return;
        closed_ = true;
        heartbeat_stop_.emit(asio::cancellation_type::terminal);
        idle_.cancel();
        close_socket();
        --server_.stats.open;
    }

    server_context& server_;
    sched::deadline idle_;
    asio::cancellation_signal heartbeat_stop_;
    steady::time_point last_message_;
    std::uint64_t heartbeats_ = 0; // sent on this connection
    bool close_after_write_ = false;
    bool closed_ = false;
};

class server
{
public:
    server(asio::io_context& io, server_context& context)
        : io_(io), context_(context),
          acceptor_(asio::make_strand(io), tcp::endpoint(asio::ip::address_v4::loopback(), 0), true)
    {
        acceptor_.listen(asio::socket_base::max_listen_connections);
    }

    unsigned short port() const { return acceptor_.local_endpoint().port(); }

    void accept()
    {
        acceptor_.async_accept(asio::make_strand(io_), [this](error_code ec, tcp::socket s) {
            if (!acceptor_.is_open())
                return; // stopped
            if (ec)
            {
                // Out of descriptors (EMFILE), say: accepting again at once would fail again, in
                // a loop that takes a core. Back off, on the acceptor's strand.
                std::fprintf(stderr, "heartbeat_server: accept: %s\n", ec.message().c_str());
                context_.scheduler.async_wait(
                    accept_backoff,
                    asio::bind_executor(acceptor_.get_executor(), [this](error_code waited) {
                        if (!waited) // else the pool has shut down
                            accept();
                    }));
                return;
            }
            ++context_.stats.accepted;
            auto connection = std::make_shared<session>(std::move(s), context_);
            asio::dispatch(connection->executor(), [connection] { connection->start(); });
            accept();
        });
    }

    void stop()
    {
        asio::post(acceptor_.get_executor(), [this] {
            error_code ignored;
            acceptor_.close(ignored);
        });
    }

private:
    static constexpr std::chrono::milliseconds accept_backoff{100};

    asio::io_context& io_;
    server_context& context_;
    tcp::acceptor acceptor_;
};

} // namespace heartbeat

#endif
