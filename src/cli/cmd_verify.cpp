// hsipipe verify CACHE [--deep] [--samples K]: the manifest against the current sources, the data
// checksum recomputed, K random samples re-decoded. Exit 0 only when everything agrees.
#include <iostream>

#include "cache/decode.hpp"
#include "cli/command.hpp"
#include "core/error.hpp"

namespace hsipipe::cli {
namespace {

int run_verify(int argc, char** argv) {
  po::options_description d("verify options");
  d.add_options()
      ("cache", po::value<std::string>(), "cache directory")
      ("deep", po::bool_switch(), "also hash the sources (xxh3) and compare with the manifest")
      ("samples", po::value<std::uint64_t>()->default_value(16), "distinct random samples (cube: rows) to re-decode (all when K >= N)")
      ("seed", po::value<std::uint64_t>()->default_value(1), "seed of the random sample choice");
  po::positional_options_description pos;
  pos.add("cache", 1);
  const Parsed p = parse(argc, argv, "verify", "CACHE [--deep] [--samples K]", d, &pos);
  if (p.help) return 0;
  if (!p.vm.count("cache")) throw ConfigError("verify: give the cache directory (hsipipe verify CACHE)");
  cache::VerifyOptions o;
  o.deep = p.vm["deep"].as<bool>();
  o.samples = p.vm["samples"].as<std::uint64_t>();
  o.seed = p.vm["seed"].as<std::uint64_t>();
  const std::string dir = p.vm["cache"].as<std::string>();
  const auto rep = cache::verify(dir, o);
  for (const auto& n : rep.notes) std::cout << "verify: " << n << "\n";
  for (const auto& pr : rep.problems) std::cout << "verify: MISMATCH: " << pr << "\n";
  if (!rep.ok()) {
    std::cout << "verify: " << dir << ": FAILED (" << rep.problems.size() << " disagreement"
              << (rep.problems.size() > 1 ? "s" : "") << ")\n";
    return 5;
  }
  std::cout << "verify: " << dir << ": OK\n";
  return 0;
}

}  // namespace
HSIPIPE_COMMAND("verify", "check a cache against its sources: manifest, data checksum, re-decoded samples", run_verify);
}  // namespace hsipipe::cli
