#ifndef SCHED_DETAIL_HEAP_ARRAY_HPP
#define SCHED_DETAIL_HEAP_ARRAY_HPP

#include <sched/detail/background_unmap.hpp>
#include <sched/detail/mapped_memory.hpp>
#include <sched/detail/visibility.hpp>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <new>
#include <type_traits>
#include <utility>

SCHED_VISIBILITY_BEGIN

namespace sched::detail {

// The array of an Arity-ary heap of trivially copyable entries, which gives its memory back as
// it empties.
//
// Laid out so that the children of entry i (Arity*i+1 .. Arity*i+Arity) always start on a
// boundary of their own size: the block is aligned to that size and the array starts one entry
// short of the first boundary. A sift-down then touches the fewest cache lines per level (one
// pair of adjacent lines for eight 16-byte entries).
//
// Its owner resizes it under a lock that every timer waits for, so a resize must not stall.
// Large arrays are mapped from the system and, where it can (remaps_memory), resized in place
// there: growing moves no entry and faults no page in (each page faults in as entries first
// reach it), and shrinking hands the pages past the new end to the unmapping thread
// (background_unmap.hpp; unless 1 MB already waits for it, or for a bulk removal's larger
// tail): unmapping them here held the lock about 30 µs a step (below). As entries
// leave one by one, such an array shrinks to twice what they need as soon as it holds a step
// (release_step) more than that, or when three quarters of it are empty: so a shrink gives back at
// most about a step. Elsewhere a resize copies the entries into a new block, and the array halves
// when three quarters of it are empty (amortised O(1)). Either way, a removal of many entries at
// once (truncate()) is followed by one release_spare() that gives back all the room beyond twice
// what is left.
template <class T, std::size_t Arity>
class heap_array
{
    static_assert(std::is_trivially_copyable_v<T>);

public:
    // Capacity below which the array never shrinks.
    static constexpr std::size_t min_capacity = 64;
    // How many bytes a mapped array resized in place gives back at a time as entries leave one
    // by one, at most: a few tens of microseconds' work for the unmapping thread (or, if it is
    // behind, for the owner), once per half as many removed.
    static constexpr std::size_t release_step = std::size_t(256) * 1024;

    heap_array() noexcept = default;
    heap_array(heap_array&& other) noexcept
        : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)),
          capacity_(std::exchange(other.capacity_, 0)),
          release_below_(std::exchange(other.release_below_, 0))
    {}
    heap_array& operator=(heap_array&& other) noexcept
    {
        heap_array(std::move(other)).swap(*this);
        return *this;
    }
    ~heap_array()
    {
        if (data_)
            free_block(data_, capacity_);
    }

    void swap(heap_array& other) noexcept
    {
        std::swap(data_, other.data_);
        std::swap(size_, other.size_);
        std::swap(capacity_, other.capacity_);
        std::swap(release_below_, other.release_below_);
    }

    std::size_t size() const noexcept { return size_; }
    std::size_t capacity() const noexcept { return capacity_; }
    bool empty() const noexcept { return size_ == 0; }

    T& operator[](std::size_t i) noexcept { return data_[i]; }
    const T& operator[](std::size_t i) const noexcept { return data_[i]; }
    const T& front() const noexcept { return data_[0]; }
    const T& back() const noexcept { return data_[size_ - 1]; }
    T* begin() noexcept { return data_; }
    T* end() noexcept { return data_ + size_; }
    const T* begin() const noexcept { return data_; }
    const T* end() const noexcept { return data_ + size_; }

    // Room for one more entry, growing as push_back() does. Throws std::bad_alloc, and then
    // nothing changed.
    void make_room()
    {
        if (size_ == capacity_)
            resize_block(std::max(min_capacity, 2 * capacity_));
    }

    // Throws std::bad_alloc, and then nothing changed.
    void push_back(const T& value)
    {
        const T copy = value; // `value` may be an entry, which making room may move
        make_room();
        data_[size_++] = copy;
    }

    void pop_back() noexcept { --size_; }

    // Keeps the first `n` entries (n <= size()).
    void truncate(std::size_t n) noexcept { size_ = n; }

    // Removes the entries in [first, last), moving those after them down.
    void erase(T* first, T* last) noexcept
    {
        std::memmove(first, last, static_cast<std::size_t>(end() - last) * sizeof(T));
        size_ -= static_cast<std::size_t>(last - first);
    }

    // Whether release_spare() would give memory back: cheap, for every removal to ask.
    bool has_spare() const noexcept { return size_ < release_below_; }

    // Gives back what the entries do not need (see above); out of memory, keeps it.
    void release_spare() noexcept
    {
        if (!has_spare())
            return;
        std::size_t capacity = capacity_;
        if (remaps(capacity))
            capacity = std::max(2 * size_, min_capacity);
        else
        {
            while (capacity >= 2 * min_capacity && size_ <= capacity / 4)
                capacity /= 2;
        }
        try
        {
            resize_block(capacity);
        }
        catch (const std::bad_alloc&)
        {
            // Keeping the larger array is always correct; try again at half the size.
            release_below_ = std::max<std::size_t>(size_ / 2, 1);
        }
    }

private:
    // One group of children: the block's alignment.
    static constexpr std::size_t line = Arity * sizeof(T);
    static_assert((line & (line - 1)) == 0, "a group of children must be a power of two bytes");

    // Blocks this large are mapped where the system allows (see mapped_memory.hpp), so that they
    // go back to it when freed, and can be resized in place.
    static constexpr std::size_t mapped_bytes = std::size_t(128) * 1024;

    static std::size_t block_bytes(std::size_t capacity) noexcept
    {
        return capacity * sizeof(T) + line - sizeof(T);
    }
    static bool mapped(std::size_t capacity) noexcept
    {
        return maps_memory && block_bytes(capacity) >= mapped_bytes;
    }
    static bool remaps(std::size_t capacity) noexcept
    {
        return remaps_memory && line <= 4096 && mapped(capacity); // a moved block is page-aligned
    }
    static std::byte* block_of(T* data) noexcept
    {
        return reinterpret_cast<std::byte*>(data) - (line - sizeof(T));
    }
    static T* data_of(void* block) noexcept
    {
        return reinterpret_cast<T*>(static_cast<std::byte*>(block) + line - sizeof(T));
    }

    static T* allocate(std::size_t capacity)
    {
        const std::size_t bytes = block_bytes(capacity);
        return data_of(mapped(capacity) ? map_memory(bytes, line)
                                        : ::operator new(bytes, std::align_val_t(line)));
    }
    static void free_block(T* data, std::size_t capacity) noexcept
    {
        if (mapped(capacity))
            unmap_memory(block_of(data), block_bytes(capacity), line);
        else
            ::operator delete(block_of(data), std::align_val_t(line));
    }

    // Moves the entries to a block for `capacity` (>= size_). Throws std::bad_alloc, and then
    // nothing changed.
    void resize_block(std::size_t capacity)
    {
        T* data = nullptr;
        if (data_ && remaps(capacity_) && remaps(capacity))
        {
            if (capacity < capacity_)
            {
                unmap_tail_in_background(block_of(data_), block_bytes(capacity_),
                                         block_bytes(capacity), line);
                data = data_;
            }
            else if (void* block = remap_memory(block_of(data_), block_bytes(capacity_),
                                                block_bytes(capacity), line))
                data = data_of(block);
        }
        if (!data)
        {
            data = allocate(capacity);
            if (size_ != 0)
                std::memcpy(data, data_, size_ * sizeof(T));
            if (data_)
                free_block(data_, capacity_);
        }
        data_ = data;
        capacity_ = capacity;
        release_below_ = release_threshold(capacity);
    }

    // The sizes below which an array of `capacity` has memory to give back (see above).
    static std::size_t release_threshold(std::size_t capacity) noexcept
    {
        const std::size_t quarter = capacity >= 2 * min_capacity ? capacity / 4 + 1 : 0;
        constexpr std::size_t step = release_step / sizeof(T);
        if (remaps(capacity) && capacity > step)
            return std::max((capacity - step) / 2 + 1, quarter);
        return quarter;
    }

    T* data_ = nullptr;
    std::size_t size_ = 0;
    std::size_t capacity_ = 0;
    std::size_t release_below_ = 0; // sizes below this have memory to give back
};

} // namespace sched::detail

SCHED_VISIBILITY_END

#endif // SCHED_DETAIL_HEAP_ARRAY_HPP
