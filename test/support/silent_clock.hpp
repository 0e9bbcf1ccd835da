#ifndef SCHED_TEST_SUPPORT_SILENT_CLOCK_HPP
#define SCHED_TEST_SUPPORT_SILENT_CLOCK_HPP

#include <sched/manual_clock.hpp>

#include <atomic>
#include <chrono>
#include <ostream>

namespace sched::test {

// manual_clock's time, moved by the test, but without telling anyone it moved: a queue on it
// waits as on a real clock (it sleeps on the system's clock, or polls). The way to watch a
// thread that polls the clock: it sees the clock move, where a sleeper would not.
struct silent_clock
{
    using rep = manual_clock::rep;
    using period = manual_clock::period;
    using duration = manual_clock::duration;
    using time_point = std::chrono::time_point<silent_clock>;
    static constexpr bool is_steady = true;

    static time_point now() noexcept
    {
        reads_.fetch_add(1, std::memory_order_relaxed);
        return time_point(manual_clock::now().time_since_epoch());
    }

    // How many times now() has been called, by any thread: one that polls calls it over and over,
    // one that sleeps a few times.
    static long reads() noexcept { return reads_.load(std::memory_order_relaxed); }

private:
    static inline std::atomic<long> reads_{0};
};

// Lets Boost.Test print its time in failure messages (found by argument-dependent lookup).
inline std::ostream& boost_test_print_type(std::ostream& os, const silent_clock::time_point& t)
{
    return os << std::chrono::duration<double>(t.time_since_epoch()).count() << " s";
}

} // namespace sched::test

#endif
