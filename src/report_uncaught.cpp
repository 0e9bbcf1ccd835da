#include <sched/detail/report_uncaught.hpp>

#include <cstdio>
#include <exception>

namespace sched::detail {

namespace {

// Writes `error` in one line: `with_what` takes `subject` then what() (a std::exception's);
// `without` takes `subject` alone.
void write_line(const char* with_what,
                const char* without,
                std::string_view subject,
                const std::exception_ptr& error) noexcept
{
    // stdio, not iostreams: one call per line, so that lines from several threads do not mix.
    const auto width = static_cast<int>(subject.size());
    try
    {
        std::rethrow_exception(error);
    }
    catch (const std::exception& e)
    {
        std::fprintf(stderr, with_what, width, subject.data(), e.what());
    }
    catch (...)
    {
        std::fprintf(stderr, without, width, subject.data());
    }
}

} // namespace

void report_uncaught(std::string_view who, const std::exception_ptr& error) noexcept
{
    write_line("sched: a task on \"%.*s\" threw: %s\n",
               "sched: a task on \"%.*s\" threw a non-standard exception\n", who, error);
}

void report_failure(std::string_view what_failed, const std::exception_ptr& error) noexcept
{
    write_line("sched: %.*s: %s\n", "sched: %.*s: a non-standard exception\n", what_failed, error);
}

} // namespace sched::detail
