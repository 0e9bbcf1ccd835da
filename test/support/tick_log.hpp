#ifndef SCHED_TEST_SUPPORT_TICK_LOG_HPP
#define SCHED_TEST_SUPPORT_TICK_LOG_HPP

#include <sched/manual_clock.hpp>
#include <sched/tick.hpp>

#include <cstdint>
#include <mutex>
#include <ostream>
#include <vector>

#include "support/counter.hpp"

namespace sched::test {

// What a run of a periodic task was told, as a test compares it.
struct seen_tick
{
    manual_clock::time_point scheduled;
    manual_clock::time_point started;
    std::uint64_t index;
    std::uint64_t missed;

    friend bool operator==(const seen_tick&, const seen_tick&) = default;

    // A run that started when it was due, with nothing missed before it.
    static seen_tick on_time(manual_clock::time_point t, std::uint64_t index)
    {
        return {t, t, index, 0};
    }
};

inline std::ostream& operator<<(std::ostream& os, const seen_tick& s)
{
    const auto seconds = [](manual_clock::time_point t) {
        return std::chrono::duration<double>(t.time_since_epoch()).count();
    };
    return os << "{scheduled " << seconds(s.scheduled) << " s, started " << seconds(s.started)
              << " s, index " << s.index << ", missed " << s.missed << '}';
}

// The ticks a task was given, in order; runs counts them.
class tick_log
{
public:
    void record(const basic_tick<manual_clock>& t)
    {
        {
            std::lock_guard lock(mutex_);
            ticks_.push_back({t.scheduled, t.started, t.index, t.missed});
        }
        runs.increment();
    }

    std::vector<seen_tick> snapshot() const
    {
        std::lock_guard lock(mutex_);
        return ticks_;
    }

    counter runs;

private:
    mutable std::mutex mutex_;
    std::vector<seen_tick> ticks_;
};

} // namespace sched::test

#endif
