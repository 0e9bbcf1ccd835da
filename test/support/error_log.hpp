#ifndef SCHED_TEST_SUPPORT_ERROR_LOG_HPP
#define SCHED_TEST_SUPPORT_ERROR_LOG_HPP

#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace sched::test {

// The what() of the exception in `e`; "" for none, "(not a std::exception)" for anything else.
inline std::string what_of(const std::exception_ptr& e)
{
    if (!e)
        return "";
    try
    {
        std::rethrow_exception(e);
    }
    catch (const std::exception& error)
    {
        return error.what();
    }
    catch (...)
    {
        return "(not a std::exception)";
    }
}

// The what() of every exception handed to sink(), in order: an error sink or error handler.
class error_log
{
public:
    std::function<void(std::exception_ptr)> sink()
    {
        return [this](std::exception_ptr e) {
            std::string what = what_of(e);
            std::lock_guard lock(mutex_);
            messages_.push_back(std::move(what));
        };
    }

    std::vector<std::string> snapshot() const
    {
        std::lock_guard lock(mutex_);
        return messages_;
    }

private:
    mutable std::mutex mutex_;
    std::vector<std::string> messages_;
};

} // namespace sched::test

#endif
