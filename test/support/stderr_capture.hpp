#ifndef SCHED_TEST_SUPPORT_STDERR_CAPTURE_HPP
#define SCHED_TEST_SUPPORT_STDERR_CAPTURE_HPP

#include <cstddef>
#include <cstdio>
#include <stdexcept>
#include <string>

#include <unistd.h>

namespace sched::test {

// While it lives, what the process writes to its standard error (file descriptor 2, from any
// thread) goes to a temporary file instead, which text() reads back.
class stderr_capture
{
public:
    stderr_capture() : file_(std::tmpfile())
    {
        if (!file_)
            throw std::runtime_error("stderr_capture: no temporary file");
        std::fflush(stderr);
        saved_ = ::dup(2);
        if (saved_ < 0 || ::dup2(::fileno(file_), 2) < 0)
            throw std::runtime_error("stderr_capture: cannot redirect stderr");
    }

    stderr_capture(const stderr_capture&) = delete;
    stderr_capture& operator=(const stderr_capture&) = delete;

    ~stderr_capture()
    {
        std::fflush(stderr);
        ::dup2(saved_, 2);
        ::close(saved_);
        std::fclose(file_);
    }

    // Everything written so far (read without moving the file's offset, which stderr shares, so
    // that it may be called while other threads write).
    std::string text()
    {
        std::fflush(stderr);
        std::string out;
        char buffer[4096];
        for (;;)
        {
            const ::ssize_t n =
                ::pread(::fileno(file_), buffer, sizeof buffer, static_cast<::off_t>(out.size()));
            if (n <= 0)
                break;
            out.append(buffer, static_cast<std::size_t>(n));
        }
        return out;
    }

private:
    std::FILE* file_;
    int saved_ = -1;
};

} // namespace sched::test

#endif
