#include <sched/detail/atomic_mutex.hpp>
#include <sched/detail/background_unmap.hpp>
#include <sched/detail/mapped_memory.hpp>
#include <sched/detail/recycler.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <new>
#include <thread>
#include <utility>

#include <pthread.h>

namespace sched::detail {
namespace {

// Size classes: multiples of 8 bytes up to 256 (a pool's one-shot task is 56 bytes, and its block
// is 56 bytes), then of 32 bytes up to 1,024, which holds an operation with a coroutine's handler
// or a lambda capturing a few shared_ptrs, as Asio's own recycling does (up to 1,020).
constexpr std::size_t small_granule = 8;
constexpr std::size_t small_limit = 256;
constexpr std::size_t large_granule = 32;
constexpr std::size_t largest = max_recycled_size;
constexpr std::size_t small_classes = small_limit / small_granule;
constexpr std::size_t class_count = small_classes + (largest - small_limit) / large_granule;
// Per size class and thread. Fewer than a batch of completions frees at once is worse than
// none: measured with 256 timeouts cancelled per handler, keeping 151 of each 432-byte batch (and
// freeing the rest) cost 310 ns a pair, none 280, all 210. A thread whose cache is empty takes up
// to 32 blocks, and at most 4 KB, at once; so a cache keeps 256 blocks beside what is left of such
// a refill, and once full gives back its older half. At most 288 x (8 + 16 + ... + 1,024) bytes,
// about 6 MB, sit idle in a thread that has freed that many blocks of every class. Each such block
// keeps its span mapped, so blocks freed in no particular order (timeouts cancelled at random)
// could keep 288 spans of 64 KB, 18 MB, per class and thread: a thread found to only free blocks
// of a class (by its second spill, its 433rd free, at the latest) keeps no more than drain_batch
// of them from then on (see spill()), 1 MB at most. The spans such a thread empties, though
// another thread may soon allocate their blocks again, are kept idle for a while (span decay,
// below): without that, blocks freed in shuffled order by one thread and allocated by another,
// thousands at a time, cost up to 10 times as much a pair, the spans unmapped and mapped again
// every round (measured: docs/performance.md; as did blocks freed in the order allocated).
constexpr std::size_t blocks_kept = 256;
constexpr std::size_t refill_blocks = 32;
constexpr std::size_t refill_bytes = 4096;
constexpr std::size_t cache_limit = blocks_kept + refill_blocks;
constexpr std::size_t drain_batch = 16;

// Blocks are carved from spans: regions of span_size bytes, aligned to that size, each holding a
// header and then blocks of one class with nothing between them (malloc's own header would
// make a 56-byte block take 64 bytes). A span goes back to the system once all its blocks have
// been back for a while (see span decay below); each class keeps one empty span for the next
// refill.
constexpr std::size_t span_size = std::size_t(64) * 1024;
constexpr std::size_t span_header = 64; // a multiple of 16: a block is aligned as its size allows

struct free_block
{
    free_block* next;
};

struct span
{
    span* prev; // in its class's list of spans with room, while it is there
    span* next;
    free_block* free;    // blocks given back
    std::size_t carved;  // blocks carved so far, from the start
    std::size_t live;    // blocks out of the span (with callers, or in threads' caches)
    bool listed;         // in the list of spans with room
    unsigned idle_since; // while idle: decay_epoch() when it emptied
};

static_assert(sizeof(span) <= span_header);

// Span decay (as jemalloc's): a span that empties is kept mapped, and resident, on its class's
// list of idle spans (up to max_idle_spans of them, 4 MB), and a refill takes it first, so that
// blocks freed by one thread and allocated again by another, thousands at a time, do not unmap
// and map (and fault in) spans every round. Spans idle for decay_ticks ticks of the unmapping
// thread (0.75 to 1 s) go back to the system there (one becomes the class's spare); the thread
// ticks only while some class has an idle span. Beyond the cap, a span that empties goes back at
// once, as before.
constexpr bool decays_spans = maps_memory && span_decay_available;
constexpr std::size_t max_idle_spans = 64;

// How many spans wait on the idle lists of all classes: the unmapping thread ticks while any do.
constinit std::atomic<std::size_t> idle_spans{0};

// Spans of one class, under its lock.
struct span_list
{
    atomic_mutex mutex;
    span* with_room = nullptr;   // spans with a free block or room to carve one
    span* spare = nullptr;       // an empty span kept back, its pages discarded
    span* idle_newest = nullptr; // empty spans kept resident, newest first (through next)
    span* idle_oldest = nullptr;
    std::size_t idle_count = 0;
    // A span of the class has been carved to its end: one it takes next is populated at once
    // (see take_block()).
    bool carved_one = false;
};

// Never destroyed (trivially destructible), so that a block freed during the program's teardown
// still finds its span.
constinit span_list spans[class_count];

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

constexpr std::size_t blocks_per_span(std::size_t index) noexcept
{
    return (span_size - span_header) / block_size(index);
}

span* span_of(void* block) noexcept
{
    return reinterpret_cast<span*>(reinterpret_cast<std::uintptr_t>(block) & ~(span_size - 1));
}

void link(span_list& list, span& s) noexcept
{
    s.prev = nullptr;
    s.next = list.with_room;
    if (list.with_room)
        list.with_room->prev = &s;
    list.with_room = &s;
    s.listed = true;
}

void unlink(span_list& list, span& s) noexcept
{
    (s.prev ? s.prev->next : list.with_room) = s.next;
    if (s.next)
        s.next->prev = s.prev;
    s.listed = false;
}

// Spans are mapped spans_per_map at a time, the ones not yet used kept untouched (so not
// resident) in a reserve, and unmapped one at a time, so that a span's memory goes back to the
// system soon after it is empty. (An aligned operator new of 64 KB would cost glibc 8 KB more of
// resident memory, measured.)
constexpr std::size_t spans_per_map = maps_memory ? 16 : 1;

struct span_reserve
{
    atomic_mutex mutex;
    void* spans[spans_per_map];
    std::size_t count = 0;
};

constinit span_reserve reserve{};

void* new_span_memory()
{
    std::lock_guard lock(reserve.mutex);
    if (reserve.count == 0)
    {
        auto* first = static_cast<std::byte*>(map_memory(spans_per_map * span_size, span_size));
        for (std::size_t i = spans_per_map; i-- > 0;)
            reserve.spans[reserve.count++] = first + i * span_size;
    }
    return reserve.spans[--reserve.count];
}

span* new_span()
{
    return ::new (new_span_memory()) span{};
}

// Under the class's lock: `s` (the newest or the oldest idle span of `list`, or null), taken off
// the idle list.
span* take_idle(span_list& list, span* s) noexcept
{
    if (!s)
        return nullptr;
    (s->prev ? s->prev->next : list.idle_newest) = s->next;
    (s->next ? s->next->prev : list.idle_oldest) = s->prev;
    --list.idle_count;
    idle_spans.fetch_sub(1, std::memory_order_relaxed);
    return s;
}

// Under the class's lock: `s`, empty and on no list, becomes the class's spare: kept mapped, but
// not resident.
void keep_as_spare(span_list& list, span& s) noexcept
{
    s.free = nullptr; // every carved block is back: carving starts over
    s.carved = 0;
    discard_pages(&s + 1, span_size - sizeof(span));
    list.spare = &s;
}

// Under the class's lock: a block of the class, from a span with room, an idle span, the spare,
// or a new span.
void* take_block(span_list& list, std::size_t index)
{
    span* s = list.with_room;
    if (!s)
    {
        s = take_idle(list, list.idle_newest);
        if (!s)
        {
            s = std::exchange(list.spare, nullptr);
            if (!s)
                s = new_span();
            // The spare's pages were discarded, a new span's never touched. In a class that
            // has filled a span, this one's blocks will be carved too: its pages come in at
            // once, not by a fault each. (A class that never fills one keeps only the pages
            // it touches resident.)
            if (list.carved_one)
                (void)populate_pages(s + 1, span_size - sizeof(span));
        }
        link(list, *s);
    }
    void* block;
    if (free_block* b = s->free)
    {
        s->free = b->next;
        block = b;
    }
    else
        block = reinterpret_cast<char*>(s) + span_header + s->carved++ * block_size(index);
    ++s->live;
    if (!s->free && s->carved == blocks_per_span(index))
    {
        list.carved_one = true;
        unlink(list, *s);
    }
    return block;
}

// Under the class's lock: `block` is back in its span. A span left empty goes on the idle list
// (and `idled` is set: the unmapping thread must age it), or, if that is full, is kept as the
// spare, or else added to `emptied` (through its `next`), to be unmapped once the lock is
// released.
void give_back(span_list& list, void* block, span*& emptied, bool& idled) noexcept
{
    span& s = *span_of(block);
    s.free = ::new (block) free_block{s.free};
    if (--s.live != 0)
    {
        if (!s.listed)
            link(list, s);
        return;
    }
    if (s.listed)
        unlink(list, s);
    if (decays_spans && list.idle_count < max_idle_spans)
    {
        s.free = nullptr; // every carved block is back: carving starts over (pages resident)
        s.carved = 0;
        s.idle_since = decay_epoch();
        s.prev = nullptr;
        s.next = list.idle_newest;
        if (list.idle_newest)
            list.idle_newest->prev = &s;
        else
            list.idle_oldest = &s;
        list.idle_newest = &s;
        ++list.idle_count;
        idle_spans.fetch_add(1, std::memory_order_relaxed);
        idled = true;
        return;
    }
    if (list.spare)
    {
        s.next = emptied;
        emptied = &s;
    }
    else
        keep_as_spare(list, s);
}

// A process forked while another thread holds a lock of the spans would find it locked for good:
// the fork waits until it can take them all (in the order the other paths take them), and both
// processes let go of them after.
void lock_for_fork() noexcept
{
    for (span_list& list : spans)
        list.mutex.lock();
    reserve.mutex.lock();
}

void unlock_after_fork() noexcept
{
    reserve.mutex.unlock();
    for (span_list& list : spans)
        list.mutex.unlock();
}

// The child has no unmapping thread to age its idle spans: they go back now (munmap may be called
// in a forked child), so that the count starts from none and the next idle span starts the
// child's thread ticking.
void unlock_in_child() noexcept
{
    for (span_list& list : spans)
        while (list.idle_oldest)
            unmap_memory(take_idle(list, list.idle_oldest), span_size, span_size);
    unlock_after_fork();
}

// Under the class's lock: takes the idle spans of `list` (all, or those idle for decay_ticks by
// `epoch`) off it. One becomes the spare if the class has none (its pages discarded); the others
// are returned, chained through `next`, for the caller to unmap once the lock is released.
span* take_expired(span_list& list, unsigned epoch, bool all) noexcept
{
    span* expired = nullptr;
    while (list.idle_oldest && (all || epoch - list.idle_oldest->idle_since >= decay_ticks))
    {
        span* s = take_idle(list, list.idle_oldest);
        if (!list.spare)
            keep_as_spare(list, *s);
        else
        {
            s->next = expired;
            expired = s;
        }
    }
    return expired;
}

// Returns how many spans it unmapped.
std::size_t unmap_chain(span* s) noexcept
{
    std::size_t count = 0;
    for (; s; ++count)
        unmap_memory(std::exchange(s, s->next), span_size, span_size);
    return count;
}

// All the idle spans of `list` go back to the system now, on this thread.
void release_idle_spans_of(span_list& list) noexcept
{
    span* expired = nullptr;
    {
        std::lock_guard lock(list.mutex);
        expired = take_expired(list, 0, true);
    }
    (void)unmap_chain(expired);
}

// A thread's cache of one class: its blocks and how many (while it drains, counted from
// cache_limit - drain_batch: see spill()).
struct free_list
{
    free_block* head;
    std::size_t count;
};

// Gives the blocks of a chain back to their spans. The spans this empties go on the class's idle
// list, and beyond it (after the spare) back to the system on the unmapping thread (unless 1 MB
// already waits for it): a chain of 144 blocks freed in the order their timers fell due may empty
// several at once (bursts of 4 to 8, measured in W3), and unmapping them here would hold up this
// thread's timers, and the class's lock, by 14 µs or more each.
void give_back_all(std::size_t index, free_block* chain) noexcept
{
    span_list& list = spans[index];
    span* emptied = nullptr;
    bool idled = false;
    {
        std::lock_guard lock(list.mutex);
        while (free_block* b = chain)
        {
            chain = b->next;
            give_back(list, b, emptied, idled);
        }
    }
    while (span* s = emptied)
    {
        emptied = s->next;
        unmap_in_background(s, span_size, span_size);
    }
    // No thread to age the idle spans (it could not be started, or the program is ending): they
    // go back now, those of every class (some may have gone idle as the thread ended).
    if (idled && !start_span_decay())
        release_idle_spans();
}

// Per class, where the newest block kept by the last spill is (compared only: it may have been
// taken and freed elsewhere since), or `draining`. Still where that spill left it at the next one,
// the cache never went below the half that spill kept: in between, the thread only freed blocks
// of the class (or took back only ones it had just freed).
using spill_mark = std::uintptr_t;
constexpr spill_mark draining = 1; // no block's address: blocks are aligned to 8 bytes

// Trivially destructible, so it can still be read while the thread (or, for the main thread, the
// program) is being torn down: a block freed then goes straight back to its span.
struct thread_cache
{
    free_list lists[class_count];
    spill_mark marks[class_count]; // apart from the lists, which the hot paths read
    bool registered;               // close_cache() will empty the cache when the thread exits
    bool closed;                   // it has done so
};

constinit thread_local thread_cache cache{};

// Run by a pthread key's destructor as the thread exits: after the thread_local objects' (whose
// destructors may free blocks), and again for a thread that first registers in another key's
// destructor (POSIX runs the destructors of keys set meanwhile in another round). A
// thread_local's destructor would not run if registered that late.
void close_cache(void*) noexcept
{
    cache.closed = true;
    for (std::size_t index = 0; index < class_count; ++index)
    {
        free_list& list = cache.lists[index];
        give_back_all(index, std::exchange(list.head, nullptr));
        list.count = 0;
    }
}

// The key whose destructor closes a thread's cache, and its state: bit 0 while the key exists,
// and 2 for each thread registering with it at the moment, so that the key is not deleted under
// one. Threads may use them before the program's start has set them up (a user's static pool) and
// as its end takes them down, so they need no construction.
constinit pthread_key_t closer_key{};
constinit std::atomic<unsigned> closer_state{0};
constexpr unsigned closer_key_exists = 1;
constexpr unsigned closer_registering = 2;

// Set up as the program starts, before any thread of the library's own can hold a lock of the
// spans (a fork handler registered later could miss a lock taken meanwhile): the key (none if
// the system has no key left), and the fork handlers. The key goes with the library (a dlclose),
// so that no thread runs close_cache() after.
struct process_hooks
{
    process_hooks() noexcept
    {
        if (pthread_key_create(&closer_key, &close_cache) == 0)
            closer_state.fetch_or(closer_key_exists, std::memory_order_release);
        // Without memory for the handlers, a fork is as unsafe as without them.
        (void)pthread_atfork(&lock_for_fork, &unlock_after_fork, &in_child);
    }

    ~process_hooks()
    {
        if ((closer_state.fetch_and(~closer_key_exists, std::memory_order_acq_rel) &
             closer_key_exists) != 0)
        {
            while (closer_state.load(std::memory_order_acquire) != 0)
                std::this_thread::yield(); // a thread still registering
            pthread_key_delete(closer_key);
        }
    }

    process_hooks(const process_hooks&) = delete;
    process_hooks& operator=(const process_hooks&) = delete;

private:
    // The child's one thread is not registering: a count that a thread of the parent had added
    // as it forked would hold up the destructor for ever (the child's exit()).
    static void in_child() noexcept
    {
        closer_state.fetch_and(closer_key_exists, std::memory_order_relaxed);
        unlock_in_child();
    }
};

// Made before the program's own static objects (and destroyed after them), so that the fork
// handlers of the program's that those register run their prepare first, before this one holds
// the spans' locks: such a handler may allocate or free task nodes (prepare handlers run in the
// reverse order of registration).
__attribute__((init_priority(101))) process_hooks hooks;

// Arranges for close_cache() to run as this thread exits; false if it cannot (no key, or no
// memory; or before the program has started, or after it has ended): the thread then keeps no
// blocks, and tries again later.
bool register_closer() noexcept
{
    const bool exists = (closer_state.fetch_add(closer_registering, std::memory_order_acquire) &
                         closer_key_exists) != 0;
    const bool registered = exists && pthread_setspecific(closer_key, &cache) == 0;
    closer_state.fetch_sub(closer_registering, std::memory_order_release);
    if (!registered)
        return false;
    cache.registered = true;
    return true;
}

// The cache of the class is empty: takes a batch of blocks from the spans, returns one and keeps
// the rest (none once the cache is closed).
void* refill(std::size_t index)
{
    free_list& cached = cache.lists[index];
    std::size_t batch =
        cache.closed ? 1
                     : std::clamp(refill_bytes / block_size(index), std::size_t(1), refill_blocks);
    if (batch > 1 && !cache.registered && !register_closer()) // not under the lock: it allocates
        batch = 1;
    span_list& list = spans[index];
    std::lock_guard lock(list.mutex);
    void* blocks[refill_blocks];
    std::size_t taken = 0;
    try
    {
        for (; taken < batch; ++taken)
            blocks[taken] = take_block(list, index);
    }
    catch (const std::bad_alloc&) // no new span: the blocks taken will do
    {
        if (taken == 0)
            throw;
    }
    cached.count = 0; // draining, it counted from cache_limit - drain_batch
    cache.marks[index] = 0;
    for (std::size_t i = taken; i-- > 1;)
    {
        cached.head = ::new (blocks[i]) free_block{cached.head};
        ++cached.count;
    }
    return blocks[0];
}

// The cache of the class is full. Gives its older half back to the spans; or, if the thread only
// frees blocks of the class (see thread_cache::marks), the whole cache, and from then on it drains:
// its cache counts from cache_limit - drain_batch, so that each drain_batch blocks it frees go
// back together, until a refill. Without this, a million timeouts cancelled in random order on
// one thread would leave the last 288 blocks it freed each keeping a different span mapped (12
// bytes a timeout, measured).
void spill(std::size_t index)
{
    free_list& cached = cache.lists[index];
    spill_mark& mark = cache.marks[index];
    if (mark != draining)
    {
        free_block* last_kept = cached.head;
        for (std::size_t i = 1; i < cache_limit / 2; ++i)
            last_kept = last_kept->next;
        if (reinterpret_cast<spill_mark>(last_kept->next) != mark)
        {
            give_back_all(index, std::exchange(last_kept->next, nullptr));
            cached.count = cache_limit / 2;
            mark = reinterpret_cast<spill_mark>(cached.head);
            return;
        }
        mark = draining;
    }
    give_back_all(index, std::exchange(cached.head, nullptr));
    cached.count = cache_limit - drain_batch;
}

} // namespace

std::size_t decay_idle_spans(unsigned epoch) noexcept
{
    std::size_t count = 0;
    for (span_list& list : spans)
    {
        // Not lock(): the unmapping thread holds its `unmapping` lock, which a fork takes after
        // (or before) the spans' locks.
        if (!list.mutex.try_lock())
            continue; // the next tick
        span* expired = take_expired(list, epoch, false);
        list.mutex.unlock();
        count += unmap_chain(expired);
    }
    return count;
}

bool idle_spans_exist() noexcept
{
    return idle_spans.load(std::memory_order_relaxed) != 0;
}

void release_idle_spans() noexcept
{
    for (span_list& list : spans)
        release_idle_spans_of(list);
}

void* recycled_allocate(std::size_t size)
{
    if (!recycles_blocks || size == 0 || size > largest)
        return ::operator new(size);
    const std::size_t index = class_of(size);
    free_list& cached = cache.lists[index];
    if (free_block* b = cached.head)
    {
        cached.head = b->next;
        --cached.count;
        return b;
    }
    return refill(index);
}

void recycled_deallocate(void* block, std::size_t size) noexcept
{
    if (!recycles_blocks || size == 0 || size > largest)
    {
        ::operator delete(block);
        return;
    }
    const std::size_t index = class_of(size);
    if (cache.closed || (!cache.registered && !register_closer()))
    {
        give_back_all(index, ::new (block) free_block{nullptr});
        return;
    }
    free_list& cached = cache.lists[index];
    if (cached.count == cache_limit)
        spill(index);
    cached.head = ::new (block) free_block{cached.head};
    ++cached.count;
}

} // namespace sched::detail
