// sched's headers in two objects that each hide their symbols share one copy of the library's
// thread-locals: a task of a timer made in a shared object calls the timer's cancel() from the
// executable's code, which must know it is on the timer's own thread (with a copy of its own,
// the executable took it for another thread's, and cancel() joined its own thread: terminate).
#include <sched/timer.hpp>

#include <chrono>
#include <cstdio>
#include <future>

sched::timer* make_timer();
void destroy_timer(sched::timer* t);

int main()
{
    sched::timer* timer = make_timer();
    std::promise<bool> done;
    sched::timer_task task([&] {
        timer->cancel(); // from inside the run: returns at once
        done.set_value(true);
    });
    timer->schedule(task, std::chrono::milliseconds(1));
    const bool ran = done.get_future().get();
    destroy_timer(timer);
    std::puts(ran ? "cancel() from a run in another object returned" : "the task did not run");
    return ran ? 0 : 1;
}
