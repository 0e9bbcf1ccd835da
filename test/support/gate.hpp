#ifndef SCHED_TEST_SUPPORT_GATE_HPP
#define SCHED_TEST_SUPPORT_GATE_HPP

#include <chrono>
#include <future>

namespace sched::test {

// Blocks the threads that wait on it until opened. The real-time bound only keeps a broken test
// from hanging.
class gate
{
public:
    void open() { opened_.set_value(); }
    void wait() const { (void)opened_future_.wait_for(std::chrono::seconds(60)); }

private:
    std::promise<void> opened_;
    std::shared_future<void> opened_future_ = opened_.get_future().share();
};

} // namespace sched::test

#endif
