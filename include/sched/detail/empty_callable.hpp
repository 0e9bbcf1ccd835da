#ifndef SCHED_DETAIL_EMPTY_CALLABLE_HPP
#define SCHED_DETAIL_EMPTY_CALLABLE_HPP

#include <sched/detail/visibility.hpp>

#include <concepts>
#include <functional>
#include <stdexcept>
#include <type_traits>

SCHED_VISIBILITY_BEGIN

namespace sched::detail {

template <class T>
inline constexpr bool is_reference_wrapper = false;

template <class T>
inline constexpr bool is_reference_wrapper<std::reference_wrapper<T>> = true;

// An Asio binder (bind_executor, bind_allocator, bind_cancellation_slot): a callable it wraps.
template <class F>
concept asio_binder = requires(const F& f)
{
    {
        f.get()
        } -> std::same_as<const typename F::target_type&>;
};

// Whether `f`, a callable as deduced, is empty: a null function pointer, a class with an explicit
// operator bool that says so (std::function and the like), or a std::reference_wrapper or an
// asio_binder around one of them. A function is never empty.
template <class F>
bool is_empty_callable(const F& f) noexcept
{
    if constexpr (std::is_pointer_v<F> || std::is_member_pointer_v<F>)
        return f == nullptr;
    else if constexpr (requires { f.operator bool(); })
        return !static_cast<bool>(f);
    else if constexpr (is_reference_wrapper<F>)
        return is_empty_callable(f.get());
    else if constexpr (asio_binder<F>)
        return is_empty_callable(f.get());
    else
        return false;
}

// Throws std::invalid_argument if `f` is empty (see is_empty_callable()).
template <class F>
void check_not_empty(const F& f)
{
    if (is_empty_callable(f))
        throw std::invalid_argument("sched: empty callable");
}

} // namespace sched::detail

SCHED_VISIBILITY_END

#endif // SCHED_DETAIL_EMPTY_CALLABLE_HPP
