// `hsipipe train` end to end (real processes, real mpiexec): --fold all reads the cache once;
// --fold I tasks + `hsipipe report` give the same summary; refusals before training; SIGTERM writes a
// usable checkpoint (exit 75) and --resume with --deterministic ends with bitwise the same weights as
// an uninterrupted run, for one rank signalled directly and for 2 ranks under a signalled mpiexec.
// Caches are made by tests/train/make_cache.py (numpy), folds by `hsipipe folds`.
#include <torch/torch.h>
// glog (pulled in by libtorch) defines CHECK too: Catch2's must win
#undef CHECK
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "core/fs.hpp"
#include "train/models.hpp"
#include "support/test_util.hpp"

using namespace hsipipe;
namespace fsys = std::filesystem;

namespace {

std::string bin() { return test::hsipipe_bin(); }
std::string mpiexec(int n) { return std::string(HSIPIPE_MPIEXEC) + " -n " + std::to_string(n) + " --oversubscribe "; }

std::string make_cache(const std::string& dir, const std::string& args) {
  const auto r = test::run(test::python() + " " + test::source_dir() + "/tests/train/make_cache.py " + dir + " " + args);
  INFO(r.output);
  REQUIRE(r.status == 0);
  return dir;
}
std::string make_folds(const std::string& cache, const std::string& out, int k) {
  const auto r = test::run(bin() + " folds --cache " + cache + " --k " + std::to_string(k) + " --seed 5 --out " + out);
  INFO(r.output);
  REQUIRE(r.status == 0);
  return out;
}
nlohmann::json read_json(const std::string& p) { return nlohmann::json::parse(fs::read_text(p)); }

/// The parameters of a checkpoint's "model" entry, loaded into a fresh model of that architecture.
std::vector<torch::Tensor> checkpoint_params(const std::string& path, const std::string& model, int bands, int patch,
                                             int classes) {
  torch::serialize::InputArchive ar, m;
  ar.load_from(path);
  ar.read("model", m);
  auto net = train::make_model(model, bands, patch, classes, 1);
  net->load(m);
  return net->parameters();
}

int count_lines(const std::string& path) {
  std::ifstream in(path);
  int lines = 0;
  for (std::string l; std::getline(in, l);) lines += !l.empty();
  return lines;
}

/// Starts `cmd` (through /bin/sh, output to `log`), sends `sig` to it once fold 0 of `run_dir` has more
/// than `after` epoch records, and returns its wait status. The signal goes to the process `cmd` execs:
/// hsipipe itself, or mpiexec when `cmd` starts with it. Fails (and kills it) if it does not end within
/// 120 s of the signal.
int interrupt_after_epochs(const std::string& cmd, const std::string& run_dir, const std::string& log, int sig,
                           int after = 0) {
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const std::string sh = "exec " + cmd + " > " + log + " 2>&1";
    execl("/bin/sh", "sh", "-c", sh.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  auto t0 = std::chrono::steady_clock::now();
  int status = 0;
  while (count_lines(run_dir + "/fold-0/epochs.jsonl") <= after) {
    if (waitpid(pid, &status, WNOHANG) == pid) FAIL("the run ended before it could be interrupted: " << fs::read_text(log));
    if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(120)) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      FAIL("no new epoch record after 120 s: " << fs::read_text(log));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  REQUIRE(kill(pid, sig) == 0);
  t0 = std::chrono::steady_clock::now();
  while (waitpid(pid, &status, WNOHANG) != pid) {
    if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(120)) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      FAIL("still running 120 s after signal " << sig << ": " << fs::read_text(log));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return status;
}

/// A run interrupted and resumed at run_dir ended like the uninterrupted one at ref_dir (fold 0, hamida3d on
/// 8 bands, 3 x 3 patches, 3 classes): the same weights bit for bit, trained away from the initial ones, the
/// same metrics, and `epochs` epoch records.
void check_resumed_like_reference(const std::string& ref_dir, const std::string& run_dir, int epochs) {
  const auto a = checkpoint_params(ref_dir + "/fold-0/checkpoint.pt", "hamida3d", 8, 3, 3);
  const auto b = checkpoint_params(run_dir + "/fold-0/checkpoint.pt", "hamida3d", 8, 3, 3);
  const auto fresh = train::make_model("hamida3d", 8, 3, 3, 1)->parameters();
  REQUIRE(a.size() == b.size());
  bool trained = false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    CHECK(torch::equal(a[i], b[i]));
    trained |= !torch::equal(a[i], fresh[i]);
  }
  CHECK(trained);
  CHECK(read_json(ref_dir + "/fold-0/metrics.json")["metrics"] == read_json(run_dir + "/fold-0/metrics.json")["metrics"]);
  CHECK(count_lines(run_dir + "/fold-0/epochs.jsonl") == epochs);
}

}  // namespace

TEST_CASE("train --fold all on 2 ranks reads one shard per rank; --fold I tasks + report give the same summary",
          "[train][cli]") {
  test::TempDir tmp("train-cli");
  // noisy classes: OA ~0.8, so the compared per-fold figures are not all 1
  const auto cache = make_cache(tmp.str("cache"), "--layout pixel --rows 12 --cols 11 --bands 10 --unlabeled 0.1 --noise 1.5");
  const auto folds = make_folds(cache, tmp.str("folds.json"), 3);
  const std::string common = " train --cache " + cache + " --folds " + folds +
                             " --model hu1d --epochs 2 --batch 16 --lr 0.01 --deterministic --quiet --seed 9";
  const auto all = test::run(mpiexec(2) + bin() + common + " --fold all --out " + tmp.str("all"));
  INFO(all.output);
  REQUIRE(all.status == 0);
  CHECK(all.output.find("nothing decoded") != std::string::npos);
  const auto s_all = read_json(tmp.str("all/summary.json"));
  REQUIRE(s_all["folds"].size() == 3);
  CHECK(s_all["mean"]["oa"].get<double>() < 1.0);
  // one shard per rank: the bytes read are exactly the samples array, split in two (io.json, beside the summary)
  const auto manifest = read_json(cache + "/manifest.json");
  const std::uint64_t n = manifest["n_samples"], b = manifest["n_bands"];
  const auto io = read_json(tmp.str("all/io.json"));
  const auto per_rank = io["cache_bytes_read_per_rank"].get<std::vector<std::uint64_t>>();
  REQUIRE(per_rank.size() == 2);
  CHECK(per_rank[0] == ((n + 1) / 2) * b * 4);
  CHECK(per_rank[1] == (n / 2) * b * 4);
  CHECK(io["shard_loads"] == 1);
  CHECK(io["folds"] == 3);
  CHECK(io["scene_bytes_decoded"] == 0);

  for (int f = 0; f < 3; ++f) {
    const auto r = test::run(mpiexec(2) + bin() + common + " --fold " + std::to_string(f) + " --out " + tmp.str("tasks"));
    INFO(r.output);
    REQUIRE(r.status == 0);
  }
  const auto rep = test::run(bin() + " report " + tmp.str("tasks"));
  INFO(rep.output);
  REQUIRE(rep.status == 0);
  const auto s_tasks = read_json(tmp.str("tasks/summary.json"));
  // the whole summary, key by key (a key only one side has shows up as null on the other)
  std::set<std::string> keys;
  for (const auto& [k, v] : s_all.items()) keys.insert(k);
  for (const auto& [k, v] : s_tasks.items()) keys.insert(k);
  for (const auto& k : keys) {
    INFO("summary.json key " << k);
    CHECK(s_tasks.value(k, nlohmann::json()) == s_all.value(k, nlohmann::json()));
  }
  CHECK(fs::read_text(tmp.str("tasks/summary.md")) == fs::read_text(tmp.str("all/summary.md")));
  // report over the --fold all run rewrites its summary unchanged
  const auto again = test::run(bin() + " report --quiet " + tmp.str("all"));
  INFO(again.output);
  REQUIRE(again.status == 0);
  CHECK(read_json(tmp.str("all/summary.json")) == s_all);
}

TEST_CASE("train refuses a model/layout mismatch and a folds file of another cache before training", "[train][cli]") {
  test::TempDir tmp("train-refuse");
  const auto cache = make_cache(tmp.str("cache"), "--layout pixel --rows 8 --cols 8 --bands 6");
  const auto other = make_cache(tmp.str("other"), "--layout pixel --rows 9 --cols 8 --bands 6 --seed 4");
  const auto folds = make_folds(cache, tmp.str("folds.json"), 3);
  const auto other_folds = make_folds(other, tmp.str("other_folds.json"), 3);
  const std::string base = " train --cache " + cache + " --epochs 1 --out " + tmp.str("run");
  const auto mism = test::run(mpiexec(2) + bin() + base + " --folds " + folds + " --model li3d");
  INFO(mism.output);
  CHECK(mism.status == 2);
  CHECK(mism.output.find("layout pixel") != std::string::npos);
  const auto stale = test::run(mpiexec(2) + bin() + base + " --folds " + other_folds + " --model hu1d");
  INFO(stale.output);
  CHECK(stale.status == 5);
  CHECK(stale.output.find(other_folds) != std::string::npos);
  CHECK(stale.output.find(cache) != std::string::npos);
  CHECK_FALSE(fsys::exists(tmp.str("run/fold-0/metrics.json")));
  const auto badfold = test::run(bin() + base + " --folds " + folds + " --model hu1d --fold 3");
  CHECK(badfold.status == 2);
}

TEST_CASE("SIGTERM writes a checkpoint and exits 75; --resume ends with the weights of an uninterrupted run",
          "[train][cli]") {
  test::TempDir tmp("train-sig");
  const auto cache = make_cache(tmp.str("cache"), "--layout patch --patch 3 --rows 20 --cols 20 --bands 8 --unlabeled 0");
  const auto folds = make_folds(cache, tmp.str("folds.json"), 2);
  const std::string opts = " train --cache " + cache + " --folds " + folds +
                           " --model hamida3d --fold 0 --epochs 12 --batch 4 --deterministic --augment flip,rot90 --quiet";
  const auto ref = test::run(bin() + opts + " --out " + tmp.str("ref"));
  INFO(ref.output);
  REQUIRE(ref.status == 0);

  // interrupted run: started directly (singleton MPI), SIGTERM once its first epoch is recorded
  const std::string run_dir = tmp.str("int");
  const std::string log = tmp.str("int.log");
  const int status = interrupt_after_epochs(bin() + opts + " --out " + run_dir, run_dir, log, SIGTERM);
  const std::string out1 = fs::read_text(log);
  INFO(out1);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 75);
  CHECK(out1.find("checkpoint written, exiting for requeue") != std::string::npos);
  REQUIRE(fsys::exists(run_dir + "/fold-0/checkpoint.pt"));
  CHECK_FALSE(fsys::exists(run_dir + "/fold-0/metrics.json"));

  const auto res = test::run(bin() + opts + " --out " + run_dir + " --resume");
  INFO(res.output);
  REQUIRE(res.status == 0);
  CHECK(res.output.find("resumed from checkpoint") != std::string::npos);
  // the epoch records continue where they stopped: 12 in all
  check_resumed_like_reference(tmp.str("ref"), run_dir, 12);
}

TEST_CASE("under mpiexec -n 2: SIGUSR1 to mpiexec checkpoints every rank and exits 75, --resume ends with the "
          "weights of an uninterrupted run; SIGTERM to mpiexec leaves a usable checkpoint",
          "[train][cli][mpi]") {
  // mpiexec is the process a user (or jobs/lib.sh with HSIPIPE_MPI=mpiexec) signals. Open MPI's mpiexec
  // (4.1) forwards SIGUSR1 to the ranks and exits with their status, 75. SIGTERM it does not forward: it
  // aborts the job, sending the ranks SIGCONT, then SIGTERM odls_base_sigkill_timeout (1 s) later, then
  // SIGKILL as long again after that, and exits 1 whatever the ranks return. So for SIGTERM this checks
  // what hsipipe controls: the ranks checkpoint together and the checkpoint resumes (the timeout is
  // raised to 5 s so a loaded machine does not SIGKILL them first; other MPIs ignore OMPI_MCA_*), and
  // only that mpiexec's status is not 0.
  test::TempDir tmp("train-sig-mpi");
  const auto cache = make_cache(tmp.str("cache"), "--layout patch --patch 3 --rows 20 --cols 20 --bands 8 --unlabeled 0");
  const auto folds = make_folds(cache, tmp.str("folds.json"), 2);
  auto opts = [&](int epochs) {
    return " train --cache " + cache + " --folds " + folds + " --model hamida3d --fold 0 --epochs " + std::to_string(epochs) +
           " --batch 8 --deterministic --augment flip,rot90 --quiet";
  };
  const std::string checkpointed = " received; checkpoint written, exiting for requeue";

  SECTION("SIGUSR1") {
    const int epochs = 12;
    const auto ref = test::run(mpiexec(2) + bin() + opts(epochs) + " --out " + tmp.str("ref"));
    INFO(ref.output);
    REQUIRE(ref.status == 0);
    const std::string run_dir = tmp.str("usr1");
    const std::string log = tmp.str("usr1.log");
    // a fixed pause per step (core/test_hook.hpp) keeps the run going while the signal travels, however fast
    // the machine trains; it changes no weight
    const int status = interrupt_after_epochs("env HSIPIPE_TEST_STEP_DELAY_MS=5 " + mpiexec(2) + bin() + opts(epochs) +
                                              " --out " + run_dir, run_dir, log, SIGUSR1);
    const std::string out1 = fs::read_text(log);
    INFO(out1);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 75);
    CHECK(out1.find("signal " + std::to_string(SIGUSR1) + checkpointed) != std::string::npos);
    REQUIRE(fsys::exists(run_dir + "/fold-0/checkpoint.pt"));
    CHECK_FALSE(fsys::exists(run_dir + "/fold-0/metrics.json"));
    CHECK(count_lines(run_dir + "/fold-0/epochs.jsonl") < epochs);

    const auto res = test::run(mpiexec(2) + bin() + opts(epochs) + " --out " + run_dir + " --resume");
    INFO(res.output);
    REQUIRE(res.status == 0);
    CHECK(res.output.find("resumed from checkpoint") != std::string::npos);
    check_resumed_like_reference(tmp.str("ref"), run_dir, epochs);
  }

  SECTION("SIGTERM") {
    // far more epochs than run before the signal lands (seconds after it is sent); never run to the end
    const int epochs = 100000;
    const std::string run_dir = tmp.str("term");
    const std::string log = tmp.str("term.log");
    const std::string env = "env OMPI_MCA_odls_base_sigkill_timeout=5 ";
    const int status = interrupt_after_epochs(env + mpiexec(2) + bin() + opts(epochs) + " --out " + run_dir, run_dir, log, SIGTERM);
    const std::string out1 = fs::read_text(log);
    INFO(out1);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) != 0);
    REQUIRE(out1.find("signal " + std::to_string(SIGTERM) + checkpointed) != std::string::npos);
    REQUIRE(fsys::exists(run_dir + "/fold-0/checkpoint.pt"));
    CHECK_FALSE(fsys::exists(run_dir + "/fold-0/metrics.json"));
    const int recorded = count_lines(run_dir + "/fold-0/epochs.jsonl");
    // usable: a resumed run (2 ranks) starts from it, records further epochs, and stops again on SIGUSR1
    const std::string log2 = tmp.str("term-resume.log");
    const int status2 =
        interrupt_after_epochs(mpiexec(2) + bin() + opts(epochs) + " --out " + run_dir + " --resume", run_dir, log2, SIGUSR1, recorded);
    const std::string out2 = fs::read_text(log2);
    INFO(out2);
    REQUIRE(WIFEXITED(status2));
    CHECK(WEXITSTATUS(status2) == 75);
    CHECK(out2.find("resumed from checkpoint " + run_dir + "/fold-0/checkpoint.pt at fold 0 epoch " +
                    std::to_string(recorded + 1)) != std::string::npos);
    CHECK(count_lines(run_dir + "/fold-0/epochs.jsonl") > recorded);
  }
}

// ------------------------------------------------------------------------------------------- issue 35
namespace {

/// mtime of a file in nanoseconds.
std::int64_t mtime_ns(const std::string& p) {
  struct stat st {};
  REQUIRE(::stat(p.c_str(), &st) == 0);
  return static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec;
}

struct SmallRun {
  test::TempDir tmp{"train-hard"};
  std::string cache, folds, opts;
  SmallRun() {
    cache = make_cache(tmp.str("cache"), "--layout pixel --rows 10 --cols 10 --bands 6 --unlabeled 0");
    folds = make_folds(cache, tmp.str("folds.json"), 3);
    opts = " train --cache " + cache + " --folds " + folds + " --model mlp --fold 0 --batch 8 --deterministic --quiet";
  }
  test::RunResult train(const std::string& out, const std::string& extra) const {
    return test::run(bin() + opts + " --out " + out + " " + extra);
  }
  /// RUN_DIR of a finished run with `extra` options.
  std::string trained(const std::string& extra) const {
    const std::string run = tmp.str("run");
    const auto r = train(run, extra);
    INFO(r.output);
    REQUIRE(r.status == 0);
    return run;
  }
};

}  // namespace

TEST_CASE("train: metrics.json is the fold's last file; an existing run is refused without --resume or --force",
          "[train][cli][hardening]") {
  SmallRun s;
  const std::string run = s.trained("--epochs 2 --checkpoint-every 1");
  const std::string f0 = run + "/fold-0/";
  // metrics.json marks the fold complete: everything else was written before it
  const auto done = mtime_ns(f0 + "metrics.json");
  for (const auto& e : fsys::directory_iterator(f0)) CHECK(mtime_ns(e.path().string()) <= done);

  // a second run into the same --out: refused (exit 2, naming the fold directory), nothing changed
  auto r = s.train(run, "--epochs 2");
  INFO(r.output);
  CHECK(r.status == 2);
  CHECK(r.output.find(run + "/fold-0 holds the files of an earlier run (finished)") != std::string::npos);
  CHECK(mtime_ns(f0 + "metrics.json") == done);
  // --force replaces it
  r = s.train(run, "--epochs 1 --force");
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(count_lines(f0 + "epochs.jsonl") == 1);
}

TEST_CASE("train --resume refuses a checkpoint of another cache, another folds file, or past --epochs",
          "[train][cli][hardening]") {
  SmallRun s;
  const std::string run = s.trained("--epochs 3");
  test::RunResult r;
  // without metrics.json the finished checkpoint is what --resume continues from
  fsys::remove(run + "/fold-0/metrics.json");

  SECTION("more epochs than --epochs: never reported as a shorter run") {
    r = s.train(run, "--epochs 2 --resume");
    INFO(r.output);
    CHECK(r.status == 2);
    CHECK(r.output.find("is a finished 3-epoch run") != std::string::npos);
    CHECK_FALSE(fsys::exists(run + "/fold-0/metrics.json"));
    r = s.train(run, "--epochs 3 --resume");  // the same run: its results are written again
    INFO(r.output);
    CHECK(r.status == 0);
    CHECK(fsys::exists(run + "/fold-0/metrics.json"));
  }
  SECTION("a folds file made again with another seed: the split changed, resuming would leak") {
    const auto fp0 = read_json(s.folds)["fingerprint"].get<std::string>();
    const auto again = test::run(bin() + " folds --cache " + s.cache + " --k 3 --seed 99 --force --out " + s.folds);
    REQUIRE(again.status == 0);
    const auto fp1 = read_json(s.folds)["fingerprint"].get<std::string>();
    REQUIRE(fp0 != fp1);
    r = s.train(run, "--epochs 3 --resume");
    INFO(r.output);
    CHECK(r.status == 5);
    CHECK(r.output.find("folds_fingerprint \"" + fp0 + "\"") != std::string::npos);
    CHECK(r.output.find(fp1) != std::string::npos);
    CHECK_FALSE(fsys::exists(run + "/fold-0/metrics.json"));
  }
  SECTION("another cache with the same shape: another data_checksum") {
    const auto other = make_cache(s.tmp.str("cache2"), "--layout pixel --rows 10 --cols 10 --bands 6 --unlabeled 0 --seed 3");
    const auto folds2 = make_folds(other, s.tmp.str("folds2.json"), 3);
    r = test::run(bin() + " train --cache " + other + " --folds " + folds2 +
                  " --model mlp --fold 0 --batch 8 --deterministic --quiet --epochs 3 --resume --out " + run);
    INFO(r.output);
    CHECK(r.status == 5);
    CHECK(r.output.find("trained with data_checksum") != std::string::npos);
  }
  SECTION("altered weights are found on load") {
    // a valid archive whose model weights were changed after the fact (its meta keeps the old checksum)
    const std::string ck = run + "/fold-0/checkpoint.pt";
    torch::serialize::InputArchive in, model, optim;
    in.load_from(ck);
    c10::IValue meta;
    REQUIRE(in.try_read("meta", meta));
    in.read("model", model);
    in.read("optimizer", optim);
    torch::Tensor rng;
    in.read("rng/0", rng);
    auto net = train::make_model("mlp", 6, 1, 3, 1);
    net->load(model);
    {
      torch::NoGradGuard g;
      net->parameters()[0].view(-1)[0] += 0.5f;
    }
    torch::optim::Adam adam(net->parameters(), torch::optim::AdamOptions(1e-3));
    adam.load(optim);
    torch::serialize::OutputArchive out, m2, o2;
    out.write("meta", meta);
    net->save(m2);
    adam.save(o2);
    out.write("model", m2);
    out.write("optimizer", o2);
    out.write("rng/0", rng);
    out.save_to(ck);
    r = s.train(run, "--epochs 3 --resume");
    INFO(r.output);
    CHECK(r.status == 3);
    CHECK(r.output.find(ck + ": field 'model': weights do not match their checksum") != std::string::npos);
  }
}

TEST_CASE("train refuses a fold without validation samples", "[train][cli][hardening]") {
  SmallRun s;
  // a hand-made folds file whose fold 2 is empty (every sample in folds 0 and 1), its fingerprint recomputed
  // by the reference implementation (scripts/folds_reference.py), so that only the empty fold is wrong
  const auto fix = test::run(test::python() + " -c \"import json, sys; sys.path.insert(0, '" + test::source_dir() +
                             "/scripts'); import folds_reference as fr; j = json.load(open('" + s.folds +
                             "')); j['fold'] = [1 if f == 2 else f for f in j['fold']]; "
                             "j['fingerprint'] = fr.fingerprint(fr.read_cache('" + s.cache + "'), j['fold'], j['excluded']); "
                             "[j.pop(k) for k in ('counts', 'leakage', 'excluded_counts', 'classes')]; "
                             "json.dump(j, open('" + s.folds + "', 'w'))\"");
  INFO(fix.output);
  REQUIRE(fix.status == 0);
  const auto r = test::run(bin() + " train --cache " + s.cache + " --folds " + s.folds +
                           " --model mlp --fold 2 --batch 8 --epochs 1 --quiet --out " + s.tmp.str("run"));
  INFO(r.output);
  CHECK(r.status != 0);
  CHECK(r.status == 2);
  CHECK(r.output.find("fold 2 of " + s.folds + " has no validation samples") != std::string::npos);
  CHECK_FALSE(fsys::exists(s.tmp.str("run") + "/fold-2"));  // refused before anything was made
}

TEST_CASE("a full disk while writing the checkpoint is an I/O error naming it, with no temporary file left",
          "[train][cli][hardening]") {
  // a 1 MiB tmpfs: the run's small files fit, the checkpoint of a 160-band mlp (~2.5 MiB) does not
  SmallRun s;
  const std::string mnt = s.tmp.str("full");
  fsys::create_directories(mnt);
  const auto m = test::run("mount -t tmpfs -o size=1m tmpfs " + mnt);
  if (m.status != 0) {
    if (std::getenv("CI")) FAIL("cannot mount a tmpfs to fill (CI=true): " << m.output);
    WARN("not run: cannot mount a tmpfs here: " << m.output);
    return;
  }
  struct Unmount {
    std::string dir;
    ~Unmount() { test::run("umount " + dir); }
  } unmount{mnt};
  const auto cache = make_cache(s.tmp.str("wide"), "--layout pixel --rows 6 --cols 6 --bands 160 --unlabeled 0");
  const auto folds = make_folds(cache, s.tmp.str("wide.json"), 2);
  const auto r = test::run(bin() + " train --cache " + cache + " --folds " + folds +
                           " --model mlp --fold 0 --batch 8 --epochs 1 --quiet --out " + mnt + "/run");
  INFO(r.output);
  CHECK(r.status == 4);
  // named as the file asked for, not its temporary name (removed)
  CHECK(r.output.find(mnt + "/run/fold-0/checkpoint.pt: write failed: No space left on device") != std::string::npos);
  CHECK(r.output.find("terminate called") == std::string::npos);
  for (const auto& e : fsys::directory_iterator(mnt + "/run/fold-0")) {
    INFO(e.path());
    CHECK(e.path().filename().string().find(".tmp-") == std::string::npos);
  }
  CHECK_FALSE(fsys::exists(mnt + "/run/fold-0/metrics.json"));
}

TEST_CASE("report refuses folds trained with different settings unless --allow-mixed, which lists them",
          "[train][cli][hardening]") {
  test::TempDir tmp("report-mixed");
  const auto cache = make_cache(tmp.str("cache"), "--layout pixel --rows 8 --cols 8 --bands 5 --unlabeled 0");
  const auto folds = make_folds(cache, tmp.str("folds.json"), 2);
  const std::string run = tmp.str("run");
  const std::string base = bin() + " train --cache " + cache + " --folds " + folds + " --model mlp --batch 8 --epochs 1 --quiet --out " + run;
  REQUIRE(test::run(base + " --fold 0 --lr 0.01 --seed 42").status == 0);
  // train refuses a fold of other settings into the run (issue 43: a run's folds share their options), naming the
  // option; folds trained apart (other runs) and put together are report's to refuse
  auto r = test::run(base + " --fold 1 --lr 0.001 --seed 99");
  INFO(r.output);
  CHECK(r.status == 2);
  CHECK(r.output.find("--lr is 0.001 here, but the run's folds were trained with 0.01") != std::string::npos);
  CHECK_FALSE(fsys::exists(run + "/fold-1"));
  REQUIRE(test::run(bin() + " train --cache " + cache + " --folds " + folds + " --model mlp --batch 8 --epochs 1 --quiet --out " +
                    run + "_b --fold 1 --lr 0.001 --seed 99").status == 0);
  fsys::copy(run + "_b/fold-1", run + "/fold-1", fsys::copy_options::recursive);
  r = test::run(bin() + " report " + run);
  INFO(r.output);
  CHECK(r.status == 2);
  CHECK(r.output.find("trained with different settings") != std::string::npos);
  CHECK(r.output.find("lr {\"fold 0\":0.01,\"fold 1\":0.001}") != std::string::npos);
  CHECK(r.output.find("seed {\"fold 0\":42,\"fold 1\":99}") != std::string::npos);
  CHECK_FALSE(fsys::exists(run + "/summary.json"));
  r = test::run(bin() + " report " + run + " --allow-mixed");
  INFO(r.output);
  REQUIRE(r.status == 0);
  const auto s = read_json(run + "/summary.json");
  CHECK(s["config_differences"]["lr"]["fold 1"] == 0.001);
  CHECK(s["config_differences"].size() == 2);
  CHECK(fs::read_text(run + "/summary.md").find("trained with different settings") != std::string::npos);
}

TEST_CASE("train refuses a cache whose samples changed after decode (a flipped byte), leaving nothing behind",
          "[train][cli][hardening]") {
  test::TempDir tmp("train-flip");
  for (const char* layout : {"--layout pixel", "--layout patch --patch 3"}) {
    INFO(layout);
    const std::string name = std::string(layout).find("pixel") != std::string::npos ? "pixel" : "patch";
    const auto cache = make_cache(tmp.str(name), std::string(layout) + " --rows 9 --cols 9 --bands 5 --unlabeled 0");
    const auto folds = make_folds(cache, tmp.str(name + ".json"), 3);
    const std::string cmd = bin() + " train --cache " + cache + " --folds " + folds + " --model mlp --fold 1 --batch 8 --epochs 1 --quiet --out ";
    REQUIRE(test::run(cmd + tmp.str(name + "-ok")).status == 0);  // intact: trains
    std::string bytes = fs::read_text(cache + "/samples.npy");
    bytes[bytes.size() - 7] = static_cast<char>(bytes[bytes.size() - 7] ^ 0x01);  // one bit of the last sample
    fs::write_text_atomic(cache + "/samples.npy", bytes);
    const auto r = test::run(cmd + tmp.str(name + "-new") + "/sub/run");
    INFO(r.output);
    CHECK(r.status == 3);
    CHECK(r.output.find(cache + ": field 'data_checksum'") != std::string::npos);
    CHECK(r.output.find("the cache changed after decode") != std::string::npos);
    CHECK_FALSE(fsys::exists(tmp.str(name + "-new")));  // no RUN/, nor the folders above it (issue 35 item 14)
  }
}

TEST_CASE("train checks a cube cache's rows against data_checksum: a flipped byte in any row is refused", "[train][cli][hardening]") {
  test::TempDir tmp("train-flip-cube");
  // Two 16 x 4 scenes, three pixels in four unlabeled; with this seed scene 1's last samples are in row 11, so
  // its rows 13-15 are in no shard (patch 3: the halo is one row), and a shard reads them for the check only.
  const auto cache = make_cache(tmp.str("cube"), "--layout cube --patch 3 --rows 16 --cols 4 --bands 5 --scenes 2 --unlabeled 0.75 --seed 6");
  const auto folds = make_folds(cache, tmp.str("cube.json"), 3);
  const std::string args = " train --cache " + cache + " --folds " + folds + " --model mlp --fold 1 --batch 8 --epochs 1 --quiet --out ";
  int n = 0;
  for (int ranks : {1, 2, 3}) {  // intact: trains, whichever ranks own which rows
    const auto r = test::run(mpiexec(ranks) + bin() + args + tmp.str("ok" + std::to_string(n++)));
    INFO(ranks << " ranks: " << r.output);
    REQUIRE(r.status == 0);
  }
  const std::uint64_t row_bytes = 4 * 5 * 4;
  struct Flip {
    const char* file;
    std::uint64_t row, byte;
    const char* what;
  };
  for (const Flip& f : {Flip{"cube_1.npy", 15, row_bytes - 1, "a row without samples, read for the check only"},
                        Flip{"cube_1.npy", 12, 9, "a halo row"}, Flip{"cube_0.npy", 0, 0, "a sample's row"}}) {
    const std::string path = cache + "/" + f.file;
    std::string bytes = fs::read_text(path);
    const std::uint64_t at = bytes.size() - 16 * row_bytes + f.row * row_bytes + f.byte;  // the data ends the file
    for (int ranks : {1, 2}) {
      INFO(f.file << " row " << f.row << " (" << f.what << "), " << ranks << " ranks");
      bytes[at] = static_cast<char>(bytes[at] ^ 0x10);
      fs::write_text_atomic(path, bytes);
      const std::string out = tmp.str("new" + std::to_string(n++));
      const auto r = test::run(mpiexec(ranks) + bin() + args + out + "/run");
      INFO(r.output);
      CHECK(r.status == 3);
      CHECK(r.output.find(cache + ": field 'data_checksum'") != std::string::npos);
      CHECK(r.output.find("the cache changed after decode") != std::string::npos);
      CHECK_FALSE(fsys::exists(out));  // nothing left: no RUN/, no folder above it
      bytes[at] = static_cast<char>(bytes[at] ^ 0x10);  // restored: the next flip is the only change
      fs::write_text_atomic(path, bytes);
    }
  }
}
