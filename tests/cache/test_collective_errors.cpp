// dist::collective_step under real ranks: each distinct message of the failing ranks is printed once. A failing
// rank whose message a lower failing rank has too gets a QuietError (the CLI prints nothing for it); the ranks
// that did not fail get a PeerError naming the first failing rank.
#include <catch2/catch.hpp>

#include <string>

#include "core/error.hpp"
#include "dist/collective.hpp"

using namespace hsipipe;

namespace {
enum class Got { none, own, quiet, peer };

/// What this rank gets when the ranks for which `fails(rank)` is true throw ConfigError(message(rank)).
template <class Fails, class Message>
Got outcome(const dist::Comm& world, Fails fails, Message message, std::string* text = nullptr) {
  try {
    dist::collective_step(world, "the step", [&] {
      if (fails(world.rank())) throw ConfigError(message(world.rank()));
    });
  } catch (const dist::QuietError& e) {
    CHECK(e.exit_code() == 2);
    return Got::quiet;
  } catch (const dist::PeerError& e) {
    CHECK(e.exit_code() == 2);
    return Got::peer;
  } catch (const Error& e) {
    if (text) *text = e.what();
    return Got::own;
  }
  return Got::none;
}
}  // namespace

TEST_CASE("collective_step: one message several ranks fail with is theirs once", "[dist][mpi]") {
  const dist::Comm world(MPI_COMM_WORLD);
  const int r = world.rank();
  REQUIRE(world.size() >= 3);
  // ranks 1.. fail the same way: rank 1 reports it, the others are quiet, rank 0 names rank 1
  const Got same = outcome(world, [](int q) { return q >= 1; }, [](int) { return std::string("the same cause"); });
  CHECK(same == (r == 0 ? Got::peer : r == 1 ? Got::own : Got::quiet));
  // every rank fails the same way: rank 0 alone reports it
  const Got all = outcome(world, [](int) { return true; }, [](int) { return std::string("everyone's cause"); });
  CHECK(all == (r == 0 ? Got::own : Got::quiet));
}

TEST_CASE("collective_step: distinct messages are each reported", "[dist][mpi]") {
  const dist::Comm world(MPI_COMM_WORLD);
  const int r = world.rank();
  // rank 0 and the last rank fail with different messages: both are reported (rank 0 failing no longer
  // silences another cause)
  const int last = world.size() - 1;
  std::string text;
  const Got g = outcome(world, [&](int q) { return q == 0 || q == last; }, [](int q) { return "cause of rank " + std::to_string(q); }, &text);
  CHECK(g == (r == 0 || r == last ? Got::own : Got::peer));
  if (g == Got::own) CHECK(text == "cause of rank " + std::to_string(r));
  // ranks 1.. each with its own message: each reports its own
  const Got each = outcome(world, [](int q) { return q >= 1; }, [](int q) { return "cause of rank " + std::to_string(q); });
  CHECK(each == (r == 0 ? Got::peer : Got::own));
}
