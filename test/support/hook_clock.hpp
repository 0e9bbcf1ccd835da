#ifndef SCHED_TEST_SUPPORT_HOOK_CLOCK_HPP
#define SCHED_TEST_SUPPORT_HOOK_CLOCK_HPP

#include <sched/manual_clock.hpp>

#include <functional>
#include <utility>

namespace sched::test {

// manual_clock's time, plus a way to run code inside the next now() call of one thread: the way
// to hit a gap in the pool exactly (between a periodic run and its re-queue, a worker calls now()
// once, outside any lock).
struct hook_clock
{
    using rep = manual_clock::rep;
    using period = manual_clock::period;
    using duration = manual_clock::duration;
    using time_point = std::chrono::time_point<hook_clock>;
    static constexpr bool is_steady = true;

    static time_point now()
    {
        if (hook_)
            std::exchange(hook_, {})();
        return time_point(manual_clock::now().time_since_epoch());
    }

    // Runs `hook` inside the calling thread's next call of now().
    static void on_next_now(std::function<void()> hook) { hook_ = std::move(hook); }

    static void add_listener(detail::clock_listener& l) { manual_clock::add_listener(l); }
    static void remove_listener(detail::clock_listener& l) noexcept
    {
        manual_clock::remove_listener(l);
    }

private:
    static inline thread_local std::function<void()> hook_;
};

} // namespace sched::test

#endif
