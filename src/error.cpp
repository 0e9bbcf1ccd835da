#include <sched/error.hpp>

#include <string>

namespace sched {
namespace {

class category final : public boost::system::error_category
{
public:
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

} // namespace

const boost::system::error_category& error_category() noexcept
{
    static const category instance;
    return instance;
}

} // namespace sched
