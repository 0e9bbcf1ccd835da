#ifndef SCHED_TEST_SUPPORT_RECYCLER_PROBE_HPP
#define SCHED_TEST_SUPPORT_RECYCLER_PROBE_HPP

#include <sched/detail/recycler.hpp>

#include <boost/test/unit_test.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace sched::test {

// A precondition for tests of what the recycler keeps: under AddressSanitizer every block goes
// to operator new and delete instead.
inline boost::test_tools::assertion_result recycling(boost::unit_test::test_unit_id)
{
    boost::test_tools::assertion_result result(detail::recycles_blocks);
    result.message() << "no block is recycled under AddressSanitizer";
    return result;
}

// Where a block was, as a number (it may be freed by the time it is compared).
inline std::uintptr_t address(const void* block)
{
    return reinterpret_cast<std::uintptr_t>(block);
}

// Watches the recycler on this thread: it puts a block of every size up to max_recycled_size
// first in line for its size class, and taken() says how many of those sizes no longer find it
// there, so whether anything on this thread took memory from the recycler meanwhile.
class recycler_probe
{
public:
    recycler_probe()
    {
        for (std::size_t size = step; size <= detail::max_recycled_size; size += step)
        {
            void* block = detail::recycled_allocate(size);
            detail::recycled_deallocate(block, size);
            first_.push_back(address(block));
        }
    }

    std::size_t taken() const
    {
        std::size_t count = 0;
        for (std::size_t i = 0; i < first_.size(); ++i)
        {
            const std::size_t size = (i + 1) * step;
            void* block = detail::recycled_allocate(size);
            count += address(block) != first_[i];
            detail::recycled_deallocate(block, size);
        }
        return count;
    }

private:
    static constexpr std::size_t step = 8;
    std::vector<std::uintptr_t> first_; // per size, the block first in line
};

} // namespace sched::test

#endif // SCHED_TEST_SUPPORT_RECYCLER_PROBE_HPP
