#include <sched/detail/owner_registry.hpp>

#include <boost/test/unit_test.hpp>

#include <atomic>
#include <optional>
#include <stdexcept>
#include <thread>

#include "support/full_owner_registry.hpp"
#include "support/wait.hpp"

using sched::detail::owner_registry;
using sched::detail::pinned_owner;
using sched::detail::registered_owner;

BOOST_AUTO_TEST_SUITE(test_owner_registry)

BOOST_AUTO_TEST_CASE(each_owner_gets_a_number_of_its_own_that_finds_it)
{
    int a = 0;
    int b = 0;
    const registered_owner first(&a);
    const registered_owner second(&b);
    BOOST_TEST(first.number() != 0);
    BOOST_TEST(second.number() != 0);
    BOOST_TEST(first.number() != second.number());
    BOOST_TEST(owner_registry::find(first.number()) == &a);
    BOOST_TEST(owner_registry::find(second.number()) == &b);
}

BOOST_AUTO_TEST_CASE(a_freed_number_is_given_again)
{
    int a = 0;
    int b = 0;
    owner_registry::number freed = 0;
    {
        const registered_owner first(&a);
        freed = first.number();
    }
    const registered_owner second(&b); // the lowest free number
    BOOST_TEST(second.number() == freed);
    BOOST_TEST(owner_registry::find(freed) == &b);
}

BOOST_AUTO_TEST_CASE(a_full_registry_refuses_with_length_error_until_a_number_is_freed)
{
    sched::test::full_owner_registry full;
    // Other tests' owners (none are alive as the suites run) would hold the rest.
    BOOST_TEST_REQUIRE(full.size() > 0u);
    BOOST_TEST(full.size() <= owner_registry::capacity);
    int owner = 0;
    BOOST_CHECK_THROW(registered_owner{&owner}, std::length_error);
    const owner_registry::number freed = full.free_one();
    const registered_owner again(&owner);
    BOOST_TEST(again.number() == freed);
    BOOST_TEST(owner_registry::find(freed) == &owner);
}

BOOST_AUTO_TEST_CASE(a_pin_holds_the_owner_registered_until_it_ends, *boost::unit_test::timeout(60))
{
    int a = 0;
    int b = 0;
    std::optional<registered_owner> before(std::in_place, &b);
    registered_owner owner(&a);
    const owner_registry::number n = owner.number();
    before.reset(); // a lower number is free: the next owners look from there
    std::optional<pinned_owner> pin(std::in_place, n);
    BOOST_TEST(pin->get() == &a);
    std::atomic<bool> closed{false};
    std::thread closer([&] {
        owner.close();
        closed = true;
    });
    // Closing hides the owner from new pins at once, and then waits for the pin.
    BOOST_TEST_REQUIRE(sched::test::eventually([&] { return pinned_owner(n).get() == nullptr; }));
    BOOST_TEST(!closed);
    // Meanwhile the number is not free: a new owner's pins would keep that wait going.
    const registered_owner first_meanwhile(&b);
    const registered_owner second_meanwhile(&b);
    BOOST_TEST(first_meanwhile.number() != n);
    BOOST_TEST(second_meanwhile.number() != n);
    pin.reset();
    closer.join();
    BOOST_TEST(closed);
    owner.close(); // once only: the number may be someone else's now
    const registered_owner next(&a);
    BOOST_TEST(next.number() == n);
}

BOOST_AUTO_TEST_SUITE_END()
