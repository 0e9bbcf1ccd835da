// Teaches: Java's shutdown policies by their names. shutdown() lets delayed one-shot tasks run
// (execute_existing_delayed_tasks_after_shutdown) and stops periodic ones
// (continue_existing_periodic_tasks_after_shutdown), then refuses new work under
// rejection_policy::abort; shutdown_now() hands back the tasks that never ran as task_handles:
// run one, and dropping another cancels it, so its future says so.
#include <sched/scheduled_thread_pool.hpp>

#include <chrono>
#include <cstdio>

using namespace std::chrono_literals;

int main()
{
    bool ok = true;
    const auto check = [&](bool what, const char* says) {
        std::printf("%s: %s\n", says, what ? "yes" : "NO");
        ok = ok && what;
    };

    {
        sched::pool_options options; // Java's defaults, spelled out
        options.threads = 1;
        options.execute_existing_delayed_tasks_after_shutdown = true;
        options.continue_existing_periodic_tasks_after_shutdown = false;
        options.rejection = sched::rejection_policy::abort;
        sched::scheduled_thread_pool pool(options);
        auto delayed = pool.schedule(20ms, [] { return 1; });
        auto periodic = pool.schedule_at_fixed_rate(1h, 1h, [] {});
        pool.shutdown();
        check(periodic.is_cancelled(), "shutdown() cancelled the periodic task");
        check(delayed.get() == 1, "the delayed task still ran");
        bool rejected = false;
        try
        {
            pool.submit([] {});
        }
        catch (const sched::rejected_execution&)
        {
            rejected = true;
        }
        check(rejected, "new work was rejected");
        pool.await_termination();
        check(pool.is_terminated(), "the pool terminated");
    }

    {
        sched::scheduled_thread_pool pool(1);
        auto first = pool.schedule(1h, [] { return 2; });
        auto second = pool.schedule(2h, [] { return 3; });
        std::vector<sched::task_handle> never_ran = pool.shutdown_now();
        check(never_ran.size() == 2, "shutdown_now() handed back both tasks");
        never_ran[0].run(); // in due order: `first`, run here
        never_ran.clear();  // `second` is cancelled as its handle goes
        check(first.get() == 2, "the task run through its handle completed");
        check(second.is_cancelled(), "the dropped task's future reports cancellation");
    }
    return ok ? 0 : 1;
}
