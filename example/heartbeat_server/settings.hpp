// The demo's flags, and the open-files limit they need.
#ifndef SCHED_EXAMPLE_HEARTBEAT_SETTINGS_HPP
#define SCHED_EXAMPLE_HEARTBEAT_SETTINGS_HPP

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>

#include <sys/resource.h>

namespace heartbeat {

using namespace std::chrono_literals;

struct settings
{
    int connections = 2000;
    double seconds = 15;
    std::chrono::milliseconds idle{2000};
    std::chrono::milliseconds heartbeat{250};
    std::chrono::milliseconds request_deadline{300};
    std::chrono::milliseconds write_deadline{1000};
    std::chrono::milliseconds tolerance{500}; // on an idle close, seen by the client
    bool quiet = false;

    // Chatty connections ping four times per idle deadline: far inside it.
    std::chrono::milliseconds ping() const { return idle / 4; }
};

inline void usage(const char* why)
{
    std::fprintf(stderr,
                 "heartbeat_server: %s\n"
                 "usage: heartbeat_server [--connections N>0] [--seconds S>0] [--idle-ms MS>0]\n"
                 "       [--heartbeat-ms MS>0] [--request-deadline-ms MS>0] [--tolerance-ms "
                 "MS>=0] [--quiet]\n",
                 why);
}

template <class T>
std::optional<T> number(std::string_view text)
{
    T value{};
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc() || end != text.data() + text.size())
        return std::nullopt;
    return value;
}

// The settings, or nothing (after a usage message) if the flags make no sense.
inline std::optional<settings> parse(int argc, char** argv)
{
    settings s;
    for (int i = 1; i < argc; ++i)
    {
        const std::string_view flag = argv[i];
        if (flag == "--quiet")
        {
            s.quiet = true;
            continue;
        }
        constexpr std::string_view with_values[] = {
            "--connections",         "--seconds",     "--idle-ms", "--heartbeat-ms",
            "--request-deadline-ms", "--tolerance-ms"};
        if (std::find(std::begin(with_values), std::end(with_values), flag) ==
            std::end(with_values))
        {
            usage(("unknown flag " + std::string(flag)).c_str());
            return std::nullopt;
        }
        if (i + 1 == argc)
        {
            usage(("missing value after " + std::string(flag)).c_str());
            return std::nullopt;
        }
        const std::string_view value = argv[++i];
        const auto milliseconds = [&](std::chrono::milliseconds& out, long min) {
            const auto n = number<long>(value);
            if (!n || *n < min)
                return false;
            out = std::chrono::milliseconds(*n);
            return true;
        };
        bool ok = false;
        if (flag == "--connections")
        {
            const auto n = number<int>(value);
            ok = n && *n > 0;
            if (ok)
                s.connections = *n;
        }
        else if (flag == "--seconds")
        {
            const auto n = number<double>(value);
            ok = n && *n > 0 && *n < 24 * 3600;
            if (ok)
                s.seconds = *n;
        }
        else if (flag == "--idle-ms")
            ok = milliseconds(s.idle, 1);
        else if (flag == "--heartbeat-ms")
            ok = milliseconds(s.heartbeat, 1);
        else if (flag == "--request-deadline-ms")
            ok = milliseconds(s.request_deadline, 1);
        else // --tolerance-ms
            ok = milliseconds(s.tolerance, 0);
        if (!ok)
        {
            usage(("bad value for " + std::string(flag) + ": " + std::string(value)).c_str());
            return std::nullopt;
        }
    }
    if (s.request_deadline >= s.idle)
    {
        usage("--request-deadline-ms must be shorter than --idle-ms");
        return std::nullopt;
    }
    return s;
}

// Raises this process's open-files limit to what `connections` sockets need, if the hard limit
// allows; false if it does not.
inline bool allow_sockets(int connections)
{
    rlimit limit{};
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0)
        return false;
    const rlim_t needed = static_cast<rlim_t>(connections) + 64;
    if (limit.rlim_cur >= needed)
        return true;
    if (limit.rlim_max != RLIM_INFINITY && limit.rlim_max < needed)
    {
        std::fprintf(stderr,
                     "heartbeat_server: %d connections need %llu open files, and the hard limit "
                     "is %llu (raise it with ulimit -Hn)\n",
                     connections, static_cast<unsigned long long>(needed),
                     static_cast<unsigned long long>(limit.rlim_max));
        return false;
    }
    limit.rlim_cur = needed;
    return setrlimit(RLIMIT_NOFILE, &limit) == 0;
}

} // namespace heartbeat

#endif
