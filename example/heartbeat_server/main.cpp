// Teaches: keeping a busy server's timeouts and heartbeats right with sched, on real sockets.
//
// A Boost.Asio TCP server on 127.0.0.1 and a load client (a child process, so that each side
// has its own file descriptors) that use only sched for every timer:
// - every connection has an idle deadline (sched::deadline) pushed back on each message it
//   receives, in place, never by cancelling and waiting again;
// - every connection gets a heartbeat: a periodic operation bound to the connection's strand,
//   with jitter, so that thousands of connections do not beat in lock-step;
// - every request's body is read under a deadline (sched::cancel_after), and so is every write.
//
// The client opens connections of four kinds: chatty (pings well inside the idle deadline; must
// never be closed), silent (must be closed within the idle deadline plus a stated tolerance),
// slow request (sends a request and never its body; must get the deadline error) and rude
// (closes at once, sends garbage, or half-closes; the server must shrug them off). Silent, slow
// and rude connections start again when they end, until the run's last seconds.
//
// It prints a report and exits 1 if any expectation failed, 2 on bad flags:
//   heartbeat_server [--connections N] [--seconds S] [--idle-ms MS] [--heartbeat-ms MS]
//                    [--request-deadline-ms MS] [--tolerance-ms MS] [--quiet]

#include <sched/sched.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <future>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "client.hpp"
#include "server.hpp"
#include "settings.hpp"
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace heartbeat;

namespace {

struct resources
{
    double cpu_seconds;
    long peak_rss_kib;
};

resources usage_in(const rusage& r)
{
    const auto seconds = [](timeval t) {
        return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
    };
    return {seconds(r.ru_utime) + seconds(r.ru_stime), r.ru_maxrss};
}

std::map<std::string, std::string> parse_results(const std::string& text)
{
    std::map<std::string, std::string> results;
    std::size_t begin = 0;
    while (begin < text.size())
    {
        const std::size_t end = text.find('\n', begin);
        const std::string line = text.substr(begin, end - begin);
        const std::size_t space = line.find(' ');
        if (space != std::string::npos)
            results[line.substr(0, space)] = line.substr(space + 1);
        begin = end == std::string::npos ? text.size() : end + 1;
    }
    return results;
}

} // namespace

int main(int argc, char** argv)
{
    const std::optional<settings> parsed = parse(argc, argv);
    if (!parsed)
        return 2;
    const settings& config = *parsed;
    if (!allow_sockets(config.connections))
        return 1;

    // The client is a child process: each side then has its own file descriptors. It is forked
    // before any thread starts, and learns the server's port through a pipe.
    int to_client[2];
    int from_client[2];
    if (pipe(to_client) != 0 || pipe(from_client) != 0)
    {
        std::perror("heartbeat_server: pipe");
        return 1;
    }
    const pid_t child = fork();
    if (child < 0)
    {
        std::perror("heartbeat_server: fork");
        return 1;
    }
    if (child == 0)
    {
        close(to_client[1]);
        close(from_client[0]);
        unsigned short port = 0;
        if (read(to_client[0], &port, sizeof port) != static_cast<ssize_t>(sizeof port))
            _exit(1);
        const std::string results = run_client(config, port);
        std::size_t written = 0;
        while (written < results.size())
        {
            const ssize_t n =
                write(from_client[1], results.data() + written, results.size() - written);
            if (n <= 0)
                _exit(1);
            written += static_cast<std::size_t>(n);
        }
        _exit(0);
    }
    close(to_client[0]);
    close(from_client[1]);

    const auto started = steady::now();
    sched::scheduled_thread_pool pool(1);
    asio::io_context io;
    sched::scheduler scheduler(io, pool);
    server_context context{pool, scheduler, config, {}};
    server listener(io, context);
    listener.accept();
    const unsigned short port = listener.port();
    if (write(to_client[1], &port, sizeof port) != static_cast<ssize_t>(sizeof port))
    {
        std::perror("heartbeat_server: write");
        return 1;
    }
    close(to_client[1]);
    std::printf("heartbeat_server: 127.0.0.1:%u, %d connections, %.1f s; idle deadline %lld ms, "
                "heartbeat %lld ms ± 20%%, request deadline %lld ms;\n"
                "  the client connects at most %d at a time (until the server's greeting) and "
                "times idle closes from the greeting's stamp of when the deadline was armed\n",
                port, config.connections, config.seconds,
                static_cast<long long>(config.idle.count()),
                static_cast<long long>(config.heartbeat.count()),
                static_cast<long long>(config.request_deadline.count()), connect_gate::limit);
    std::fflush(stdout);

    // Progress, once a second, on the pool's worker.
    asio::cancellation_signal progress_stop;
    if (!config.quiet)
    {
        scheduler.async_schedule_at_fixed_rate(
            1s, 1s,
            [&](const sched::tick& t) {
                std::printf("  %2llu s: %llu open, %llu accepted, %llu idle closes, %llu request "
                            "deadlines, %llu heartbeats\n",
                            static_cast<unsigned long long>(t.index + 1),
                            static_cast<unsigned long long>(context.stats.open.load()),
                            static_cast<unsigned long long>(context.stats.accepted.load()),
                            static_cast<unsigned long long>(context.stats.idle_closes.load()),
                            static_cast<unsigned long long>(context.stats.deadline_errors.load()),
                            static_cast<unsigned long long>(context.stats.heartbeats_sent.load()));
                std::fflush(stdout);
            },
            asio::bind_cancellation_slot(progress_stop.slot(), [](auto&&...) {}));
    }

    std::promise<void> server_ran;
    std::future<void> server_done = server_ran.get_future();
    // Two threads, one a core: each session keeps to its strand, and under load the sessions'
    // reads, heartbeats and idle closes do not queue behind each other on one thread.
    std::thread server_thread([&] {
        std::thread second([&] { io.run(); });
        io.run();
        second.join();
        server_ran.set_value();
    });

    // The client's results arrive when it has finished.
    std::string text;
    char buffer[4096];
    for (ssize_t n; (n = read(from_client[0], buffer, sizeof buffer)) > 0;)
        text.append(buffer, static_cast<std::size_t>(n));
    int status = 0;
    // The client's own usage: RUSAGE_CHILDREN would also count every child that this process
    // ran before it exec'd the demo (demo.sh's build: 39 CPU s and 600 MiB on a fresh clone).
    rusage client_rusage{};
    wait4(child, &status, 0, &client_rusage);
    const bool client_ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;

    // Every client socket is closed now. The server stops accepting and its io_context runs out
    // of work once every session has closed (their heartbeats and idle deadlines end with them).
    listener.stop();
    asio::post(io, [&] { progress_stop.emit(asio::cancellation_type::terminal); });
    const bool wound_down = server_done.wait_for(5s) == std::future_status::ready;
    if (!wound_down)
        io.stop();
    server_thread.join();
    const double wall = std::chrono::duration<double>(steady::now() - started).count();

    const auto results = parse_results(text);
    const auto get = [&](const std::string& key) -> std::uint64_t {
        const auto it = results.find(key);
        return it == results.end() ? 0 : number<std::uint64_t>(it->second).value_or(0);
    };
    rusage server_rusage{};
    getrusage(RUSAGE_SELF, &server_rusage);
    const resources server_usage = usage_in(server_rusage);
    const resources client_usage = usage_in(client_rusage);
    server_stats& s = context.stats;

    std::printf("\nconnections   started  as expected\n");
    for (const kind k : {kind::chatty, kind::silent, kind::slow_request, kind::rude})
    {
        std::printf("  %-12s %7llu  %7llu\n", name(k),
                    static_cast<unsigned long long>(get(std::string("started.") + name(k))),
                    static_cast<unsigned long long>(get(std::string("met.") + name(k))));
    }
    const std::uint64_t silent = get("started.silent");
    const std::uint64_t slow = get("started.slow_request");
    std::printf("\nidle timeouts     expected %llu, observed %llu (server), lateness %s\n",
                static_cast<unsigned long long>(silent),
                static_cast<unsigned long long>(s.idle_closes.load()),
                s.idle_close_lateness.summary().c_str());
    std::printf("  silent closes seen by the client, after the idle deadline: %s (tolerance %lld "
                "ms)\n",
                results.count("silent_close_after") ? results.at("silent_close_after").c_str()
                                                    : "none",
                static_cast<long long>(config.tolerance.count()));
    std::printf("request deadlines expected %llu, observed %llu, lateness %s\n",
                static_cast<unsigned long long>(slow),
                static_cast<unsigned long long>(s.deadline_errors.load()),
                s.deadline_lateness.summary().c_str());
    // Heartbeats: the server numbers each connection's 1, 2, 3..., so the client knows how many
    // were sent up to the last one it received; any the server queued after that were still
    // unwritten, or unread, when the connection closed.
    const std::uint64_t received = get("heartbeats_received");
    const std::uint64_t sent_as_seen = get("heartbeats_sent_as_seen");
    std::printf("heartbeats        sent %llu, received %llu of the %llu sent as the client saw "
                "them, lag %s\n",
                static_cast<unsigned long long>(s.heartbeats_sent.load()),
                static_cast<unsigned long long>(received),
                static_cast<unsigned long long>(sent_as_seen), s.heartbeat_lag.summary().c_str());
    std::printf("  due to the chatty connections alone: %llu (at least half must be sent)\n",
                static_cast<unsigned long long>(get("chatty_heartbeats_due")));
    std::printf("requests answered %llu (client saw %llu); bad requests refused %llu; closed by "
                "the client %llu; write failures %llu\n",
                static_cast<unsigned long long>(s.responses.load()),
                static_cast<unsigned long long>(get("responses")),
                static_cast<unsigned long long>(s.bad_requests.load()),
                static_cast<unsigned long long>(s.peer_closes.load()),
                static_cast<unsigned long long>(s.write_failures.load()));
    std::printf("resources         %.1f s wall; server %.2f CPU s, peak RSS %.1f MiB; client "
                "%.2f CPU s, peak RSS %.1f MiB\n",
                wall, server_usage.cpu_seconds,
                static_cast<double>(server_usage.peak_rss_kib) / 1024.0, client_usage.cpu_seconds,
                static_cast<double>(client_usage.peak_rss_kib) / 1024.0);

    // The expectations: every connection ended as its kind must, and the counts agree exactly.
    std::vector<std::string> failures;
    const auto expect = [&](bool ok, const std::string& what) {
        if (!ok)
            failures.push_back(what);
    };
    expect(client_ok, "the client process failed");
    for (const kind k : {kind::chatty, kind::silent, kind::slow_request, kind::rude})
    {
        expect(get(std::string("met.") + name(k)) == get(std::string("started.") + name(k)),
               std::string("not every ") + name(k) + " connection ended as expected");
    }
    expect(get("chatty_closed_early") == 0, "a chatty connection was closed");
    expect(get("silent_closed_late") == 0, "a silent connection was not closed in time");
    expect(get("not_greeted") == 0, "a silent connection was closed without a greeting");
    expect(s.idle_closes.load() == silent, "idle timeouts differ from the silent connections");
    expect(s.deadline_errors.load() == slow, "request deadlines differ from the slow requests");
    expect(received == sent_as_seen, "a connection missed a heartbeat, or got one twice");
    expect(sent_as_seen <= s.heartbeats_sent.load(), "the client saw more heartbeats than sent");
    // A floor for the heartbeats sent: the chatty connections alone were due
    // chatty_heartbeats_due (the client counts, for each, one a period from when it connected
    // until it left, less a fifth of a period of jitter). The server's sessions start when it
    // accepts (later, under load) and its heartbeats run late when its worker is busy, so ask
    // for half: to miss it, the server must fall behind by half of every chatty connection's
    // life (1.5 s on ctest's 3 s run), which would make its idle closes late far beyond their
    // tolerance too.
    expect(s.heartbeats_sent.load() >= get("chatty_heartbeats_due") / 2,
           "fewer heartbeats sent than half of those the chatty connections were due");
    expect(get("connect_errors") == 0, "connections failed");
    expect(get("unfinished") == 0, "client connections never ended");
    expect(wound_down && s.open.load() == 0, "server connections still open at the end");
    if (failures.empty())
    {
        std::printf("\nall expectations met\n");
        return 0;
    }
    for (const std::string& f : failures)
        std::printf("FAILED: %s\n", f.c_str());
    return 1;
}
