#include <sched/detail/report_uncaught.hpp>

#include <cstdio>
#include <exception>

namespace sched::detail {

void report_uncaught(std::string_view who, const std::exception_ptr& error) noexcept
{
    // stdio, not iostreams: one call per line, so that lines from several threads do not mix.
    const auto width = static_cast<int>(who.size());
    try
    {
        std::rethrow_exception(error);
    }
    catch (const std::exception& e)
    {
        std::fprintf(stderr, "sched: a task on \"%.*s\" threw: %s\n", width, who.data(), e.what());
    }
    catch (...)
    {
        std::fprintf(stderr, "sched: a task on \"%.*s\" threw a non-standard exception\n", width,
                     who.data());
    }
}

} // namespace sched::detail
