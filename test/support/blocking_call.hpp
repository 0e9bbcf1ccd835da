#ifndef SCHED_TEST_SUPPORT_BLOCKING_CALL_HPP
#define SCHED_TEST_SUPPORT_BLOCKING_CALL_HPP

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <future>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>

#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace sched::test {

// A call that blocks, made on a thread of its own, and a way for the test to wait until that
// thread is asleep inside it: what the test does next then wakes a thread that really waits,
// not one that has not begun to (with which a test of "X wakes a waiter" passes without waking
// anyone). On Linux the thread's state comes from /proc; elsewhere the wait is a pause of 100 ms.
template <class R>
class blocking_call
{
public:
    template <class F>
    explicit blocking_call(F f)
        : result_(std::async(std::launch::async, [this, f = std::move(f)]() mutable {
              tid_.store(thread_id());
              return f();
          }))
    {}

    blocking_call(const blocking_call&) = delete;
    blocking_call& operator=(const blocking_call&) = delete;

    // Waits until the thread has gone to sleep more than `sleeps` times (see sleeps()) and is
    // asleep now: with the default, until it first blocks. False if the call returned instead,
    // or `limit` passed (a shorter one shows that the thread was not woken).
    bool wait_until_blocked(std::uint64_t sleeps = 0,
                            std::chrono::steady_clock::duration limit = std::chrono::minutes(1))
    {
#if defined(__linux__)
        const auto give_up = std::chrono::steady_clock::now() + limit;
        while (std::chrono::steady_clock::now() < give_up)
        {
            if (result_.wait_for(std::chrono::seconds(0)) == std::future_status::ready)
                return false;
            if (const long tid = tid_.load(); tid != 0)
            {
                const std::string base = "/proc/self/task/" + std::to_string(tid);
                if (asleep(base) && voluntary_switches(base) > sleeps)
                    return true;
            }
            std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
        return false;
#else
        (void)sleeps;
        std::this_thread::sleep_for(
            std::min<std::chrono::steady_clock::duration>(limit, std::chrono::milliseconds(100)));
        return result_.wait_for(std::chrono::seconds(0)) != std::future_status::ready;
#endif
    }

    // How many times the thread has gone to sleep so far (its voluntary context switches): pass
    // it to wait_until_blocked() to wait until it has woken and gone back to sleep.
    std::uint64_t sleeps() const
    {
#if defined(__linux__)
        const long tid = tid_.load();
        return tid == 0 ? 0 : voluntary_switches("/proc/self/task/" + std::to_string(tid));
#else
        return 0;
#endif
    }

    std::future<R>& result()
    {
        return result_;
    }
    R get()
    {
        return result_.get();
    }

private:
#if defined(__linux__)
    static long thread_id()
    {
        return static_cast<long>(::syscall(SYS_gettid));
    }

    // State 'S': asleep, waiting for an event (a futex, here).
    static bool asleep(const std::string& base)
    {
        std::ifstream stat(base + "/stat");
        std::string line;
        std::getline(stat, line);
        const std::string::size_type end_of_name = line.rfind(')');
        return end_of_name != std::string::npos && end_of_name + 2 < line.size() &&
               line[end_of_name + 2] == 'S';
    }

    static std::uint64_t voluntary_switches(const std::string& base)
    {
        std::ifstream status(base + "/status");
        const std::string key = "voluntary_ctxt_switches:";
        for (std::string line; std::getline(status, line);)
        {
            if (line.compare(0, key.size(), key) == 0)
                return std::stoull(line.substr(key.size()));
        }
        return 0;
    }
#else
    static long thread_id()
    {
        return 1;
    }
#endif

    std::atomic<long> tid_{0}; // before result_: set by the thread result_ starts
    std::future<R> result_;
};

template <class F>
blocking_call(F) -> blocking_call<std::invoke_result_t<F&>>;

} // namespace sched::test

#endif
