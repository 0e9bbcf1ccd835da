#include <sched/detail/futex.hpp>

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#endif

namespace sched::detail {

#if defined(__linux__)
namespace {

std::uint32_t* futex_word(std::atomic<std::uint32_t>* word) noexcept
{
    static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));
    return reinterpret_cast<std::uint32_t*>(word);
}

} // namespace
#endif

void futex_wait(std::atomic<std::uint32_t>& word,
                std::uint32_t value,
                std::uint64_t timeout_ns) noexcept
{
#if defined(__linux__)
    timespec timeout{};
    timeout.tv_sec = time_t(timeout_ns / 1'000'000'000u);
    timeout.tv_nsec = long(timeout_ns % 1'000'000'000u);
    (void)syscall(SYS_futex, futex_word(&word), FUTEX_WAIT_PRIVATE, value,
                  timeout_ns != 0 ? &timeout : nullptr, nullptr, 0);
#else
    (void)timeout_ns;
    word.wait(value, std::memory_order_seq_cst);
#endif
}

void futex_wake_one(std::atomic<std::uint32_t>* word) noexcept
{
#if defined(__linux__)
    (void)syscall(SYS_futex, futex_word(word), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
#else
    word->notify_one();
#endif
}

} // namespace sched::detail
