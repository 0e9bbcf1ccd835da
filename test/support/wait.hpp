#ifndef SCHED_TEST_SUPPORT_WAIT_HPP
#define SCHED_TEST_SUPPORT_WAIT_HPP

#include <chrono>
#include <thread>

namespace sched::test {

// Yields until `condition()` holds or `limit` of real time has passed; returns whether it held.
// Also for asserting that something does not happen while the test holds it off: a pass then
// waits the whole limit.
template <class Rep, class Period, class Condition>
bool within(std::chrono::duration<Rep, Period> limit, Condition condition)
{
    const auto give_up = std::chrono::steady_clock::now() + limit;
    while (!condition())
    {
        if (std::chrono::steady_clock::now() > give_up)
            return false;
        std::this_thread::yield();
    }
    return true;
}

// Yields until `condition()` holds; false only if that took absurdly long (a hung test fails
// instead of hanging). For states that have no event to block on, such as "the worker has put
// the periodic task back in the queue".
template <class Condition>
bool eventually(Condition condition)
{
    return within(std::chrono::seconds(60), condition);
}

} // namespace sched::test

#endif
