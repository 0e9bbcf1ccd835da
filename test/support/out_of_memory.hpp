#ifndef SCHED_TEST_SUPPORT_OUT_OF_MEMORY_HPP
#define SCHED_TEST_SUPPORT_OUT_OF_MEMORY_HPP

#include <new>

namespace sched::test {

// How many calls of attempt() and retry() threw std::bad_alloc: a scenario swept over its
// allocations (see fail_allocation_after()) shows this way that the failures reached its calls.
inline int bad_allocs_caught = 0;

// Runs `f`, whose failure for lack of memory the scenario allows.
template <class F>
void attempt(F f)
{
    try
    {
        f();
    }
    catch (const std::bad_alloc&)
    {
        ++bad_allocs_caught;
    }
}

// Runs `f` until it does not fail for lack of memory (an injected failure comes once).
template <class F>
void retry(F f)
{
    for (;;)
    {
        try
        {
            f();
            return;
        }
        catch (const std::bad_alloc&)
        {
            ++bad_allocs_caught;
        }
    }
}

} // namespace sched::test

#endif // SCHED_TEST_SUPPORT_OUT_OF_MEMORY_HPP
