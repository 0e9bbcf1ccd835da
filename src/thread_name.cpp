#include <sched/detail/thread_name.hpp>

#include <algorithm>
#include <charconv>
#include <cstring>

#if defined(__linux__)
#include <pthread.h>
#endif

namespace sched::detail {

void name_this_thread(const std::string& base, std::size_t index) noexcept
{
#if defined(__linux__)
    constexpr std::size_t max_length = 15; // pthread_setname_np's limit without the NUL
    char suffix[24] = {'-'};
    const char* digits_end = std::to_chars(suffix + 1, suffix + sizeof suffix, index).ptr;
    const auto suffix_length = std::min(static_cast<std::size_t>(digits_end - suffix), max_length);
    const std::size_t keep = std::min(base.size(), max_length - suffix_length);
    char name[max_length + 1] = {};
    std::memcpy(name, base.data(), keep);
    std::memcpy(name + keep, suffix, suffix_length);
    pthread_setname_np(pthread_self(), name);
#else
    (void)base;
    (void)index;
#endif
}

void name_this_thread(const std::string& name) noexcept
{
#if defined(__linux__)
    char cut[16] = {};
    std::memcpy(cut, name.data(), std::min(name.size(), sizeof cut - 1));
    pthread_setname_np(pthread_self(), cut);
#else
    (void)name;
#endif
}

} // namespace sched::detail
