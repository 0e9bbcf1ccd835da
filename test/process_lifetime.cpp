// A pool used while the program starts: defined at namespace scope in a program's own file, which
// comes before the library in the link, it is constructed, and runs tasks (freeing their memory on
// its worker), before the library's own statics are set up. Under TSan, a race with that set-up
// (the recycler's thread-exit key, the unmapping thread's fork handlers) fails the run.

#define BOOST_TEST_MODULE sched_process_lifetime
#include <sched/scheduled_thread_pool.hpp>

#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <thread>

namespace {

constexpr int early_tasks = 200;
std::atomic<int> ran_early{0};

sched::pool_options one_worker()
{
    sched::pool_options options;
    options.threads = 1;
    return options;
}

sched::scheduled_thread_pool early_pool{one_worker()};

// Hands the worker tasks and lets it run them while the program starts. Not waited for through
// the pool: that would order the worker's use of the library before the library's set-up, and
// hide a race of the two from TSan.
const bool handed_over = [] {
    for (int i = 0; i < early_tasks; ++i)
        early_pool.execute([] { ran_early.fetch_add(1, std::memory_order_relaxed); });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return true;
}();

} // namespace

BOOST_AUTO_TEST_SUITE(test_process_lifetime)

BOOST_AUTO_TEST_CASE(a_pool_runs_tasks_while_the_program_starts)
{
    BOOST_TEST(handed_over);
    early_pool.shutdown();
    BOOST_TEST(early_pool.await_termination(std::chrono::minutes(1)));
    BOOST_TEST(ran_early.load() == early_tasks);
}

BOOST_AUTO_TEST_SUITE_END()
