// A shared object built as many projects build theirs, with -fvisibility=hidden: it makes a
// timer, whose thread then runs there (see hidden_visibility.cpp).
#include <sched/timer.hpp>

__attribute__((visibility("default"))) sched::timer* make_timer()
{
    return new sched::timer("hidden");
}

__attribute__((visibility("default"))) void destroy_timer(sched::timer* t)
{
    delete t;
}
