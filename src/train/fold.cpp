// train/fold: one fold of train(): resume decision, this rank's ids, model and optimiser, the epochs
// (steps timed by a PhaseClock), the all-gathered validation, the epoch record and the fold's results.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <numeric>
#include <sstream>
#include <thread>

#include "cache/npy.hpp"
#include "core/fs.hpp"
#include "core/hash.hpp"
#include "core/signals.hpp"
#include "core/test_hook.hpp"
#include "dist/collective.hpp"
#include "folds/rng.hpp"
#include "train/resources.hpp"
#include "train/run.hpp"
#include "train/schedule.hpp"

namespace hsipipe::train::detail {

namespace {

using dist::collective_step;

std::string fmt_bytes(std::uint64_t b) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(1) << static_cast<double>(b) / (1024.0 * 1024.0) << " MiB";
  return s.str();
}

/// xxh3 over every parameter's float32 bytes, in registration order (rank-local).
std::uint64_t parameter_hash(torch::nn::Module& m) {
  Xxh3Stream h;
  for (const auto& p : m.parameters()) {
    const auto c = p.detach().to(torch::kCPU).contiguous();
    h.update(c.data_ptr(), static_cast<std::size_t>(c.numel()) * c.element_size());
  }
  return h.digest();
}

}  // namespace

FoldRun::FoldRun(Job& job, int fold)
    : job_(job), f_(fold), fdir_(fold_dir(job.opt.out, fold)), ckpt_path_(fdir_ + "/checkpoint.pt") {}

int FoldRun::run(nlohmann::json& fold_wall) {
  const double t_fold0 = now_s();
  if (resume_decision()) {
    if (job_.root) job_.log << "fold " << f_ << ": results exist, skipped (--resume)\n";
    return 0;
  }
  split_ids();
  build_model();
  for (int epoch = start_epoch_; epoch < job_.opt.epochs; ++epoch) {
    EpochSums sums;
    Timing t;
    const double t_epoch0 = now_s();
    if (!train_epoch(epoch, sums, t)) return kExitPreempted;
    {
      const double t0 = now_s();
      abort_on_local_error(job_.world, [&] { last_val_ = validate(); });
      t.eval += now_s() - t0;
    }
    check_replicas(epoch);
    const double resumed_part = epoch == start_epoch_ && start_step_ > 0 ? part_time_.train() : 0;
    nlohmann::json rec = epoch_record(epoch, sums, t, now_s() - t_epoch0 + resumed_part);
    // checkpoint every N epochs; its history holds this epoch's record (timed before the checkpoint)
    const bool final_epoch = epoch + 1 == job_.opt.epochs;
    if (job_.opt.checkpoint_every > 0 && (epoch + 1) % job_.opt.checkpoint_every == 0 && !final_epoch) {
      const double t0 = now_s();
      if (job_.root) history_.push_back(rec);
      save(epoch + 1, 0, false, EpochSums{}, Timing{});
      if (job_.root) history_.erase(history_.end() - 1);
      t.checkpoint += now_s() - t0;
    }
    const double total = now_s() - t_epoch0 + resumed_part;
    if (job_.root) {
      rec["time_s"] = t.to_json(total);
      rec["eta"] = total > 0 ? t.compute / total : 0.0;
      history_.push_back(rec);
      std::ofstream(fdir_ + "/epochs.jsonl", std::ios::app) << rec.dump() << "\n";
      if (job_.opt.log_epochs) log_epoch(epoch, rec, t, total);
    }
    train_s_ += now_s() - t_epoch0;
  }
  if (start_epoch_ >= job_.opt.epochs) abort_on_local_error(job_.world, [&] { last_val_ = validate(); });  // resumed after the last epoch
  // metrics.json last: it marks the fold complete (report, --resume), so nothing may be missing once it exists
  write_scores();
  save(job_.opt.epochs, 0, true, EpochSums{}, Timing{});
  write_results();
  fold_wall.push_back({{"fold", f_}, {"seconds", now_s() - t_fold0}});
  return 0;
}

// ------------------------------------------------------------------------------ resume (same on all ranks)
bool FoldRun::resume_decision() {
  bool skip = false;
  collective_step(job_.world, "resume", [&] {
    const auto& opt = job_.opt;
    if (!opt.resume) return;
    const bool have_ckpt = std::filesystem::exists(ckpt_path_);
    const bool have_metrics = std::filesystem::exists(fdir_ + "/metrics.json");
    if (!have_ckpt) {
      skip = have_metrics;
      return;
    }
    CheckpointState st = peek_checkpoint(ckpt_path_);
    check_resumable(st);
    if (st.finished && have_metrics) skip = true;
    else resume_state_ = st;
  });
  return skip;
}

/// Everything a checkpoint must share with this run to be continued by it, each refusal naming both values.
void FoldRun::check_resumable(const CheckpointState& st) const {
  const auto& opt = job_.opt;
  if (st.fold != f_) throw FormatError(ckpt_path_, "fold", "is " + std::to_string(st.fold) + ", expected " + std::to_string(f_));
  if (st.world_size != job_.R) {
    throw ConfigError("--resume: " + ckpt_path_ + " was written by " + std::to_string(st.world_size) +
                      " ranks; resume with the same number (this run has " + std::to_string(job_.R) + ")");
  }
  nlohmann::json want = opt.identity();
  want.erase("epochs");
  nlohmann::json have = st.config;
  have.erase("epochs");
  if (have.value("model_sha256", "") != want.value("model_sha256", "") && have.value("model", "") == want.value("model", ""))
    throw ConfigError("--resume: " + ckpt_path_ + " was trained with the TorchScript file of SHA-256 " + have.value("model_sha256", "") +
                      ", but --model " + opt.model + " has SHA-256 " + want.value("model_sha256", "") + ": resume with the same network file");
  for (const char* key : {"schedule", "schedule_epochs", "warmup_epochs", "class_weights", "label_smoothing", "optimizer"})
    if (have.value(key, nlohmann::json()) != want.value(key, nlohmann::json())) {
      std::string opt_name = key;
      std::replace(opt_name.begin(), opt_name.end(), '_', '-');
      throw ConfigError("--resume: " + ckpt_path_ + " was trained with --" + opt_name + " " + have.value(key, nlohmann::json()).dump() +
                        ", this run asks for " + want.value(key, nlohmann::json()).dump() +
                        (std::string(key) == "schedule_epochs" ? " (the schedule's horizon: give --schedule-epochs " +
                                                                     have.value(key, nlohmann::json()).dump() + " to extend the run under its schedule)"
                                                               : std::string()));
    }
  if (have != want) throw ConfigError("--resume: " + ckpt_path_ + " was trained with other options: " + st.config.dump() + " vs " + opt.identity().dump());
  // the data it was trained on: another cache, or a folds file made again, would continue on other samples
  const char* names[] = {"data_checksum", "folds_fingerprint", "n_folds"};
  for (const char* key : names) {
    if (!st.provenance.contains(key)) {
      throw StaleError("--resume: " + ckpt_path_ + " does not record the " + key +
                       " it was trained on (a checkpoint of an older hsipipe): train this fold again (--force)");
    }
    if (st.provenance[key] != job_.provenance[key]) {
      throw StaleError("--resume: " + ckpt_path_ + " was trained with " + key + " " + st.provenance[key].dump() + ", but " +
                       (std::string(key) == "data_checksum" ? "cache " + opt.cache : "folds file " + opt.folds) + " has " +
                       job_.provenance[key].dump() + ": resuming would continue on other samples (--force starts the fold again)");
    }
  }
  // never report a model trained further than --epochs as the result of --epochs
  const bool past = st.epoch > opt.epochs || (st.epoch == opt.epochs && st.step > 0 && !st.finished);
  if (past || (st.finished && st.epoch != opt.epochs)) {
    throw ConfigError("--resume --epochs " + std::to_string(opt.epochs) + ": " + ckpt_path_ + " is " +
                      (st.finished ? "a finished " + std::to_string(st.epoch) + "-epoch run"
                                   : "at epoch " + std::to_string(st.epoch + 1) + " step " + std::to_string(st.step)) +
                      (past ? ", past the epochs asked for" : "") + ": give --epochs " +
                      std::to_string(st.finished ? st.epoch : std::max(opt.epochs, st.epoch + 1)) +
                      " to continue it, or --force to train the fold again");
  }
}

// ------------------------------------------------------------------------------ this rank's ids
void FoldRun::split_ids() {
  const auto& range = job_.range;
  train_ids_.clear();
  val_ids_.clear();
  val_all_ = job_.folds.val_ids(f_);  // never empty: set_up refused such a fold
  for (auto id : job_.folds.train_ids(f_))
    if (range.contains(id) && job_.class_of[id - range.begin] >= 0) train_ids_.push_back(id);
  for (auto id : val_all_)
    if (range.contains(id)) val_ids_.push_back(id);
  for (auto id : val_ids_) {
    if (job_.class_of[id - range.begin] < 0) {
      throw FormatError(job_.opt.cache, "labels", "validation sample " + std::to_string(id) + " has label " +
                                                      std::to_string(job_.table.label[id]) + ", not one of manifest label_values");
    }
  }
  const std::vector<std::uint64_t> counts = job_.world.allgatherv(std::vector<std::uint64_t>{train_ids_.size()});
  n_train_ = std::accumulate(counts.begin(), counts.end(), std::uint64_t{0});
  if (n_train_ == 0) throw ConfigError("fold " + std::to_string(f_) + " of " + job_.opt.folds + " has no training samples");
  const std::vector<std::int64_t> share = split_batch(job_.opt.batch, counts);
  G_ = std::accumulate(share.begin(), share.end(), std::int64_t{0});
  steps_ = static_cast<std::int64_t>((n_train_ + static_cast<std::uint64_t>(G_) - 1) / static_cast<std::uint64_t>(G_));
  my_b_ = share[static_cast<std::size_t>(job_.rank)];
  if (job_.root && G_ < job_.opt.batch)
    job_.log << "note: --batch " << job_.opt.batch << " exceeds fold " << f_ << "'s " << n_train_
             << " training samples: each epoch is one step of " << G_ << " (metrics.json train.batch_effective)\n";
}

// ------------------------------------------------------------------------------ model, optimiser, resume state
void FoldRun::build_model() {
  const auto& opt = job_.opt;
  model_ = make_model(opt.model, job_.bands, job_.patch, job_.classes_n(), folds::derive_seed(opt.seed, static_cast<std::uint64_t>(f_)));
  torch::manual_seed(folds::derive_seed(opt.seed, static_cast<std::uint64_t>(f_), static_cast<std::uint64_t>(job_.rank) + 1));
  model_->to(job_.device);
  model_->train();
  if (opt.optimizer == "adam") {
    optim_ = std::make_unique<torch::optim::Adam>(model_->parameters(), torch::optim::AdamOptions(opt.lr).weight_decay(opt.weight_decay));
  } else if (opt.optimizer == "adamw") {
    optim_ = std::make_unique<torch::optim::AdamW>(model_->parameters(), torch::optim::AdamWOptions(opt.lr).weight_decay(opt.weight_decay));
  } else {
    optim_ = std::make_unique<torch::optim::SGD>(model_->parameters(),
                                                 torch::optim::SGDOptions(opt.lr).momentum(0.9).weight_decay(opt.weight_decay));
  }
  sync_ = std::make_unique<GradSync>(model_->parameters(), *job_.comm);
  buffer_sync_ = std::make_unique<BufferSync>(model_->buffers(), *job_.comm);
  set_loss_options();
  if (resume_state_) return load_resume_state();
  collective_step(job_.world, "starting " + fdir_, [&] {
    if (!job_.root) return;
    std::filesystem::create_directories(fdir_);
    fs::write_text_atomic(fdir_ + "/epochs.jsonl", "");
    write_preprocessing(job_);
  });
}

/// COLLECTIVE (with --class-weights balanced): the fold's per-class training counts summed over the ranks, so
/// every rank weighs the classes alike; and the label smoothing.
void FoldRun::set_loss_options() {
  loss_.label_smoothing = job_.opt.label_smoothing;
  if (job_.opt.class_weights != "balanced") return;
  std::vector<std::uint64_t> mine(static_cast<std::size_t>(job_.classes_n()), 0);
  for (auto id : train_ids_) ++mine[static_cast<std::size_t>(job_.class_of[id - job_.range.begin])];
  const std::vector<std::uint64_t> all = job_.world.allgatherv(mine);
  std::vector<std::uint64_t> counts(mine.size(), 0);
  for (std::size_t i = 0; i < all.size(); ++i) counts[i % mine.size()] += all[i];
  const std::vector<double> w = balanced_class_weights(counts);
  loss_.class_weights = torch::tensor(std::vector<float>(w.begin(), w.end()), torch::kFloat32).to(job_.device);
}

/// The learning rate of `epoch` (train/schedule.hpp) into every parameter group; returns it.
double FoldRun::set_epoch_lr(int epoch) {
  const auto& opt = job_.opt;
  const double lr = scheduled_lr(opt.schedule, opt.lr, opt.warmup_epochs, opt.schedule_epochs, epoch);
  for (auto& g : optim_->param_groups()) g.options().set_lr(lr);
  return lr;
}

void FoldRun::load_resume_state() {
  std::vector<torch::Tensor> rng;
  CheckpointState st;
  collective_step(job_.world, "loading the checkpoint", [&] { st = load_checkpoint(ckpt_path_, *model_, *optim_, rng); });
  model_->to(job_.device);
  start_epoch_ = st.epoch;
  start_step_ = st.step;
  history_ = st.progress.value("history", nlohmann::json::array());
  if (job_.root) {
    part_.loss = st.progress.value("loss_sum", 0.0);
    part_.correct = st.progress.value("correct", 0.0);
    part_.count = st.progress.value("count", 0.0);
    part_time_ = Timing::from_json(st.progress.value("time", nlohmann::json::object()));
  }
  set_cpu_rng_state(rng.at(static_cast<std::size_t>(job_.rank)));
  collective_step(job_.world, "rewriting " + fdir_ + "/epochs.jsonl", [&] {
    if (!job_.root) return;
    job_.log << "resumed from checkpoint " << ckpt_path_ << " at fold " << f_ << " epoch " << start_epoch_ + 1 << " step "
             << start_step_ << "\n";
    std::string lines;
    for (const auto& h : history_) lines += h.dump() + "\n";
    fs::write_text_atomic(fdir_ + "/epochs.jsonl", lines);
  });
}

/// COLLECTIVE: everyone's generator state to rank 0, which writes.
void FoldRun::save(int epoch, std::int64_t step, bool finished, const EpochSums& part, const Timing& t) {
  const torch::Tensor mine = cpu_rng_state().contiguous();
  std::vector<std::uint8_t> bytes(mine.data_ptr<std::uint8_t>(), mine.data_ptr<std::uint8_t>() + mine.numel());
  const auto all = job_.world.allgatherv(bytes);
  collective_step(job_.world, "writing the checkpoint", [&] {
    if (!job_.root) return;
    std::vector<torch::Tensor> states;
    const std::size_t each = bytes.size();
    for (int r = 0; r < job_.R; ++r) {
      states.push_back(torch::from_blob(const_cast<std::uint8_t*>(all.data()) + static_cast<std::size_t>(r) * each,
                                        {static_cast<std::int64_t>(each)}, torch::kUInt8)
                           .clone());
    }
    CheckpointState st;
    st.fold = f_;
    st.epoch = epoch;
    st.step = step;
    st.finished = finished;
    st.world_size = job_.R;
    st.config = job_.opt.identity();
    st.provenance = job_.provenance;
    st.progress = {{"history", history_}, {"loss_sum", part.loss}, {"correct", part.correct}, {"count", part.count},
                   {"time", t.to_json(0)}};
    // the model is saved from the CPU so a checkpoint resumes on any device
    model_->to(torch::kCPU);
    try {
      save_checkpoint(ckpt_path_, st, *model_, *optim_, states);
    } catch (...) {
      model_->to(job_.device);
      throw;
    }
    model_->to(job_.device);
  });
}

// ------------------------------------------------------------------------------ one epoch's steps
bool FoldRun::train_epoch(int epoch, EpochSums& sums, Timing& t) {
  const auto& opt = job_.opt;
  const bool resumed_epoch = epoch == start_epoch_ && start_step_ > 0;
  const std::int64_t first = resumed_epoch ? start_step_ : 0;
  epoch_lr_ = set_epoch_lr(epoch);
  if (resumed_epoch && job_.root) t = part_time_;
  reset_peak_rss();
  cuda_reset_peak_memory(job_.device.is_cuda() ? job_.device.index() : -1);
  job_.batches->start(epoch_plan(train_ids_, my_b_, steps_, opt.seed, f_, epoch, job_.rank),
                      folds::derive_seed(opt.seed, static_cast<std::uint64_t>(f_), static_cast<std::uint64_t>(epoch)), true,
                      static_cast<std::size_t>(first));
  const auto on = torch::TensorOptions().device(job_.device);
  torch::Tensor acc_loss = torch::zeros({}, on.dtype(torch::kFloat64)), acc_correct = torch::zeros({}, on.dtype(torch::kInt64));
  std::int64_t acc_count = 0;
  int preempted = 0;  // the signal the ranks agreed to stop on (the largest number any of them got)
  std::int64_t step = first;
  // tests: a fixed pause per step, so that a signal sent during the first epoch lands mid-fold however fast
  // the machine trains (tests/slurm/test_chain.sh)
  static const long step_delay_ms = test_delay_ms("HSIPIPE_TEST_STEP_DELAY_MS");
  PhaseClock& clock = *job_.clock;
  // (the step that sees the signal still counts as done: ++step runs before the condition ends the loop)
  for (; step < steps_ && !preempted; ++step) abort_on_local_error(job_.world, [&] {
    if (step_delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(step_delay_ms));
    clock.begin_step();
    auto b = job_.batches->next();
    if (!b) throw Error("loader ended before step " + std::to_string(step) + " of " + std::to_string(steps_));
    clock.mark(Phase::data);
    StepResult r = train_step(*model_, *optim_, *sync_, b->x, b->y, G_, job_.precision, &clock, &loss_);
    buffer_sync_->average();
    acc_loss += r.loss_sum.to(torch::kFloat64);
    acc_correct += r.correct;
    acc_count += static_cast<std::int64_t>(b->size);
    // agree on preemption between steps (one tiny allreduce on the host)
    preempted = job_.world.allreduce_max(preempt_signal());
    clock.mark(Phase::comm);
  });
  t.add_steps(clock.finish());  // CUDA: waits for the epoch's last event only
  // global sums of the epoch (or of its part so far)
  double s[3] = {acc_loss.item<double>(), static_cast<double>(acc_correct.item<std::int64_t>()), static_cast<double>(acc_count)};
  {
    const double t0 = now_s();
    job_.world.allreduce_sum(s, 3);
    t.comm += now_s() - t0;
  }
  // the same sums on every rank: all stop here together
  if (!std::isfinite(s[0])) {
    throw Error("fold " + std::to_string(f_) + " epoch " + std::to_string(epoch + 1) + ": the training loss is " +
                (std::isnan(s[0]) ? "NaN" : "infinite") + " (non-finite values in the cache " + opt.cache +
                ", or a learning rate too large: --lr " + std::to_string(opt.lr) + ")");
  }
  sums = {s[0], s[1], s[2]};
  if (job_.root && resumed_epoch) {
    sums.loss += part_.loss;
    sums.correct += part_.correct;
    sums.count += part_.count;
  }
  if (preempted == 0) return true;
  job_.batches->stop();
  const double t0 = now_s();
  save(epoch, step, false, sums, t);
  t.checkpoint += now_s() - t0;
  if (job_.root) {
    job_.log << "fold " << f_ << " epoch " << epoch + 1 << " step " << step << "/" << steps_ << ": signal " << preempted
             << " received; checkpoint written, exiting for requeue\n" << std::flush;
  }
  return false;
}

// ------------------------------------------------------------------------------ validation (COLLECTIVE)
Validation FoldRun::validate() {
  torch::NoGradGuard ng;
  model_->eval();
  std::vector<std::vector<std::uint64_t>> plan;
  const std::size_t vb = static_cast<std::size_t>(std::max<std::int64_t>(256, job_.opt.batch));
  for (std::size_t i = 0; i < val_ids_.size(); i += vb)
    plan.emplace_back(val_ids_.begin() + static_cast<std::ptrdiff_t>(i),
                      val_ids_.begin() + static_cast<std::ptrdiff_t>(std::min(val_ids_.size(), i + vb)));
  job_.batches->start(std::move(plan), 0, false);
  const int C = job_.classes_n();
  std::vector<torch::Tensor> probs;  // on the device until the end: one copy to the host, not one a batch
  while (auto b = job_.batches->next()) {
    torch::Tensor logits;
    {
      AutocastScope ac(job_.precision, job_.device);
      logits = model_->forward(b->x);
    }
    probs.push_back(torch::softmax(logits.to(torch::kFloat32), 1));
  }
  model_->train();
  std::vector<std::int32_t> pred;
  std::vector<float> scores;
  if (!probs.empty()) {
    const auto prob = torch::cat(probs).to(torch::kCPU).contiguous();
    const auto am = prob.argmax(1).to(torch::kInt32).contiguous();
    pred.assign(am.data_ptr<std::int32_t>(), am.data_ptr<std::int32_t>() + am.numel());
    scores.assign(prob.data_ptr<float>(), prob.data_ptr<float>() + prob.numel());
  }
  const auto all_ids = job_.world.allgatherv(val_ids_);
  const auto all_pred = job_.world.allgatherv(pred);
  const auto all_scores = job_.world.allgatherv(scores);
  // each validation sample exactly once
  std::vector<std::size_t> order(all_ids.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&](auto a, auto b) { return all_ids[a] < all_ids[b]; });
  Validation v;
  v.ids.reserve(order.size());
  for (auto i : order) v.ids.push_back(all_ids[i]);
  if (v.ids != val_all_) {
    std::size_t dup = 0;
    for (std::size_t i = 1; i < v.ids.size(); ++i) dup += v.ids[i] == v.ids[i - 1];
    throw Error("validation of fold " + std::to_string(f_) + ": gathered " + std::to_string(v.ids.size()) + " predictions (" +
                std::to_string(dup) + " duplicated) for the fold's " + std::to_string(val_all_.size()) +
                " validation samples: each must be predicted exactly once");
  }
  std::vector<int> truth;
  truth.reserve(order.size());
  const auto Cs = static_cast<std::size_t>(C);
  for (auto i : order) {
    v.pred.push_back(all_pred[i]);
    truth.push_back(job_.classes.index(job_.table.label[all_ids[i]]));
    v.scores.insert(v.scores.end(), all_scores.begin() + static_cast<std::ptrdiff_t>(i * Cs),
                    all_scores.begin() + static_cast<std::ptrdiff_t>((i + 1) * Cs));
  }
  v.metrics = compute_metrics(truth, v.pred, job_.classes);
  return v;
}

/// Every rank must hold the same parameters (they applied the same summed gradients): checked.
void FoldRun::check_replicas(int epoch) {
  last_hash_ = parameter_hash(*model_);
  if (job_.world.allreduce_min(last_hash_) != job_.world.allreduce_max(last_hash_)) {
    throw Error("fold " + std::to_string(f_) + " epoch " + std::to_string(epoch + 1) +
                ": model parameters differ between ranks (data-parallel replicas diverged)");
  }
}

// ------------------------------------------------------------------------------ the record (COLLECTIVE)
nlohmann::json FoldRun::epoch_record(int epoch, const EpochSums& sums, const Timing& t, double total) {
  const std::uint64_t rss = job_.world.allreduce_max(peak_rss_bytes());
  const auto dev_mem = cuda_peak_memory(job_.device.is_cuda() ? job_.device.index() : -1);
  std::uint64_t dev_peak = dev_mem ? dev_mem->peak_allocated : 0, dev_reserved = dev_mem ? dev_mem->peak_reserved : 0;
  dev_peak = job_.world.allreduce_max(dev_peak);
  dev_reserved = job_.world.allreduce_max(dev_reserved);
  if (!job_.root) return {};
  const auto& m = last_val_.metrics;
  nlohmann::json rec = {
      {"fold", f_},
      {"epoch", epoch + 1},
      {"epochs", job_.opt.epochs},
      {"lr", epoch_lr_},
      {"steps", steps_},
      {"global_batch", G_},
      {"samples", sums.count},
      {"loss", sums.count > 0 ? sums.loss / sums.count : 0.0},
      {"train_accuracy", sums.count > 0 ? sums.correct / sums.count : 0.0},
      {"val", {{"n", m.n}, {"oa", m.oa}, {"aa", m.aa}, {"kappa", m.kappa}}},
      {"samples_per_s", t.train() > 0 ? sums.count / t.train() : 0.0},
      {"peak_rss_bytes", rss},
      {"peak_device_bytes", dev_mem ? nlohmann::json(dev_peak) : nlohmann::json(nullptr)},
      {"peak_device_reserved_bytes", dev_mem ? nlohmann::json(dev_reserved) : nlohmann::json(nullptr)},
      {"device", job_.device.str()},
      {"precision", precision_name(job_.precision)},
      {"batches", job_.batches->kind()},
      {"clock", job_.clock->on_device() ? "cuda events" : "host"},
      {"ranks", job_.R},
      {"parameter_hash", hex64(last_hash_)},
      {"replicas_identical", true}};
  rec["time_s"] = t.to_json(total);
  rec["eta"] = total > 0 ? t.compute / total : 0.0;
  return rec;
}

void FoldRun::log_epoch(int epoch, const nlohmann::json& rec, const Timing& t, double total) {
  const auto& m = last_val_.metrics;
  std::ostringstream l;
  l << std::fixed << "fold " << f_ << " epoch " << epoch + 1 << "/" << job_.opt.epochs << std::setprecision(4) << " loss "
    << rec["loss"].get<double>() << " train_acc " << rec["train_accuracy"].get<double>() << " | val oa " << m.oa << " aa " << m.aa
    << " kappa " << m.kappa << " | " << std::setprecision(0) << rec["samples_per_s"].get<double>() << " samples/s | data "
    << std::setprecision(1) << 100 * t.data / total << "% compute " << 100 * t.compute / total << "% comm " << 100 * t.comm / total
    << "% idle " << 100 * t.idle / total << "% eval " << 100 * t.eval / total << "% ckpt " << 100 * t.checkpoint / total
    << "% eta " << std::setprecision(2) << t.compute / total << (job_.clock->on_device() ? " (GPU busy)" : "") << " | peak rss "
    << fmt_bytes(rec["peak_rss_bytes"].get<std::uint64_t>());
  if (!rec["peak_device_bytes"].is_null()) l << " gpu " << fmt_bytes(rec["peak_device_bytes"].get<std::uint64_t>());
  job_.log << l.str() << "\n" << std::flush;
}

// ------------------------------------------------------------------------------ results (rank 0)
void FoldRun::write_scores() {
  collective_step(job_.world, "writing fold scores", [&] {
    if (!job_.root) return;
    cache::write_npy(fdir_ + "/scores.npy", DType::f32,
                     {static_cast<std::uint64_t>(last_val_.ids.size()), static_cast<std::uint64_t>(job_.classes_n())},
                     last_val_.scores.data());
  });
}

void FoldRun::write_results() {
  nlohmann::json io = job_.io;  // a streamed shard's bytes read so far (cumulative over this job's folds)
  io["streamed_bytes_read_per_rank"] = job_.world.allgatherv(std::vector<std::uint64_t>{job_.shard->streamed_bytes()});
  collective_step(job_.world, "writing fold results", [&] {
    if (!job_.root) return;
    const auto& table = job_.table;
    FoldResult fr;
    fr.fold = f_;
    fr.metrics = last_val_.metrics;
    fr.predictions.reserve(last_val_.ids.size());
    for (std::size_t i = 0; i < last_val_.ids.size(); ++i) {
      const auto id = last_val_.ids[i];
      fr.predictions.push_back({id, table.scene[id], table.row[id], table.col[id], table.label[id], job_.classes.value(last_val_.pred[i])});
    }
    fr.extra = {{"epochs", history_}, {"io", io}, {"global_batch", G_}, {"steps_per_epoch", steps_},
                {"train_samples", n_train_}, {"batch_effective", G_}, {"train_seconds", train_s_}, {"device", job_.device.str()},
                {"backend", dist::backend_name(job_.backend)}, {"ranks", job_.R}};
    write_fold_results(job_.opt.out, job_.run, fr, table.scenes);  // metrics.json last
    job_.log << "fold " << f_ << ": oa " << std::setprecision(4) << last_val_.metrics.oa << " aa " << last_val_.metrics.aa
             << " kappa " << last_val_.metrics.kappa << " over " << last_val_.metrics.n << " validation samples -> " << fdir_ << "\n"
             << std::flush;
  });
}

}  // namespace hsipipe::train::detail
