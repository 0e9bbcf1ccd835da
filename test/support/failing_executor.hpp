#ifndef SCHED_TEST_SUPPORT_FAILING_EXECUTOR_HPP
#define SCHED_TEST_SUPPORT_FAILING_EXECUTOR_HPP

#include <boost/asio/execution/blocking.hpp>
#include <boost/asio/execution/context.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include <atomic>
#include <exception>
#include <new>
#include <utility>

namespace sched::test {

// An io_context's executor whose submissions throw std::bad_alloc while `fail` is set: what a
// post through it does when memory runs out (Asio allocates each submitted function). Or, given
// `error`, they throw that instead: an executor that refuses work otherwise.
class failing_executor
{
public:
    failing_executor(boost::asio::io_context& io,
                     const std::atomic<bool>& fail,
                     std::exception_ptr error = nullptr) noexcept
        : inner_(io.get_executor()), fail_(&fail), error_(std::move(error))
    {}

    boost::asio::io_context& query(boost::asio::execution::context_t) const noexcept
    {
        return inner_.context();
    }

    static constexpr boost::asio::execution::blocking_t
    query(boost::asio::execution::blocking_t) noexcept
    {
        return boost::asio::execution::blocking.never;
    }

    template <class Function>
    void execute(Function&& f) const
    {
        if (fail_->load() && error_)
            std::rethrow_exception(error_);
        if (fail_->load())
            throw std::bad_alloc();
        boost::asio::post(inner_, std::forward<Function>(f));
    }

    friend bool operator==(const failing_executor& a, const failing_executor& b) noexcept
    {
        return a.inner_ == b.inner_ && a.fail_ == b.fail_ && a.error_ == b.error_;
    }

    friend bool operator!=(const failing_executor& a, const failing_executor& b) noexcept
    {
        return !(a == b);
    }

private:
    boost::asio::io_context::executor_type inner_;
    const std::atomic<bool>* fail_;
    std::exception_ptr error_;
};

} // namespace sched::test

#endif // SCHED_TEST_SUPPORT_FAILING_EXECUTOR_HPP
