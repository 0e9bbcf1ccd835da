#ifndef SCHED_TEST_SUPPORT_OUT_OF_MEMORY_HPP
#define SCHED_TEST_SUPPORT_OUT_OF_MEMORY_HPP

#include <boost/test/unit_test.hpp>

#include <new>

#include "support/failing_allocation.hpp"

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

// Whether the failure that fail_allocation_after() armed has come; disarms it.
inline bool disarm_allocation_failure() noexcept
{
    const bool failed = !allocation_failure_pending();
    fail_allocation_after(-1);
    return failed;
}

// Sweeps a scenario over its allocations: calls `run(n)` for n = 0, 1, 2, ... until a run needs
// no more. Each run arms fail_allocation_after(n) once its setup is done, checks what the
// library promises, and returns disarm_allocation_failure(). Then checks that the sweep tried
// something: failures came, and some reached the scenario's calls.
template <class Run>
void sweep_allocations(Run run)
{
    bad_allocs_caught = 0;
    long runs = 1;
    for (long n = 0; run(n); ++n)
        ++runs;
    BOOST_TEST_MESSAGE("scenario runs: " << runs);
    BOOST_TEST(runs > 1);              // the scenario allocates: failures were tried
    BOOST_TEST(bad_allocs_caught > 0); // and some reached the caller
}

} // namespace sched::test

#endif // SCHED_TEST_SUPPORT_OUT_OF_MEMORY_HPP
