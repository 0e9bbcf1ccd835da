// The queue alone: sched::delayed_work_queue (steady_clock) against the baseline
// boost::heap::d_ary_heap<entry, arity<same as the queue>, mutable_<true>, compare<...>>,
// single-threaded.
//
// Workloads (see /work/shared/workloads.md):
//   W1  timeout churn: a standing population of P pending one-shot items, delays uniform in
//       [1 s, 10 s]; each benchmark iteration removes the oldest pending item (oldest by insertion:
//       the one "cancelled") and pushes a new one. Time per iteration = ns per cancel+insert pair.
//       P untimed pairs first (a warm-up: see pool_bench.cpp).
//   W2  mass pending: push N items with delays in [60 s, 120 s], then remove them all; push and
//       remove rates, and resident memory (VmRSS) per pending item and after the removal.
//   Pop taking due heads: P items already due, then pop them all; ns per pop.
//
// What the times include, for both contestants:
//   - the task allocation: every push allocates its item with `new`, every removal `delete`s it
//     (the queue is intrusive, so this is the one allocation a real task costs; the boost heap
//     additionally allocates a std::list node inside push and frees it in erase/pop: that is how
//     its mutable_<true> variant keeps handles stable);
//   - for the queue, the lock: push/remove/poll take the queue's std::mutex (uncontended here);
//     the boost heap has no lock;
//   - the clock: W1 has two variants. now_per_push:1 reads steady_clock::now() for every push
//     (push(item, delay), what scheduled_thread_pool::schedule() does); now_per_push:0 reads it
//     once every 1024 pairs and pushes absolute due times, to show the data structure's own cost.
//     steady_clock_now measures one clock read for reference. W2 reads the clock per push;
//     pop's poll() reads it per call (and so does the baseline's check of its head).
//
// The queue's fan-out is a compile-time constant (delayed_work_queue::arity); docs/performance.md
// records how it was chosen (2, 4 and 8 compared on W1 and pop).
//
// Sizes are flags (see --help): --p (W1 populations), --m (W1 pairs), --n (W2), --pop_p.
// 10M is not in the default --p list: one repetition at P = 10M spends several seconds building
// and freeing the standing population (for each contestant), which would make this executable
// take over a minute with repetitions; run it with --p=10M when wanted.

#include <sched/delayed_work_queue.hpp>

#include <sched/detail/recycler.hpp>

#include <boost/heap/d_ary_heap.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "bench_common.hpp"

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
using queue_type = sched::delayed_work_queue;

// ----- the contestants ---------------------------------------------------------------------------

// A task as small as a real one can be: the queue's node (heap index + due time, 16 bytes) plus
// one pointer of payload, what a one-pointer lambda capture would hold.
struct queue_item : queue_type::node
{
    void* payload = nullptr;
};

// The same item, allocated the way scheduled_thread_pool allocates its tasks: from sched's
// per-thread recycler (sched/detail/recycler.hpp) instead of malloc.
struct recycled_item : queue_item
{
    static void* operator new(std::size_t size) { return sched::detail::recycled_allocate(size); }
    static void operator delete(void* block, std::size_t size) noexcept
    {
        sched::detail::recycled_deallocate(block, size);
    }
};

struct heap_item;

// What the baseline heap stores: the same sort key as the queue's own entries (due time, then a
// sequence number so that equal due times come out in push order), and the task.
struct heap_entry
{
    clock_type::time_point due;
    std::uint64_t seq;
    heap_item* item;
};

// boost::heap is a max-heap: "greater" means "comes out first", so compare with "later".
struct heap_later
{
    bool operator()(const heap_entry& a, const heap_entry& b) const noexcept
    {
        return a.due > b.due || (a.due == b.due && a.seq > b.seq);
    }
};

using baseline_heap = boost::heap::d_ary_heap<heap_entry,
                                              boost::heap::arity<queue_type::arity>,
                                              boost::heap::mutable_<true>,
                                              boost::heap::compare<heap_later>>;

// The baseline's task: its handle (to erase it) plus the same one pointer of payload.
struct heap_item
{
    baseline_heap::handle_type handle;
    void* payload = nullptr;
};

// The baseline with the queue's push/remove/poll interface, so that the benchmarks below are
// written once for both. No lock: the baseline is single-threaded.
class baseline
{
public:
    using item = heap_item;

    void push(heap_item& it, clock_type::time_point due)
    {
        it.handle = heap_.push(heap_entry{due, seq_++, &it});
    }

    void push(heap_item& it, std::chrono::nanoseconds delay)
    {
        push(it, clock_type::now() + delay);
    }

    void remove(heap_item& it) { heap_.erase(it.handle); }

    heap_item* poll()
    {
        if (heap_.empty() || clock_type::now() < heap_.top().due)
            return nullptr;
        heap_item* const it = heap_.top().item;
        heap_.pop();
        return it;
    }

    void clear() { heap_.clear(); }

private:
    baseline_heap heap_;
    std::uint64_t seq_ = 0;
};

// The queue, same interface; Item says how the items are allocated.
template <class Item>
class basic_sched_queue
{
public:
    using item = Item;

    void push(Item& it, clock_type::time_point due) { queue_.push(it, due); }
    void push(Item& it, std::chrono::nanoseconds delay) { queue_.push(it, delay); }
    void remove(Item& it) { benchmark::DoNotOptimize(queue_.remove(it)); }
    Item* poll() { return static_cast<Item*>(queue_.poll()); }
    void clear() { queue_.clear(); }

private:
    queue_type queue_;
};

using sched_queue = basic_sched_queue<queue_item>;             // items from malloc
using sched_queue_recycled = basic_sched_queue<recycled_item>; // items as the pool allocates

// ----- W1: timeout churn -------------------------------------------------------------------------

// state.range(0) = P, the standing population; state.range(1) = 1 to read the clock per push.
// One iteration = remove the oldest pending item + delete it + new item + push it.
template <class Queue>
void w1_churn(benchmark::State& state)
{
    using item = typename Queue::item;
    const auto p = static_cast<std::size_t>(state.range(0));
    const bool now_per_push = state.range(1) != 0;
    bench::rng rng(42);
    const auto delay = [&rng] {
        return rng.uniform(1s, 10s);
    };

    // Setup, not timed: P pending items; ring[head] is the oldest. Then P pairs of warm-up, so
    // that the pairs timed see the churn's steady state (see pool_bench.cpp).
    Queue queue;
    std::vector<item*> ring(p);
    clock_type::time_point now = clock_type::now();
    for (item*& slot : ring)
    {
        slot = new item;
        queue.push(*slot, now + delay());
    }
    const auto replace = [&queue](item*& slot) { // the oldest, cancelled; a new item unqueued
        queue.remove(*slot);
        delete slot;
        slot = new item;
    };
    for (item*& slot : ring)
    {
        replace(slot);
        queue.push(*slot, now + delay());
    }

    std::size_t head = 0;
    std::uint64_t pairs = 0;
    for (auto _ : state)
    {
        item*& slot = ring[head];
        replace(slot);
        if (now_per_push)
            queue.push(*slot, delay());
        else
        {
            if ((pairs & 1023) == 0)
                now = clock_type::now();
            queue.push(*slot, now + delay());
        }
        ++pairs;
        if (++head == p)
            head = 0;
    }

    state.SetItemsProcessed(static_cast<std::int64_t>(pairs)); // items_per_second = pairs/s
    state.counters["time_per_pair"] = bench::time_per(static_cast<double>(pairs));

    // Teardown, not timed (Google Benchmark stops the clock when the loop ends).
    queue.clear();
    for (item* it : ring)
        delete it;
}

// One steady_clock::now() read, to weigh the now_per_push:1 variant.
void steady_clock_now(benchmark::State& state)
{
    for (auto _ : state)
        benchmark::DoNotOptimize(clock_type::now());
}

// ----- W2: mass pending --------------------------------------------------------------------------

// One iteration: push N items (delays in [60 s, 120 s], clock read per push), read VmRSS, then
// again after malloc_trim(0) (B_per_pending_trimmed: whether the array's outgrown copies stayed
// resident depends on glibc's state, which earlier benchmarks change), remove them all in push
// order (deleting each item), read VmRSS, malloc_trim(0), read VmRSS.
// The benchmark's own vector of item pointers is allocated and touched before the first reading,
// so it is not in the per-item figures; everything else is: the items, the queue's array (with
// its growth slack) and, for the baseline, its list nodes and its array of list iterators.
template <class Queue>
void w2_mass_pending(benchmark::State& state)
{
    using item = typename Queue::item;
    const auto n = static_cast<std::size_t>(state.range(0));
    const auto count = static_cast<double>(n);
    bench::rng rng(7);

    for (auto _ : state)
    {
        std::vector<item*> items(n, nullptr); // resident before the baseline reading
        Queue queue;
        bench::trim_heap();
        const std::int64_t rss_before = bench::vm_rss_bytes();

        const auto push_time = bench::timed([&] {
            for (item*& slot : items)
            {
                slot = new item;
                queue.push(*slot, rng.uniform(60s, 120s));
            }
        });
        const std::int64_t rss_pending = bench::vm_rss_bytes();
        bench::trim_heap(); // drops what glibc kept of the array's earlier, smaller copies
        const std::int64_t rss_pending_trimmed = bench::vm_rss_bytes();
        const auto remove_time = bench::timed([&] {
            for (item* it : items)
            {
                queue.remove(*it);
                delete it;
            }
        });
        const std::int64_t rss_removed = bench::vm_rss_bytes();
        bench::trim_heap();
        const std::int64_t rss_trimmed = bench::vm_rss_bytes();

        state.SetIterationTime(std::chrono::duration<double>(push_time + remove_time).count());
        state.counters["push_ns"] = bench::ns_per(push_time, count);
        state.counters["push_per_s"] = bench::per_second(push_time, count);
        state.counters["remove_ns"] = bench::ns_per(remove_time, count);
        state.counters["remove_per_s"] = bench::per_second(remove_time, count);
        state.counters["B_per_pending"] = bench::bytes_per(rss_pending - rss_before, count);
        state.counters["B_per_pending_trimmed"] =
            bench::bytes_per(rss_pending_trimmed - rss_before, count);
        state.counters["B_after_remove"] = bench::bytes_per(rss_removed - rss_before, count);
        state.counters["B_after_trim"] = bench::bytes_per(rss_trimmed - rss_before, count);
    }
    state.counters["item_size"] = static_cast<double>(sizeof(item));
}

// ----- Pop: taking due heads ---------------------------------------------------------------------

// Setup: P items due 1 s to 10 s ago. One iteration = poll() one due head (it is always due), so
// the run pops the whole population: the average is over heap sizes P down to 1. The popped
// items are freed after the loop, not in it.
template <class Queue>
void pop_due(benchmark::State& state)
{
    using item = typename Queue::item;
    const auto p = static_cast<std::size_t>(state.range(0));
    bench::rng rng(3);

    Queue queue;
    std::vector<item*> items(p);
    const clock_type::time_point now = clock_type::now();
    for (item*& slot : items)
    {
        slot = new item;
        queue.push(*slot, now - rng.uniform(1s, 10s));
    }

    std::int64_t popped = 0;
    for (auto _ : state)
    {
        item* const it = queue.poll();
        benchmark::DoNotOptimize(it);
        popped += it != nullptr;
    }
    if (popped != state.iterations())
        state.SkipWithError("a due head was not popped");
    state.SetItemsProcessed(popped);

    queue.clear();
    for (item* it : items)
        delete it;
}

} // namespace

int main(int argc, char** argv)
{
    bench::flags flags({
        {"p", "10k,100k,1M", "W1 standing populations P (comma-separated; 10M works, slowly)"},
        {"m", "1M", "W1 cancel+insert pairs per run (M)"},
        {"n", "1M", "W2 pending items (N)"},
        {"pop_p", "1M", "items popped by the pop benchmark"},
    });
    flags.parse(argc, argv);
    const std::int64_t m = flags.size("m");

    benchmark::RegisterBenchmark("steady_clock_now", steady_clock_now)
        ->Unit(benchmark::kNanosecond);

    // Contestants side by side for each size, so that they run close together in time.
    for (const std::int64_t p : flags.sizes("p"))
    {
        for (const std::int64_t now_per_push : {0, 1})
        {
            benchmark::RegisterBenchmark("W1_churn/sched_queue", w1_churn<sched_queue>)
                ->Args({p, now_per_push})
                ->ArgNames({"P", "now_per_push"})
                ->Iterations(m)
                ->Unit(benchmark::kNanosecond);
            benchmark::RegisterBenchmark("W1_churn/sched_queue_recycled",
                                         w1_churn<sched_queue_recycled>)
                ->Args({p, now_per_push})
                ->ArgNames({"P", "now_per_push"})
                ->Iterations(m)
                ->Unit(benchmark::kNanosecond);
            benchmark::RegisterBenchmark("W1_churn/boost_d_ary_heap", w1_churn<baseline>)
                ->Args({p, now_per_push})
                ->ArgNames({"P", "now_per_push"})
                ->Iterations(m)
                ->Unit(benchmark::kNanosecond);
        }
    }

    const std::int64_t n = flags.size("n");
    benchmark::RegisterBenchmark("W2_mass_pending/sched_queue", w2_mass_pending<sched_queue>)
        ->Arg(n)
        ->ArgName("N")
        ->Iterations(1)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark("W2_mass_pending/boost_d_ary_heap", w2_mass_pending<baseline>)
        ->Arg(n)
        ->ArgName("N")
        ->Iterations(1)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);

    const std::int64_t pop_p = flags.size("pop_p");
    benchmark::RegisterBenchmark("Pop_due/sched_queue", pop_due<sched_queue>)
        ->Arg(pop_p)
        ->ArgName("P")
        ->Iterations(pop_p)
        ->Unit(benchmark::kNanosecond);
    benchmark::RegisterBenchmark("Pop_due/boost_d_ary_heap", pop_due<baseline>)
        ->Arg(pop_p)
        ->ArgName("P")
        ->Iterations(pop_p)
        ->Unit(benchmark::kNanosecond);

    return bench::run_registered(argc, argv);
}
