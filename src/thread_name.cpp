#include <sched/detail/thread_name.hpp>

#if defined(__linux__)
#include <pthread.h>
#endif

namespace sched::detail {

void name_this_thread(const std::string& base, std::size_t index) noexcept
{
#if defined(__linux__)
    try
    {
        constexpr std::size_t max_length = 15; // pthread_setname_np's limit without the NUL
        const std::string suffix = "-" + std::to_string(index);
        const std::string name =
            base.substr(0, suffix.size() < max_length ? max_length - suffix.size() : 0) + suffix;
        pthread_setname_np(pthread_self(), name.substr(0, max_length).c_str());
    }
    catch (...)
    {
        // Out of memory while building a name: keep the inherited one.
    }
#else
    (void)base;
    (void)index;
#endif
}

} // namespace sched::detail
