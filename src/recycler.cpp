#include <sched/detail/recycler.hpp>

#include <new>

namespace sched::detail {
namespace {

constexpr std::size_t granule = 8;      // blocks come in multiples of this (malloc rounds to 16)
constexpr std::size_t class_count = 32; // 8 .. 256 bytes are recycled
#if defined(__SANITIZE_ADDRESS__)
constexpr bool recycling = false; // every block to operator new, so ASan sees each use
#else
constexpr bool recycling = true;
#endif
constexpr std::size_t blocks_kept = 256; // per size class and thread

struct free_block
{
    free_block* next;
};

struct free_list
{
    free_block* head;
    std::size_t count;
};

// Trivially destructible, so it can still be read while the thread (or, for the main thread, the
// program) is being torn down: a block freed then goes straight to operator delete.
struct thread_cache
{
    free_list lists[class_count];
    bool registered; // the closer below will empty the cache when the thread exits
    bool closed;     // it has done so
};

constinit thread_local thread_cache cache{};

struct cache_closer
{
    cache_closer() = default;
    cache_closer(const cache_closer&) = delete;
    cache_closer& operator=(const cache_closer&) = delete;

    ~cache_closer()
    {
        cache.closed = true;
        for (free_list& list : cache.lists)
        {
            while (free_block* b = list.head)
            {
                list.head = b->next;
                ::operator delete(b);
            }
            list.count = 0;
        }
    }
};

void register_closer()
{
    thread_local cache_closer closer;
    (void)closer;
    cache.registered = true;
}

std::size_t class_of(std::size_t size) noexcept
{
    return (size + granule - 1) / granule - 1;
}

} // namespace

void* recycled_allocate(std::size_t size)
{
    const std::size_t index = class_of(size);
    if (!recycling || index >= class_count)
        return ::operator new(size);
    free_list& list = cache.lists[index];
    if (free_block* b = list.head)
    {
        list.head = b->next;
        --list.count;
        return b;
    }
    return ::operator new((index + 1) * granule);
}

void recycled_deallocate(void* block, std::size_t size) noexcept
{
    const std::size_t index = class_of(size);
    if (recycling && index < class_count && !cache.closed && cache.lists[index].count < blocks_kept)
    {
        if (!cache.registered)
            register_closer();
        free_list& list = cache.lists[index];
        list.head = ::new (block) free_block{list.head};
        ++list.count;
        return;
    }
    ::operator delete(block);
}

} // namespace sched::detail
