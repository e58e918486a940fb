// hsipipe stage: copy a cache to node-local storage once per node (lock, verify, atomic publish), so
// training reads a local copy instead of memory-mapping a cache over a network file system.
// Rank-local: jobs/train.sbatch runs it once per node before training; concurrent callers for the same
// DEST (other tasks of the node) wait for the first and then reuse its copy.
#include <iomanip>
#include <iostream>
#include <sstream>

#include "cache/stage.hpp"
#include "cli/command.hpp"
#include "core/fs.hpp"

namespace hsipipe::cli {
namespace {

int run_stage(int argc, char** argv) {
  po::options_description desc("Options");
  desc.add_options()("cache", po::value<std::string>()->required(), "CACHE: the cache directory to copy (positional)")(
      "dest", po::value<std::string>()->required(), "DEST: where the copy goes, on node-local storage (positional)")(
      "publish", po::bool_switch(),
      "copy TO shared storage instead: allows DEST on a network file system (decode.sbatch publishes a "
      "node-local decode this way); never train from such a copy");
  po::positional_options_description pos;
  pos.add("cache", 1).add("dest", 1);
  const Parsed p = parse(argc, argv, "stage", "CACHE DEST [--publish]", desc, &pos);
  if (p.help) return 0;

  const std::string host = fs::node_name();
  cache::StageOptions opt;
  opt.allow_network_dest = p.vm["publish"].as<bool>();
  opt.log = [&](const std::string& s) { std::cout << "stage[" << host << "]: " << s << std::endl; };
  const auto r = cache::stage(p.vm["cache"].as<std::string>(), p.vm["dest"].as<std::string>(), opt);

  std::ostringstream s;
  s << std::fixed << std::setprecision(2);
  s << "stage[" << host << "]: ";
  switch (r.action) {
    case cache::StageAction::reused:
      s << "reused the valid copy at " << r.dest << " (" << r.files << " files, " << r.bytes << " bytes verified in "
        << r.seconds_verifying << " s";
      break;
    case cache::StageAction::copied:
    case cache::StageAction::replaced:
      s << (r.action == cache::StageAction::replaced ? "replaced the invalid copy at " : "copied to ") << r.dest << " ("
        << r.files << " files, " << r.bytes << " bytes in " << r.seconds_copying << " s, "
        << (r.seconds_copying > 0 ? static_cast<double>(r.bytes) / 1e6 / r.seconds_copying : 0.0) << " MB/s; verified in "
        << r.seconds_verifying << " s";
      break;
  }
  if (r.seconds_waiting > 0) s << "; waited " << r.seconds_waiting << " s for the lock";
  s << "); data checksum " << r.data_checksum << " ok";
  std::cout << s.str() << std::endl;
  return 0;
}

}  // namespace

HSIPIPE_COMMAND("stage", "copy a cache to node-local storage once per node (lock, verify, atomic)", run_stage);

}  // namespace hsipipe::cli
