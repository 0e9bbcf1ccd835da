// The load client, run in a child process: connections of four kinds, each checking that
// the server treated it as its kind requires.
#ifndef SCHED_EXAMPLE_HEARTBEAT_CLIENT_HPP
#define SCHED_EXAMPLE_HEARTBEAT_CLIENT_HPP

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
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "line_socket.hpp"
#include "samples.hpp"
#include "settings.hpp"

namespace heartbeat {

enum class kind
{
    chatty,
    silent,
    slow_request,
    rude,
};

struct client_stats
{
    // Filled before the connections start; from then on only their counters change.
    std::map<kind, counter> started;
    std::map<kind, counter> met; // ended as expected
    counter connect_errors{0};
    counter chatty_closed_early{0};
    counter silent_closed_late{0};
    counter heartbeats_received{0};
    // The server numbers each connection's heartbeats 1, 2, 3...: the sum, over connections, of
    // the last number received is how many the server had sent them, as the client saw it.
    counter heartbeats_sent_as_seen{0};
    // Heartbeats that chatty connections were due, from how long each was open (see main.cpp).
    counter chatty_heartbeats_due{0};
    counter responses{0};
    samples silent_close_after; // from the server's arming to its close, past the idle deadline
    counter not_greeted{0};     // silent connections closed without the server's greeting
};

// Paces connection setup: at most `limit` connections are between starting to connect and the
// server's greeting (which it sends when it has accepted), so the server's accept queue holds at
// most that many and never overflows its listen backlog (an overflow drops the SYN, and the
// client's retransmit comes a second or more later).
class connect_gate
{
public:
    static constexpr int limit = 100;

    // `go` connects now, or once a connection ahead of it has been greeted.
    void enter(std::function<void()> go)
    {
        {
            std::lock_guard lock(mutex_);
            if (in_flight_ == limit)
                return waiting_.push_back(std::move(go));
            ++in_flight_;
        }
        go();
    }

    // A connection was greeted, or failed before: the next may connect.
    void leave()
    {
        std::function<void()> next;
        {
            std::lock_guard lock(mutex_);
            if (waiting_.empty())
            {
                --in_flight_;
                return;
            }
            next = std::move(waiting_.front());
            waiting_.pop_front();
        }
        next();
    }

private:
    std::mutex mutex_;
    int in_flight_ = 0;
    std::deque<std::function<void()>> waiting_;
};

struct client_context
{
    asio::io_context& io;
    sched::scheduler& scheduler;
    const settings& config;
    tcp::endpoint server;
    connect_gate& gate;
    steady::time_point end; // chatty connections close then; others stop starting before
    client_stats stats{};
    std::mutex mutex{};
    std::vector<std::weak_ptr<class connection>> chatty{}; // to close at the end
    counter rude_variant{0};
    counter active{0}; // connections started and not finished
    // Called once no connection is left after the end.
    std::function<void()> on_all_finished{};
};

class connection final : public line_socket, public std::enable_shared_from_this<connection>
{
public:
    connection(client_context& client, kind k)
        : line_socket(tcp::socket(asio::make_strand(client.io)), client.scheduler, client.config),
          client_(client), kind_(k)
    {}

    // Counts the connection, then connects after `pause`.
    void start(std::chrono::milliseconds pause = 0ms)
    {
        ++client_.stats.started.at(kind_);
        ++client_.active;
        if (pause == 0ms)
            return enter_gate();
        scheduler_.async_wait(pause,
                              [self = shared_from_this()](error_code) { self->enter_gate(); });
    }

    // At the end of the run: a chatty connection says goodbye (half-closes) and waits for the
    // server to close its side.
    void leave()
    {
        asio::dispatch(asio::bind_executor(socket_.get_executor(), [self = shared_from_this()] {
            // The heartbeats due while this connection was open: one a period, each up to a
            // fifth of a period late by jitter.
            // The server's heartbeats start with its session, when it greets.
            const auto open =
                steady::now() - (self->greeted_ ? self->greeted_at_ : self->connected_at_);
            const auto period = self->config_.heartbeat;
            if (open > period / 5)
                self->client_.stats.chatty_heartbeats_due +=
                    static_cast<std::uint64_t>((open - period / 5) / period);
            self->leaving_ = true;
            self->ping_stop_.emit(asio::cancellation_type::terminal);
            error_code ignored;
            self->socket_.shutdown(tcp::socket::shutdown_send, ignored);
        }));
    }

private:
    void enter_gate()
    {
        client_.gate.enter([self = shared_from_this()] {
            asio::post(self->socket_.get_executor(), [self] { self->connect(); });
        });
    }

    // Lets the next connection through the gate, once.
    void leave_gate()
    {
        if (!std::exchange(in_gate_, false))
            return;
        client_.gate.leave();
    }

    void connect()
    {
        in_gate_ = true;
        // Before the server can accept, so its idle deadline cannot have started earlier.
        connecting_since_ = steady::now();
        socket_.async_connect(client_.server, [self = shared_from_this()](error_code ec) {
            if (ec)
            {
                ++self->client_.stats.connect_errors;
                return self->finish();
            }
            self->on_connected();
        });
    }

    void on_connected()
    {
        connected_at_ = steady::now();
        auto self = shared_from_this();
        switch (kind_)
        {
        case kind::chatty:
        {
            {
                std::lock_guard lock(client_.mutex);
                client_.chatty.push_back(self);
            }
            const auto strand = socket_.get_executor();
            scheduler_.async_schedule_at_fixed_rate(
                config_.ping(), config_.ping(),
                asio::bind_executor(strand, [self](const sched::tick& t) { self->ping(t); }),
                {.spread = sched::jitter::fraction_of_period(0.2)},
                asio::bind_cancellation_slot(ping_stop_.slot(),
                                             asio::bind_executor(strand, [self](auto&&...) {})));
            break;
        }
        case kind::silent:
            break;
        case kind::slow_request:
            send(self, "REQ\n"); // and never the body
            break;
        case kind::rude:
            switch (client_.rude_variant++ % 3)
            {
            case 0: // gone at once
                ++client_.stats.met.at(kind_);
                close_socket();
                return finish();
            case 1: // a line longer than the server accepts
                send(self, std::string(4096, 'x'));
                break;
            case 2: // one message, then a half-close
                send(self, "PING\n");
                half_close_ = true;
                break;
            }
            break;
        }
        read();
    }

    void ping(const sched::tick& t)
    {
        if (!leaving_) // every fourth ping is a whole request instead
            send(shared_from_this(), t.index % 4 == 3 ? "REQ\nBODY\n" : "PING\n");
    }

    void read()
    {
        read_line(shared_from_this(), [this](error_code ec, std::string line) {
            if (!ec)
            {
                if (line.starts_with("HELLO "))
                    on_greeting(number<steady::rep>(std::string_view(line).substr(6)));
                else if (line.starts_with("HB "))
                    on_heartbeat(
                        number<std::uint64_t>(std::string_view(line).substr(3)).value_or(0));
                else if (line == "OK")
                    ++client_.stats.responses;
                else if (line == "ERR deadline")
                    got_deadline_error_ = true;
                return read();
            }
            on_server_close();
        });
    }

    // The server accepted this connection and armed its idle deadline at `armed` (steady_clock
    // ticks: one clock for both processes on this machine).
    void on_greeting(std::optional<steady::rep> armed)
    {
        greeted_at_ = steady::now();
        leave_gate();
        const steady::time_point at{steady::duration(armed.value_or(0))};
        // A stamp outside [connecting, greeted] is not the server's arming time: no greeting.
        greeted_ = armed && at >= connecting_since_ && at <= greeted_at_;
        armed_at_ = at;
    }

    // Heartbeat `n` of this connection arrived.
    void on_heartbeat(std::uint64_t n)
    {
        ++client_.stats.heartbeats_received;
        if (n > last_heartbeat_)
        {
            client_.stats.heartbeats_sent_as_seen += n - last_heartbeat_;
            last_heartbeat_ = n;
        }
    }

    // The server closed the connection (or it failed).
    void on_server_close()
    {
        bool met = false;
        switch (kind_)
        {
        case kind::chatty:
            met = leaving_;
            if (!met)
                ++client_.stats.chatty_closed_early;
            break;
        case kind::silent:
        {
            // From when the server armed the idle deadline (its greeting says) to its close.
            if (!greeted_)
            {
                ++client_.stats.not_greeted;
                break;
            }
            const double after = ms_since(armed_at_);
            const auto idle = static_cast<double>(config_.idle.count());
            client_.stats.silent_close_after.add(after - idle);
            met = after >= idle && after <= idle + static_cast<double>(config_.tolerance.count());
            if (!met)
                ++client_.stats.silent_closed_late;
            break;
        }
        case kind::slow_request:
            met = got_deadline_error_;
            break;
        case kind::rude:
            met = true; // the server closed it: it shrugged it off
            break;
        }
        if (met)
            ++client_.stats.met.at(kind_);
        close_socket();
        finish();
    }

    void on_write_error(error_code) override
    {
        // The server closed first (a rude connection's garbage, say): the read sees it too.
    }

    void on_written() override
    {
        if (std::exchange(half_close_, false))
        {
            error_code ignored;
            socket_.shutdown(tcp::socket::shutdown_send, ignored);
        }
    }

    // This connection is over: after a pause, another of its kind takes its place, while there
    // is time for it to end before the run does.
    void finish()
    {
        leave_gate(); // if it failed, or was closed, before the greeting
        ping_stop_.emit(asio::cancellation_type::terminal);
        const auto pause = config_.ping();
        const auto needed = pause + config_.idle + config_.tolerance + 500ms;
        if (kind_ != kind::chatty && steady::now() + needed < client_.end)
            std::make_shared<connection>(client_, kind_)->start(pause);
        if (--client_.active == 0 && steady::now() >= client_.end)
            client_.on_all_finished();
    }

    client_context& client_;
    const kind kind_;
    asio::cancellation_signal ping_stop_;
    steady::time_point connecting_since_;
    steady::time_point connected_at_;
    steady::time_point greeted_at_;
    steady::time_point armed_at_;      // when the server armed the idle deadline
    std::uint64_t last_heartbeat_ = 0; // the number of the last heartbeat received
    bool leaving_ = false;
    bool got_deadline_error_ = false;
    bool half_close_ = false;
    bool in_gate_ = false;
    bool greeted_ = false;
};

// The number of connections of each kind for `n` in all: one in twenty rude, then half chatty
// and a quarter each silent and slow.
inline std::map<kind, int> mix(int n)
{
    std::map<kind, int> m;
    m[kind::rude] = n / 20;
    const int rest = n - m[kind::rude];
    m[kind::chatty] = (rest + 1) / 2;
    m[kind::silent] = (rest - m[kind::chatty] + 1) / 2;
    m[kind::slow_request] = rest - m[kind::chatty] - m[kind::silent];
    return m;
}

inline const char* name(kind k)
{
    switch (k)
    {
    case kind::chatty:
        return "chatty";
    case kind::silent:
        return "silent";
    case kind::slow_request:
        return "slow_request";
    case kind::rude:
        return "rude";
    }
    return "?";
}

// Runs the client against `port`; returns its results as `key value` lines.
inline std::string run_client(const settings& config, unsigned short port)
{
    asio::io_context io;
    sched::scheduled_thread_pool pool(1);
    sched::scheduler scheduler(io, pool);
    const auto seconds =
        std::chrono::duration_cast<steady::duration>(std::chrono::duration<double>(config.seconds));
    connect_gate gate;
    client_context client{.io = io,
                          .scheduler = scheduler,
                          .config = config,
                          .server = tcp::endpoint(asio::ip::address_v4::loopback(), port),
                          .gate = gate,
                          .end = steady::now() + seconds};
    for (const kind k : {kind::chatty, kind::silent, kind::slow_request, kind::rude})
    {
        client.stats.started[k];
        client.stats.met[k];
    }
    // A run that cannot end (a connection the server never closes) still ends, and says so;
    // the watchdog is cancelled once every connection has finished. Both on one strand: a
    // cancellation signal is not thread-safe.
    const auto control = asio::make_strand(io);
    asio::cancellation_signal watchdog_stop;
    bool timed_out = false;
    scheduler.async_wait(seconds + config.idle + config.tolerance + 5s,
                         asio::bind_cancellation_slot(
                             watchdog_stop.slot(), asio::bind_executor(control, [&](error_code ec) {
                                 if (!ec)
                                 {
                                     timed_out = true;
                                     io.stop();
                                 }
                             })));
    client.on_all_finished = [&] {
        asio::post(control, [&] { watchdog_stop.emit(asio::cancellation_type::terminal); });
    };

    // Start every connection; the gate lets connect_gate::limit at a time be accepted.
    for (const auto& [k, count] : mix(config.connections))
    {
        for (int i = 0; i < count; ++i)
            std::make_shared<connection>(client, k)->start();
    }

    // At the end, the chatty connections leave; the rest have stopped starting again.
    scheduler.async_wait(seconds, [&](error_code) {
        std::lock_guard lock(client.mutex);
        for (const auto& weak : client.chatty)
        {
            if (auto c = weak.lock())
                c->leave();
        }
    });
    std::thread second(
        [&] { io.run(); }); // a second thread: connections' strands keep each to one at a time
    io.run();
    second.join();

    std::string out;
    const auto put = [&](const std::string& key, std::uint64_t value) {
        out += key + ' ' + std::to_string(value) + '\n';
    };
    for (const kind k : {kind::chatty, kind::silent, kind::slow_request, kind::rude})
    {
        put(std::string("started.") + name(k), client.stats.started[k].load());
        put(std::string("met.") + name(k), client.stats.met[k].load());
    }
    put("connect_errors", client.stats.connect_errors);
    put("unfinished", timed_out ? client.active.load() : 0);
    put("chatty_closed_early", client.stats.chatty_closed_early);
    put("silent_closed_late", client.stats.silent_closed_late);
    put("not_greeted", client.stats.not_greeted);
    put("heartbeats_received", client.stats.heartbeats_received);
    put("heartbeats_sent_as_seen", client.stats.heartbeats_sent_as_seen);
    put("chatty_heartbeats_due", client.stats.chatty_heartbeats_due);
    put("responses", client.stats.responses);
    out += "silent_close_after " + client.stats.silent_close_after.summary() + '\n';
    return out;
}

} // namespace heartbeat

#endif
