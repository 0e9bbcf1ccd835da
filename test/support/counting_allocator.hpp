#ifndef SCHED_TEST_SUPPORT_COUNTING_ALLOCATOR_HPP
#define SCHED_TEST_SUPPORT_COUNTING_ALLOCATOR_HPP

#include <atomic>
#include <cstddef>
#include <memory>

namespace sched::test {

// What a counting_allocator saw: allocations made, bytes still allocated, and the most blocks
// that were out at once.
class allocation_log
{
public:
    long allocations() const noexcept { return allocations_.load(); }
    long live() const noexcept { return live_.load(); }
    long most_blocks_out() const noexcept { return most_blocks_out_.load(); }

    void allocated(std::size_t bytes) noexcept
    {
        ++allocations_;
        live_ += static_cast<long>(bytes);
        const long out = ++blocks_out_;
        long most = most_blocks_out_.load();
        while (out > most && !most_blocks_out_.compare_exchange_weak(most, out))
        {}
    }
    void deallocated(std::size_t bytes) noexcept
    {
        live_ -= static_cast<long>(bytes);
        --blocks_out_;
    }

private:
    std::atomic<long> allocations_{0};
    std::atomic<long> live_{0};
    std::atomic<long> blocks_out_{0};
    std::atomic<long> most_blocks_out_{0};
};

// An allocator that records its traffic in an allocation_log.
template <class T>
class counting_allocator
{
public:
    using value_type = T;

    explicit counting_allocator(allocation_log& log) noexcept : log_(&log) {}

    template <class U>
    counting_allocator(const counting_allocator<U>& other) noexcept : log_(other.log())
    {}

    T* allocate(std::size_t n)
    {
        T* p = std::allocator<T>().allocate(n);
        log_->allocated(n * sizeof(T));
        return p;
    }

    void deallocate(T* p, std::size_t n) noexcept
    {
        log_->deallocated(n * sizeof(T));
        std::allocator<T>().deallocate(p, n);
    }

    allocation_log* log() const noexcept { return log_; }

    template <class U>
    bool operator==(const counting_allocator<U>& other) const noexcept
    {
        return log_ == other.log();
    }

private:
    allocation_log* log_;
};

} // namespace sched::test

#endif
