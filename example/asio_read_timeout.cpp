// Teaches: bounding any Asio operation in time with sched::cancel_after — here a socket read on
// loopback that gets no data, cancelled after 50 ms — and an idle deadline pushed back in place.
#include <sched/cancel_after.hpp>
#include <sched/deadline.hpp>

#include <boost/asio/error.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <array>
#include <chrono>
#include <iostream>

using namespace std::chrono_literals;
using boost::asio::ip::tcp;

int main()
{
    boost::asio::io_context io;
    sched::scheduled_thread_pool pool(1);
    sched::scheduler scheduler(io, pool);

    tcp::acceptor acceptor(io, tcp::endpoint(boost::asio::ip::address_v4::loopback(), 0));
    tcp::socket client(io);
    client.connect(acceptor.local_endpoint());
    tcp::socket server = acceptor.accept();

    // The client never writes: the read is cancelled when its 50 ms are up.
    std::array<char, 64> buffer;
    boost::system::error_code read_error;
    server.async_read_some(
        boost::asio::buffer(buffer),
        sched::cancel_after(scheduler, 50ms, [&](boost::system::error_code ec, std::size_t) {
            read_error = ec;
            std::cout << "read: " << ec.message() << '\n'; // "Operation canceled"
        }));

    // An idle deadline: each message pushes it back, without cancelling and waiting again.
    sched::deadline idle(io, pool);
    idle.expires_after(20ms);
    bool expired = false;
    idle.async_wait([&](boost::system::error_code ec) {
        expired = !ec && std::chrono::steady_clock::now() >= idle.expiry(); // not before 30 ms
        std::cout << "idle deadline: " << (ec ? ec.message() : "expired") << '\n';
    });
    const bool moved = idle.expires_after(30ms); // a message arrived: push it back
    std::cout << "pushed back: " << std::boolalpha << moved << '\n';

    io.run();
    return read_error == boost::asio::error::operation_aborted && moved && expired ? 0 : 1;
}
