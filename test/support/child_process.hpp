#ifndef SCHED_TEST_SUPPORT_CHILD_PROCESS_HPP
#define SCHED_TEST_SUPPORT_CHILD_PROCESS_HPP

#include <sched/detail/sanitizers.hpp>

#include <boost/test/unit_test.hpp>

#include <csignal>
#include <cstdio>
#include <iostream>
#include <optional>
#include <utility>

#if defined(__linux__)
#include <sys/wait.h>
#include <unistd.h>
#endif

namespace sched::test {

#if defined(__linux__)
// Runs `child` in a forked child process, which ends with its result as its exit status (or is
// killed after 20 s); returns its wait status (see waitpid()), or nothing if there is no child.
// The child may end itself with std::exit() instead, to run the static destructors (what the test
// runner wrote is flushed first, so that the child does not write it again). A signal ends the
// child as it would any process: the test runner's handlers (which would go on running the suite
// in the child) are not the child's.
template <class Child>
std::optional<int> child_status(Child child)
{
    std::cout.flush();
    std::cerr.flush();
    std::fflush(nullptr);
    const pid_t pid = fork();
    if (pid < 0)
        return std::nullopt;
    if (pid == 0)
    {
        for (const int signal : {SIGABRT, SIGALRM, SIGBUS, SIGFPE, SIGILL, SIGSEGV})
            std::signal(signal, SIG_DFL);
        alarm(20);
        _exit(child());
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid)
        return std::nullopt;
    return status;
}

// As child_status(); returns whether the child returned 0.
template <class Child>
bool in_child(Child child)
{
    const std::optional<int> status = child_status(std::move(child));
    return status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0;
}
#endif

// For tests that start threads in a child process, which has none (the test runner's may be
// running already): ThreadSanitizer cannot.
inline boost::test_tools::assertion_result child_starts_threads(boost::unit_test::test_unit_id)
{
    boost::test_tools::assertion_result result(!sched::detail::under_thread_sanitizer);
    result.message() << "ThreadSanitizer cannot start threads in a forked child";
    return result;
}

} // namespace sched::test

#endif // SCHED_TEST_SUPPORT_CHILD_PROCESS_HPP
