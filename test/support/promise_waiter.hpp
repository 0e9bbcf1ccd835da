#ifndef SCHED_TEST_SUPPORT_PROMISE_WAITER_HPP
#define SCHED_TEST_SUPPORT_PROMISE_WAITER_HPP

#include <boost/asio/io_context.hpp>
#include <boost/system/error_code.hpp>

#include <atomic>
#include <optional>

#include "support/wait.hpp"

namespace sched::test {

// Waits on an experimental::promise of `void(error_code)`, and records what it got and whether
// it ran on a thread of `io` (a promise completes through its operation's executor).
class promise_waiter
{
public:
    explicit promise_waiter(boost::asio::io_context& io) : io_(io) {}

    template <class Promise>
    void wait_on(Promise& promise)
    {
        promise([this](boost::system::error_code ec) {
            on_io_ = io_.get_executor().running_in_this_thread();
            result_ = ec;
            ran_ = true;
        });
    }

    // Whether the waiter ran (waiting for it up to a minute, wherever it runs).
    bool ran() const
    {
        return eventually([this] { return ran_.load(); });
    }

    // Whether the waiter ran, on a thread of the io_context, and got `expected`.
    bool ran_on_io_with(boost::system::error_code expected) const
    {
        return ran() && on_io_.load() && result_ == expected;
    }

private:
    boost::asio::io_context& io_;
    std::atomic<bool> ran_{false};
    std::atomic<bool> on_io_{false};
    std::optional<boost::system::error_code> result_; // written before ran_
};

} // namespace sched::test

#endif
