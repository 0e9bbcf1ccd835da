// Both sides: a socket on a strand that reads and writes whole lines, each write (and a
// request's read) bounded by a sched::cancel_after deadline.
#ifndef SCHED_EXAMPLE_HEARTBEAT_LINE_SOCKET_HPP
#define SCHED_EXAMPLE_HEARTBEAT_LINE_SOCKET_HPP

#include <sched/sched.hpp>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>

#include <chrono>
#include <deque>
#include <memory>
#include <string>
#include <utility>

#include "settings.hpp"

namespace heartbeat {

namespace asio = boost::asio;
using asio::ip::tcp;
using boost::system::error_code;

// A connection's socket on its strand: whole lines in, a queue of whole lines out, each write
// bounded by a deadline.
class line_socket
{
public:
    line_socket(tcp::socket socket, sched::scheduler& scheduler, const settings& config)
        : socket_(std::move(socket)), scheduler_(scheduler), config_(config)
    {}
    line_socket(const line_socket&) = delete;
    line_socket& operator=(const line_socket&) = delete;

    // The connection's strand.
    tcp::socket::executor_type executor() { return socket_.get_executor(); }

protected:
    ~line_socket() = default;

    // On the strand.
    template <class Self>
    void send(const std::shared_ptr<Self>& self, std::string line)
    {
        out_.push_back(std::move(line));
        if (out_.size() == 1)
            write_next(self);
    }

    // On the strand: reads one line; `on_line` gets it (without the newline) or the error.
    template <class Self, class OnLine>
    void read_line(const std::shared_ptr<Self>& self, OnLine on_line)
    {
        asio::async_read_until(socket_, in_, '\n',
                               [this, self, on_line](error_code ec, std::size_t n) mutable {
                                   on_line(ec, ec ? std::string() : take(n));
                               });
    }

    // The same, under `deadline`: operation_aborted if it passes first.
    template <class Self, class OnLine>
    void read_line_within(const std::shared_ptr<Self>& self,
                          std::chrono::milliseconds deadline,
                          OnLine on_line)
    {
        asio::async_read_until(
            socket_, in_, '\n',
            sched::cancel_after(scheduler_, deadline,
                                [this, self, on_line](error_code ec, std::size_t n) mutable {
                                    on_line(ec, ec ? std::string() : take(n));
                                }));
    }

    void close_socket()
    {
        error_code ignored;
        socket_.shutdown(tcp::socket::shutdown_both, ignored);
        socket_.close(ignored);
    }

    // A write failed or timed out; the socket is to be closed.
    virtual void on_write_error(error_code ec) = 0;
    // Every queued line is written.
    virtual void on_written() {}

    tcp::socket socket_;
    sched::scheduler& scheduler_;
    const settings& config_;

private:
    std::string take(std::size_t n)
    {
        std::string line(asio::buffers_begin(in_.data()),
                         asio::buffers_begin(in_.data()) + static_cast<std::ptrdiff_t>(n - 1));
        in_.consume(n);
        return line;
    }

    template <class Self>
    void write_next(const std::shared_ptr<Self>& self)
    {
        asio::async_write(socket_, asio::buffer(out_.front()),
                          sched::cancel_after(scheduler_, config_.write_deadline,
                                              [this, self](error_code ec, std::size_t) {
                                                  if (ec)
                                                      return on_write_error(ec);
                                                  out_.pop_front();
                                                  if (!out_.empty())
                                                      write_next(self);
                                                  else
                                                      on_written();
                                              }));
    }

    static constexpr std::size_t max_line = 1024; // a longer line is garbage
    asio::streambuf in_{max_line};
    std::deque<std::string> out_;
};

} // namespace heartbeat

#endif
