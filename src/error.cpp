#include <sched/error.hpp>

#include <string>

namespace sched {
namespace {

// Constant-initialized, so there is no first call to race with (or for a fork to catch half
// done); the id makes copies of it in different shared objects compare equal.
class category final : public boost::system::error_category
{
public:
    constexpr category() noexcept : boost::system::error_category(0x5ced'57a5'c4ed'0001) {}

    const char* name() const noexcept override { return "sched"; }

    std::string message(int ev) const override
    {
        switch (static_cast<error>(ev))
        {
        case error::shutdown:
            return "the scheduler is shut down";
        }
        return "unknown sched error";
    }
};

constinit const category instance;

} // namespace

const boost::system::error_category& error_category() noexcept
{
    return instance;
}

} // namespace sched
