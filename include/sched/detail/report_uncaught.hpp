#ifndef SCHED_DETAIL_REPORT_UNCAUGHT_HPP
#define SCHED_DETAIL_REPORT_UNCAUGHT_HPP

#include <sched/detail/visibility.hpp>

#include <exception>
#include <string_view>

SCHED_VISIBILITY_BEGIN

namespace sched::detail {

// Writes one line on std::cerr for an exception that a task threw and nobody else will see:
// `sched: a task on "<who>" threw: <what()>`. Never throws.
void report_uncaught(std::string_view who, const std::exception_ptr& error) noexcept;

// Writes one line on std::cerr for an exception that nobody else will see, thrown as the library
// did `what_failed`: `sched: <what_failed>: <what()>`. Never throws.
void report_failure(std::string_view what_failed, const std::exception_ptr& error) noexcept;

} // namespace sched::detail

SCHED_VISIBILITY_END

#endif // SCHED_DETAIL_REPORT_UNCAUGHT_HPP
