#ifndef SCHED_DETAIL_VISIBILITY_HPP
#define SCHED_DETAIL_VISIBILITY_HPP

// Every declaration of sched's headers lies between SCHED_VISIBILITY_BEGIN and
// SCHED_VISIBILITY_END, with default visibility: code built with -fvisibility=hidden into several
// shared objects then shares one copy of each of the library's inline variables, its
// thread-locals among them (which pool code runs on this thread, whether this is a timer's own
// thread), as libstdc++ does for std.
#if defined(__GNUC__)
#define SCHED_VISIBILITY_BEGIN _Pragma("GCC visibility push(default)")
#define SCHED_VISIBILITY_END _Pragma("GCC visibility pop")
#else
#define SCHED_VISIBILITY_BEGIN
#define SCHED_VISIBILITY_END
#endif

#endif // SCHED_DETAIL_VISIBILITY_HPP
