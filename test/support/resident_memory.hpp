#ifndef SCHED_TEST_SUPPORT_RESIDENT_MEMORY_HPP
#define SCHED_TEST_SUPPORT_RESIDENT_MEMORY_HPP

#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <fstream>

#include <unistd.h>

namespace sched::test {

// The process's resident size in bytes (Linux's /proc/self/statm), or -1 where it cannot be read.
inline std::int64_t resident_bytes()
{
    std::ifstream statm("/proc/self/statm");
    std::int64_t total_pages = 0;
    std::int64_t resident_pages = 0;
    if (!(statm >> total_pages >> resident_pages))
        return -1;
    return resident_pages * ::sysconf(_SC_PAGESIZE);
}

// A precondition for tests that read the resident size.
inline boost::test_tools::assertion_result resident_size_readable(boost::unit_test::test_unit_id)
{
    boost::test_tools::assertion_result result(resident_bytes() >= 0);
    result.message() << "the resident size cannot be read here";
    return result;
}

} // namespace sched::test

#endif // SCHED_TEST_SUPPORT_RESIDENT_MEMORY_HPP
