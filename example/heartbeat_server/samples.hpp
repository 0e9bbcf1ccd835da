// Lateness samples, summarised as p50 / p99 / max, and counters.
#ifndef SCHED_EXAMPLE_HEARTBEAT_SAMPLES_HPP
#define SCHED_EXAMPLE_HEARTBEAT_SAMPLES_HPP

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

namespace heartbeat {

using steady = std::chrono::steady_clock;

inline double ms_since(steady::time_point t)
{
    return std::chrono::duration<double, std::milli>(steady::now() - t).count();
}

// Samples in milliseconds, from any thread; summarised as p50 / p99 / max.
class samples
{
public:
    void add(double ms)
    {
        std::lock_guard lock(mutex_);
        values_.push_back(ms);
    }

    std::string summary()
    {
        std::lock_guard lock(mutex_);
        if (values_.empty())
            return "none";
        std::sort(values_.begin(), values_.end());
        const auto at = [&](double q) {
            return values_[static_cast<std::size_t>(q * static_cast<double>(values_.size() - 1))];
        };
        char text[96];
        std::snprintf(text, sizeof text, "p50 %.1f ms, p99 %.1f ms, max %.1f ms (%zu)", at(0.5),
                      at(0.99), values_.back(), values_.size());
        return text;
    }

private:
    std::mutex mutex_;
    std::vector<double> values_;
};

using counter = std::atomic<std::uint64_t>;

} // namespace heartbeat

#endif
