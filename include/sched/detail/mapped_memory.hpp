#ifndef SCHED_DETAIL_MAPPED_MEMORY_HPP
#define SCHED_DETAIL_MAPPED_MEMORY_HPP

#include <sched/detail/sanitizers.hpp>
#include <sched/detail/visibility.hpp>

#include <cstddef>
#include <cstdint>

SCHED_VISIBILITY_BEGIN

namespace sched::detail {

// Memory mapped from the system, for large blocks whose pages must go back to it as soon as they
// are freed: glibc serves a block below its mmap threshold (which rises, up to 32 MB, each time a
// mapped block is freed) from its heap, and keeps it resident after it is freed until
// malloc_trim() - a queue's outgrown heap arrays, for one. Where there is no mmap, and under
// AddressSanitizer (so that it sees each use), operator new and delete instead.
#if defined(__unix__)
inline constexpr bool maps_memory = !under_address_sanitizer;
#else
inline constexpr bool maps_memory = false;
#endif

// Whether remap_memory() can resize a mapped block: with Linux's mremap, except under
// ThreadSanitizer (see sanitizers.hpp).
#if defined(__linux__)
inline constexpr bool remaps_memory = maps_memory && !under_thread_sanitizer;
#else
inline constexpr bool remaps_memory = false;
#endif

// `n`, a size or an address, rounded up to a whole number of pages (where there is no mmap, `n`).
std::uintptr_t whole_pages(std::uintptr_t n) noexcept;

// `bytes` (a multiple of the page size is best) aligned to `alignment`, a power of two.
// Throws std::bad_alloc.
void* map_memory(std::size_t bytes, std::size_t alignment);

// Frees `bytes` from `block`: the whole of what map_memory(bytes, alignment) returned, or, where
// maps_memory, any part of it that starts on a page boundary.
void unmap_memory(void* block, std::size_t bytes, std::size_t alignment) noexcept;

// Where remaps_memory: resizes `block`, which map_memory(old_bytes, alignment) or this returned
// (or either, for more bytes, with its whole pages past old_bytes unmapped since or handed to
// unmap_tail_in_background(): while they are still mapped, a growth moves it), to `new_bytes`,
// keeping its contents up to the smaller size without copying them: in place to shrink (the pages
// past the new end go back to the system), and to grow in place or by moving its pages. Returns the
// block (perhaps moved), or null if it could not (out of memory, an alignment beyond a page, or not
// remaps_memory): then nothing changed.
void* remap_memory(void* block,
                   std::size_t old_bytes,
                   std::size_t new_bytes,
                   std::size_t alignment) noexcept;

// Where maps_memory: gives the memory of the whole pages within `bytes` from `block` (part of a
// mapped block) back to the system; they read as zeros when next touched. Elsewhere, nothing.
void discard_pages(void* block, std::size_t bytes) noexcept;

// Where maps_memory: makes the whole pages within `bytes` from `block` (part of a mapped block)
// resident now, in one system call, rather than by a page fault as each is first touched (about
// a microsecond each on a virtual machine). Returns whether they are (true if there is no whole
// page within); where the system cannot (before Linux 5.14, or not Linux), nothing changes:
// they fault in as touched.
bool populate_pages(void* block, std::size_t bytes) noexcept;

} // namespace sched::detail

SCHED_VISIBILITY_END

#endif // SCHED_DETAIL_MAPPED_MEMORY_HPP
