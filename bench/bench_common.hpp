// Helpers shared by the benchmark executables: a cheap random generator, VmRSS from
// /proc/self/status, malloc_trim, process CPU time, command-line sizes, counters that read as "ns
// per item", and lateness percentiles and CDF files (one a repetition) for scripts/bench.sh's
// plots.
//
// Every size in the workloads (see /work/shared/workloads.md) is a flag: each executable takes its
// own `--name=value` flags (listed by --help), mixed freely with the Google Benchmark ones.
#ifndef SCHED_BENCH_COMMON_HPP
#define SCHED_BENCH_COMMON_HPP

#include <sched/detail/background_unmap.hpp>
#include <sched/detail/recycler.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>
#include <malloc.h>
#include <sys/resource.h>
#include <time.h>

namespace bench {

using namespace std::chrono_literals;

/// splitmix64: a few ns per number and good enough to spread due times.
class rng
{
public:
    explicit rng(std::uint64_t seed) noexcept : state_(seed) {}

    std::uint64_t next() noexcept
    {
        std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
    }

    /// A duration uniform in [lo, hi] at nanosecond resolution (the modulus is a constant at the
    /// call sites, so it compiles to a multiply).
    std::chrono::nanoseconds uniform(std::chrono::nanoseconds lo, std::chrono::nanoseconds hi)
    {
        const auto span = static_cast<std::uint64_t>((hi - lo).count()) + 1;
        return lo + std::chrono::nanoseconds(static_cast<std::int64_t>(next() % span));
    }

private:
    std::uint64_t state_;
};

/// Resident set size of this process in bytes (VmRSS from /proc/self/status), or 0 if unknown.
inline std::int64_t vm_rss_bytes()
{
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line))
    {
        if (line.rfind("VmRSS:", 0) == 0)
            return std::strtoll(line.c_str() + 6, nullptr, 10) * 1024; // "VmRSS:   1234 kB"
    }
    return 0;
}

/// Waits (3 s at most) for the recycler's emptied spans to go back to the OS as they age (span
/// decay: about a second), and for the unmapping thread to have unmapped them (a few ms more):
/// what a process has back a second after it freed its tasks.
inline void await_span_decay()
{
    for (int i = 0;
         i < 300 && (sched::detail::idle_spans_exist() || !sched::detail::unmapping_thread_idle());
         ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

/// Gives glibc's free memory back to the OS, and the recycler's emptied spans, so that an RSS
/// reading taken next is not flattered (or inflated) by what earlier benchmarks left.
inline void trim_heap()
{
    ::malloc_trim(0);
    await_span_decay();
}

/// A counter showing the time per item for `count` items over the benchmark's time (an
/// inverted rate: Google Benchmark prints it in seconds with an SI prefix, e.g. "82.7ns").
inline benchmark::Counter time_per(double count)
{
    return benchmark::Counter(count, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

/// A counter for nanoseconds per item measured by hand (elapsed / count).
inline benchmark::Counter ns_per(std::chrono::nanoseconds elapsed, double count)
{
    return benchmark::Counter(static_cast<double>(elapsed.count()) / count);
}

/// A counter for items per second measured by hand.
inline benchmark::Counter per_second(std::chrono::nanoseconds elapsed, double count)
{
    return benchmark::Counter(count / (static_cast<double>(elapsed.count()) / 1e9));
}

/// Bytes per item from an RSS difference.
inline benchmark::Counter bytes_per(std::int64_t bytes, double count)
{
    return benchmark::Counter(static_cast<double>(bytes) / count);
}

/// Elapsed time of a callable on the steady clock.
template <class F>
std::chrono::nanoseconds timed(F&& f)
{
    const auto start = std::chrono::steady_clock::now();
    f();
    return std::chrono::steady_clock::now() - start;
}

/// Process CPU time, user + sys (getrusage(RUSAGE_SELF)), all threads.
inline std::chrono::nanoseconds process_cpu_time()
{
    rusage usage{};
    ::getrusage(RUSAGE_SELF, &usage);
    const auto tv = [](const timeval& t) {
        return std::chrono::seconds(t.tv_sec) + std::chrono::microseconds(t.tv_usec);
    };
    return tv(usage.ru_utime) + tv(usage.ru_stime);
}

/// The calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID), to the nanosecond.
inline std::chrono::nanoseconds thread_cpu_time()
{
    timespec t{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return std::chrono::seconds(t.tv_sec) + std::chrono::nanoseconds(t.tv_nsec);
}

/// The q-quantile (0 <= q <= 1) of sorted nanosecond samples, in microseconds.
inline double percentile_us(const std::vector<std::int64_t>& sorted, double q)
{
    const auto at = std::min(sorted.size() - 1, static_cast<std::size_t>(q * sorted.size()));
    return static_cast<double>(sorted[at]) / 1000.0;
}

/// Writes the empirical CDF of sorted nanosecond samples to `path` for gnuplot: lines of
/// "lateness_us fraction", at most `points` of them (evenly spaced quantiles, the last sample
/// included). Returns false if the file cannot be written.
inline bool write_cdf(const std::string& path,
                      const std::vector<std::int64_t>& sorted,
                      std::size_t points = 2000)
{
    std::FILE* out = std::fopen(path.c_str(), "w");
    if (out == nullptr)
        return false;
    std::fprintf(out, "# lateness_us fraction (%zu samples)\n", sorted.size());
    const std::size_t n = sorted.size();
    const std::size_t steps = std::min(points, n);
    for (std::size_t k = 1; k <= steps; ++k)
    {
        const std::size_t at = k * n / steps - 1; // the last step lands on the largest sample
        std::fprintf(out, "%.3f %.6f\n", static_cast<double>(sorted[at]) / 1000.0,
                     static_cast<double>(at + 1) / static_cast<double>(n));
    }
    return std::fclose(out) == 0;
}

/// Writes a row's lateness CDF for this run (write_cdf) to `dir`/`name`.K.dat, K = 0, 1, ... the
/// row's runs written so far in this process (one a repetition: the rows run one iteration each),
/// and sets the counter cdf_index = K, so that scripts/bench_report.py can plot the repetition
/// whose p99 is the row's median. Returns false if the file cannot be written.
inline bool write_run_cdf(benchmark::State& state,
                          const std::string& dir,
                          const std::string& name,
                          const std::vector<std::int64_t>& sorted)
{
    static std::map<std::string, int> runs; // by name: the next K
    const int k = runs[name]++;
    state.counters["cdf_index"] = k;
    return write_cdf(dir + "/" + name + "." + std::to_string(k) + ".dat", sorted);
}

/// This executable's own flags, `--name=value`, removed from argv before Google Benchmark sees
/// the rest. Sizes accept a comma-separated list where noted.
class flags
{
public:
    struct flag
    {
        std::string name;
        std::string value; // default, replaced by the command line
        std::string help;
    };

    explicit flags(std::vector<flag> known) : known_(std::move(known)) {}

    /// Takes this executable's flags out of argv; on --help, lists them first.
    void parse(int& argc, char** argv)
    {
        int out = 1;
        for (int i = 1; i < argc; ++i)
        {
            const std::string_view arg = argv[i];
            if (arg == "--help" || arg == "-h")
            {
                // Ours first; the flag stays in argv so that Google Benchmark lists its own next.
                std::printf("%s [flags] [Google Benchmark flags]\n\nflags of this benchmark:\n",
                            argv[0]);
                for (const flag& f : known_)
                    std::printf("  --%s=%s\n      %s\n", f.name.c_str(), f.value.c_str(),
                                f.help.c_str());
                std::printf("\n");
            }
            bool mine = false;
            for (flag& f : known_)
            {
                const std::string prefix = "--" + f.name + "=";
                if (arg.rfind(prefix, 0) == 0)
                {
                    f.value = std::string(arg.substr(prefix.size()));
                    mine = true;
                }
            }
            if (!mine)
                argv[out++] = argv[i];
        }
        argc = out;
        argv[argc] = nullptr;
    }

    /// A list of sizes (e.g. "10000,100000"); accepts k and M suffixes ("100k", "1M").
    std::vector<std::int64_t> sizes(std::string_view name) const
    {
        std::vector<std::int64_t> out;
        std::string value = get(name);
        std::size_t pos = 0;
        while (pos <= value.size())
        {
            const std::size_t comma = std::min(value.find(',', pos), value.size());
            const std::string item = value.substr(pos, comma - pos);
            if (!item.empty())
            {
                char* end = nullptr;
                std::int64_t n = std::strtoll(item.c_str(), &end, 10);
                if (*end == 'k' || *end == 'K')
                    n *= 1000;
                else if (*end == 'M' || *end == 'm')
                    n *= 1000 * 1000;
                if (n <= 0)
                {
                    std::fprintf(stderr, "bad size '%s' for --%s\n", item.c_str(),
                                 std::string(name).c_str());
                    std::exit(2);
                }
                out.push_back(n);
            }
            pos = comma + 1;
        }
        return out;
    }

    /// A flag's text as given (for paths and names).
    const std::string& text(std::string_view name) const { return get(name); }

    /// A single size.
    std::int64_t size(std::string_view name) const
    {
        const std::vector<std::int64_t> all = sizes(name);
        if (all.size() != 1)
        {
            std::fprintf(stderr, "--%s takes one size\n", std::string(name).c_str());
            std::exit(2);
        }
        return all.front();
    }

private:
    const std::string& get(std::string_view name) const
    {
        for (const flag& f : known_)
        {
            if (f.name == name)
                return f.value;
        }
        std::fprintf(stderr, "unknown flag %s\n", std::string(name).c_str());
        std::exit(2);
    }

    std::vector<flag> known_;
};

/// Runs the benchmarks registered so far, with the Google Benchmark flags left in argv (after
/// flags::parse()); returns main()'s exit status.
inline int run_registered(int& argc, char** argv)
{
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv))
        return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}

} // namespace bench

#endif // SCHED_BENCH_COMMON_HPP
