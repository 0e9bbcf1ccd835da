#ifndef SCHED_TEST_SUPPORT_DOC_SNIPPETS_CONTEXT_HPP
#define SCHED_TEST_SUPPORT_DOC_SNIPPETS_CONTEXT_HPP

// What the documentation's code blocks use without declaring it: a server's io_context, pool,
// socket and handlers, as a reader would have them (see test/doc_snippets.cmake). Declared only:
// the blocks are compiled, never linked or run.

#include <sched/sched.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/strand.hpp>

#include <chrono>
#include <cstddef>
#include <exception>
#include <functional>

namespace doc_snippets {

using namespace std::chrono_literals;

extern boost::asio::io_context io;
extern sched::scheduled_thread_pool pool;
extern sched::scheduler scheduler;
extern boost::asio::strand<boost::asio::io_context::executor_type> strand;
extern boost::asio::ip::tcp::socket socket;
extern boost::asio::mutable_buffer buffer;

// A read's handler.
extern std::function<void(boost::system::error_code, std::size_t)> handler;
// A periodic operation's end: its error, if any, and how many times it ticked.
extern std::function<void(std::exception_ptr, std::size_t)> on_end;
extern std::function<void()> heartbeat;

int compute();
int expensive();
void beat();
void send_heartbeat();
void close_connection();

template <class... Args>
void log(const char* format, const Args&... args);

} // namespace doc_snippets

#endif // SCHED_TEST_SUPPORT_DOC_SNIPPETS_CONTEXT_HPP
