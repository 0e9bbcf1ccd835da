// Links against the installed sched (every public header, through sched.hpp) and schedules one
// task.
#include <sched/sched.hpp>

#include <chrono>
#include <iostream>

int main()
{
    sched::scheduled_thread_pool pool(1);
    auto answer = pool.schedule(std::chrono::milliseconds(1), [] { return 42; });
    std::cout << "consumer: " << answer.get() << '\n';
    return answer.get() == 42 ? 0 : 1;
}
