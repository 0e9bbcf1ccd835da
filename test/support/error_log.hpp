#ifndef SCHED_TEST_SUPPORT_ERROR_LOG_HPP
#define SCHED_TEST_SUPPORT_ERROR_LOG_HPP

#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace sched::test {

// The what() of every exception handed to sink(), in order: an error sink or error handler.
class error_log
{
public:
    std::function<void(std::exception_ptr)> sink()
    {
        return [this](std::exception_ptr e) {
            std::string what = "(not a std::exception)";
            try
            {
                std::rethrow_exception(e);
            }
            catch (const std::exception& error)
            {
                what = error.what();
            }
            catch (...)
            {}
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
