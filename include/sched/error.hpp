#ifndef SCHED_ERROR_HPP
#define SCHED_ERROR_HPP

#include <sched/detail/visibility.hpp>

#include <boost/asio/error.hpp>
#include <boost/system/error_code.hpp>
#include <boost/system/system_error.hpp>

#include <type_traits>

SCHED_VISIBILITY_BEGIN

namespace sched {

/// Why sched refused or ended work; the values of sched::error_category().
enum class error
{
    /// The scheduler was shut down, so the task was not accepted or will not run.
    shutdown = 1,
};

/// The category of sched::error codes; its name() is "sched".
const boost::system::error_category& error_category() noexcept;

/// Makes an error_code from a sched::error, so `ec == sched::error::shutdown` works.
inline boost::system::error_code make_error_code(error e) noexcept
{
    return {static_cast<int>(e), error_category()};
}

/// Thrown by a scheduling call the pool refused under rejection_policy::abort.
/// code() says why (sched::error::shutdown).
class rejected_execution : public boost::system::system_error
{
public:
    explicit rejected_execution(error reason, const char* what = "task rejected")
        : boost::system::system_error(make_error_code(reason), what)
    {}
};

/// Thrown by scheduled_future::get() when the task was cancelled before it completed.
/// Its code() is boost::asio::error::operation_aborted, as for a cancelled Asio operation.
class cancelled_error : public boost::system::system_error
{
public:
    cancelled_error()
        : boost::system::system_error(boost::asio::error::operation_aborted, "task cancelled")
    {}
};

} // namespace sched

template <>
struct boost::system::is_error_code_enum<sched::error> : std::true_type
{};

SCHED_VISIBILITY_END

#endif // SCHED_ERROR_HPP
