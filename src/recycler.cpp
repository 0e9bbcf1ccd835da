#include <sched/detail/recycler.hpp>

#include <new>

namespace sched::detail {
namespace {

// Size classes: multiples of 8 bytes up to 256 (malloc rounds to 16, so a pool's small tasks
// waste nothing), then of 32 bytes up to 1,024, which holds an operation with a coroutine's
// handler or a lambda capturing a few shared_ptrs, as Asio's own recycling does (up to 1,020).
constexpr std::size_t small_granule = 8;
constexpr std::size_t small_limit = 256;
constexpr std::size_t large_granule = 32;
constexpr std::size_t largest = max_recycled_size;
constexpr std::size_t small_classes = small_limit / small_granule;
constexpr std::size_t class_count = small_classes + (largest - small_limit) / large_granule;
// Per size class and thread. Fewer than a batch of completions frees at once is worse than
// none: measured with 256 timeouts cancelled per handler, keeping 151 of each 432-byte batch (and
// freeing the rest) cost 310 ns a pair, none 280, all 210. So at most 256 x (8 + 16 + ... + 1,024)
// bytes, about 5 MB, sit idle in a thread that has freed that many blocks of every class.
constexpr std::size_t blocks_kept = 256;

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

// The size class of a block of `size` bytes (0 < size <= largest), and its blocks' size.
std::size_t class_of(std::size_t size) noexcept
{
    if (size <= small_limit)
        return (size + small_granule - 1) / small_granule - 1;
    return small_classes + (size - small_limit + large_granule - 1) / large_granule - 1;
}

constexpr std::size_t block_size(std::size_t index) noexcept
{
    if (index < small_classes)
        return (index + 1) * small_granule;
    return small_limit + (index - small_classes + 1) * large_granule;
}

static_assert(block_size(class_count - 1) == largest);

} // namespace

void* recycled_allocate(std::size_t size)
{
    if (!recycles_blocks || size == 0 || size > largest)
        return ::operator new(size);
    const std::size_t index = class_of(size);
    free_list& list = cache.lists[index];
    if (free_block* b = list.head)
    {
        list.head = b->next;
        --list.count;
        return b;
    }
    return ::operator new(block_size(index));
}

void recycled_deallocate(void* block, std::size_t size) noexcept
{
    if (recycles_blocks && size != 0 && size <= largest && !cache.closed)
    {
        const std::size_t index = class_of(size);
        free_list& list = cache.lists[index];
        if (list.count < blocks_kept)
        {
            if (!cache.registered)
                register_closer();
            list.head = ::new (block) free_block{list.head};
            ++list.count;
            return;
        }
    }
    ::operator delete(block);
}

} // namespace sched::detail
