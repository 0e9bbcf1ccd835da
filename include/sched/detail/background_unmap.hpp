#ifndef SCHED_DETAIL_BACKGROUND_UNMAP_HPP
#define SCHED_DETAIL_BACKGROUND_UNMAP_HPP

#include <sched/detail/visibility.hpp>

#include <cstddef>

SCHED_VISIBILITY_BEGIN

namespace sched::detail {

// Unmapping memory costs the calling thread a system call, a flush of the other cores' TLBs and
// the freeing of each page: about 14 µs for 64 KB on a virtual machine, measured, so that a thread
// which runs timers and frees a burst of task spans falls behind them by milliseconds.
// unmap_in_background() hands `block` (from map_memory(bytes, alignment), or a part of it that
// starts on a page boundary, of 24 bytes or more: its start is overwritten) to a thread that
// unmaps it soon after, without waiting for the caller: the thread "sched-unmap", started by the
// first call or the first start_unmapping_thread(), with every signal blocked, the default
// scheduling policy and the CPUs the program started with (not those of the thread that starts
// it), and ended as the program (or, for a shared library, the library) ends.
//
// The block is unmapped at once instead if it would bring what waits for the thread over 1 MB
// (so a block over 1 MB always is; memory freed faster than the thread gives it back, a million
// tasks cancelled in a loop, still goes back as it is freed, and at most about 2 MB, what waits
// and what the thread is unmapping, is freed but mapped); where the thread cannot be started (it
// is tried again on the next call; and never if the fork handlers could not be registered as the
// program started); once it has ended; and where !maps_memory. A child process forked with the
// thread running unmaps what was pending as it starts, and starts its own thread when it needs it
// (under ThreadSanitizer, which cannot start threads in a child of a process with threads, a
// child unmaps at once).
void unmap_in_background(void* block, std::size_t bytes, std::size_t alignment) noexcept;

// Starts the thread now if it is not running yet (where maps_memory), so that the first block
// handed over does not pay for that (about 150-250 µs, measured), perhaps under a lock that
// timers wait for: each delayed_work_queue calls it as it is constructed.
void start_unmapping_thread() noexcept;

// Where maps_memory: shrinks `block` (from map_memory(old_bytes, alignment) or remap_memory()) to
// `new_bytes` in place, handing its whole pages past new_bytes to unmap_in_background(). The
// block then counts as one of new_bytes.
void unmap_tail_in_background(void* block,
                              std::size_t old_bytes,
                              std::size_t new_bytes,
                              std::size_t alignment) noexcept;

// Whether nothing waits for the thread and it is not unmapping anything (for tests: what it has
// unmapped so far is then counted). Idle spans of the recycler, which the thread gives back as
// they age, do not count as waiting (see release_idle_spans() to give them back now).
bool unmapping_thread_idle() noexcept;

// How many blocks the thread has unmapped so far, the recycler's aged idle spans included (for
// tests and diagnostics).
std::size_t blocks_unmapped_in_background() noexcept;

// Span decay, for the recycler (see recycler.cpp): while idle_spans_exist(), the thread ticks every
// decay_tick_ms, advancing decay_epoch() and calling decay_idle_spans() with it; otherwise it
// sleeps until woken, so that an idle process is not woken up. Where the thread cannot sleep with a
// timeout (not Linux), there is no decay.
#if defined(__linux__)
inline constexpr bool span_decay_available = true;
#else
inline constexpr bool span_decay_available = false;
#endif
inline constexpr unsigned decay_tick_ms = 250;
inline constexpr unsigned decay_ticks = 4; // a span idle for 0.75 to 1 s goes back

// The thread's clock, read (relaxed) where a span becomes idle: no clock on the hot path.
unsigned decay_epoch() noexcept;

// Called as a span goes idle: makes the thread tick (started if need be), if it sleeps untimed.
// False if there is no thread to do so (then the caller gives the idle spans back itself).
bool start_span_decay() noexcept;

} // namespace sched::detail

SCHED_VISIBILITY_END

#endif // SCHED_DETAIL_BACKGROUND_UNMAP_HPP
