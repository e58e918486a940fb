#include "train/predict.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <malloc.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <map>
#include <thread>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "cache/npy.hpp"
#include "cache/transform.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/outputs.hpp"
#include "train/resources.hpp"
#include "core/half.hpp"
#include "core/overlap.hpp"
#include "core/range.hpp"
#include "dist/collective.hpp"
#include "io/gdal_api.hpp"
#include "train/metrics.hpp"
#include "train/models.hpp"
#include "train/results.hpp"
#include "train/run.hpp"
#include "train/step.hpp"

namespace hsipipe::train {

namespace stdfs = std::filesystem;
using json = nlohmann::json;

namespace {

using dist::collective_step;

constexpr const char* kOutputSuffixes[] = {"_class.tif", "_class.img", "_class.hdr", "_preview.png", "_probabilities.npy",
                                           "_predict.json"};

/// File names predict writes into OUT (and their temporary names while it writes them).
bool is_predict_output(const std::string& name) {
  for (const char* suffix : kOutputSuffixes) {
    const std::string s(suffix);
    if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) return true;
  }
  return name.find(".tmp-") != std::string::npos;
}

/// OUT is absent, empty, or holds only earlier predict outputs; it lies in no cache nor in a run's own folders
/// (core/outputs.hpp); each scene's NAME is a file stem; an existing output of one of these scenes is replaced
/// only with --force.
void check_out_dir(const PredictOptions& o) {
  const std::string& out = o.out;
  for (const auto& s : o.scenes) outputs::check_file_stem(s.name, "predict --name (or the INI's [scene.NAME])");
  if (const auto owner = outputs::owner_of(out)) {
    if (owner->kind == outputs::Owner::Kind::cache || owner->own_file)
      throw ConfigError("--out " + out + ": lies in the " + (owner->kind == outputs::Owner::Kind::cache ? "cache " : "training run ") +
                        owner->dir + ", whose folders hold their own files only: choose a folder of its own for the maps");
  }
  std::error_code ec;
  if (!stdfs::exists(out, ec)) return;
  if (!stdfs::is_directory(out, ec)) throw ConfigError("--out " + out + ": exists and is not a folder");
  for (const auto& e : stdfs::directory_iterator(out, ec)) {
    const std::string n = e.path().filename().string();
    if (!is_predict_output(n) || e.is_directory())
      throw ConfigError("--out " + out + ": holds " + n + ", which is not an hsipipe predict output: choose an empty or new folder");
  }
  if (o.force) return;
  for (const auto& s : o.scenes)
    for (const char* suffix : kOutputSuffixes)
      if (stdfs::exists(stdfs::path(out) / (s.name + suffix), ec))
        throw ConfigError("--out " + out + ": already holds " + s.name + suffix + " (an earlier map of '" + s.name +
                          "'): --force replaces that scene's maps, or give another --name or --out");
}

// ---------------------------------------------------------------------------------------------
// Every rank: the models, the scenes

struct Models {
  std::vector<std::shared_ptr<Model>> nets;
  torch::Device device = torch::kCPU;
  Precision precision = Precision::fp32;
  cache::Preprocessor pre;
  cache::Border border = cache::Border::reflect;
  DType dtype = DType::f32;
  int bands = 0, patch = 1, classes = 0;
  std::int64_t batch = 1024;  ///< pixels per forward pass (--batch, or auto_batch)
};

/// --batch auto: on a GPU 1024; on a CPU the power of two (32 to 1024) that keeps the model's largest layer
/// output near 16 MiB (oneDNN's convolutions need no im2col copy, so the planner's workspace is left out). Larger batches' activations are fresh pages each time
/// (glibc maps blocks over 32 MiB anew): hybridsn on 512 x 512, 1 rank, 2 CPUs: 33 s at 1024, 17 s at 256,
/// 18.5 s at 64; hu1d 1.9 s at 1024, 5.2 s at 4096 (5 Dec 2026). The same for every rank: the model decides.
std::int64_t auto_batch(Model& net, const Models& m) {
  if (m.device.is_cuda()) return 1024;
  const torch::Tensor x = m.patch == 1 ? torch::zeros({1, m.bands}) : torch::zeros({1, m.bands, m.patch, m.patch});
  std::int64_t per_sample = 1;
  for (const LayerTrace& t : net.trace(x)) {
    std::int64_t elems = 1;
    for (std::size_t d = 1; d < t.out.size(); ++d) elems *= t.out[d];
    per_sample = std::max(per_sample, elems * static_cast<std::int64_t>(sizeof(float)));
  }
  std::int64_t b = 1024;
  while (b > 32 && b * per_sample > (std::int64_t{16} << 20)) b /= 2;
  return b;
}

Models load_models(const RunSpec& r, const PredictOptions& o, const dist::Comm& local) {
  Models m;
  m.pre = cache::preprocessor_from(r.manifest, o.run + "/preprocessing.json");
  m.border = cache::border_from_name(r.manifest.value("border", "reflect"));
  m.dtype = dtype_from_name(r.manifest.value("dtype", "float32")).value_or(DType::f32);
  const ModelInput in = model_input(r, o.run);
  m.bands = in.bands;
  m.classes = in.classes;
  m.patch = in.patch;
  m.device = detail::choose_device(o.device, local);
  m.precision = precision_from_name(r.precision);
  for (std::size_t i = 0; i < r.checkpoints.size(); ++i) {
    auto net = load_fold_model(r, i, o.run);
    net->to(m.device);
    m.nets.push_back(std::move(net));
  }
  m.batch = o.batch > 0 ? o.batch : auto_batch(*m.nets.front(), m);
  return m;
}

struct SceneInput {
  std::unique_ptr<io::Scene> scene;
  std::optional<io::LabelImage> labels;
  std::string name;
};

/// The scene against the data the model was trained on: band count, wavelengths where both have them, and
/// the source data type. FormatError naming the scene and what differs.
void check_fits(const io::Scene& s, const std::string& what, const RunSpec& r, const cache::Preprocessor& pre) {
  const auto& bands = r.manifest.at("bands");
  const std::size_t want = bands.value("source_bands", std::size_t{0});
  if (s.bands() != want)
    throw FormatError(what, "bands", "has " + std::to_string(s.bands()) + " bands; the run was trained on scenes of " + std::to_string(want) +
                                         " (preprocessing.json bands.source_bands)");
  const auto& info = s.band_info();
  const std::string units = bands.value("wavelength_units", "");
  if (!info.wavelengths.empty() && r.wavelengths.size() == pre.kept.size()) {
    if (!units.empty() && !info.wavelength_units.empty() && units != info.wavelength_units)
      throw FormatError(what, "wavelength units", info.wavelength_units + "; the run's scenes are in " + units);
    for (std::size_t k = 0; k < pre.kept.size(); ++k) {
      const double a = info.wavelengths[static_cast<std::size_t>(pre.kept[k])], b = r.wavelengths[k];
      if (std::fabs(a - b) > 1e-6 * std::max(1.0, std::fabs(b)))
        throw FormatError(what, "wavelength", "band " + std::to_string(pre.kept[k] + 1) + " is at " + std::to_string(a) + ", the run's at " +
                                                  std::to_string(b) + ": another sensor or band order");
    }
  }
  std::vector<std::string> types;
  for (const auto& sc : r.manifest.value("scenes", json::array()))
    if (sc.contains("source_type")) types.push_back(sc["source_type"].get<std::string>());
  const std::string mine(dtype_name(s.source_type()));
  if (!types.empty() && std::find(types.begin(), types.end(), mine) == types.end())
    throw FormatError(what, "data type", mine + "; the run was trained on " + types.front() +
                                             " scenes (values of another range would be normalised wrongly)");
}

SceneInput open_scene_checked(const PredictScene& ps, const RunSpec& r, const cache::Preprocessor& pre) {
  SceneInput in;
  io::SceneSpec spec = ps.scene;
  spec.role = io::SceneSpec::Role::scene;
  in.scene = io::open_scene(spec);
  in.name = ps.name;
  check_fits(*in.scene, spec.str(), r, pre);
  if (r.manifest.at("params").value("validity_bands", "all") == "kept")
    in.scene->set_validity_bands(cache::band_flags(pre.kept, in.scene->bands()));
  if (ps.labels) {
    in.labels = io::read_labels(*ps.labels);
    io::check_labels_match(*in.scene, *in.labels);
  }
  return in;
}

/// open_scene_checked, with the scene's list line (if any) appended to its errors.
SceneInput open_listed(const PredictScene& ps, const RunSpec& r, const cache::Preprocessor& pre) {
  try {
    return open_scene_checked(ps, r, pre);
  } catch (...) {
    if (ps.origin.empty()) throw;
    rethrow_with_context(ps.origin);
  }
}

// ---------------------------------------------------------------------------------------------
// Mapping one scene

/// Rows per chunk, the unit the ranks share: a function of the scene, the model and --batch only, so the chunks
/// (and the batches cut from each) are the same for any rank count, and so is the map. Enough chunks for the
/// ranks to share (about 64 per scene; one chunk of a 128-row scene left a second rank idle), each at least
/// 4 batches of pixels and 4 halos of rows (the halo is read twice), at most ~64 MiB of float32 source rows.
std::size_t chunk_rows(const io::Scene& s, const Models& m, std::int64_t batch) {
  const std::size_t H = s.rows(), W = std::max<std::size_t>(1, s.cols());
  const std::size_t cap = std::max<std::size_t>(1, (std::size_t{64} << 20) / (W * std::max<std::size_t>(1, s.bands()) * sizeof(float)));
  const std::size_t for_batches = (4 * static_cast<std::size_t>(std::max<std::int64_t>(1, batch)) + W - 1) / W;
  const std::size_t for_halo = 4 * static_cast<std::size_t>(std::max(0, m.patch - 1));
  return std::min(cap, std::max({(H + 63) / 64, for_batches, for_halo, std::size_t{1}}));
}

struct RankMap {
  std::size_t row0 = 0, rows = 0;
  std::vector<std::uint16_t> values;  ///< rows x cols
  std::vector<std::uint16_t> probs;   ///< rows x cols x C float16 (with --probabilities)
};

/// Class scores of n pixels of a window (softmax, averaged over the models), on the host [n, C].
torch::Tensor scores_of(const Models& m, const cache::RowWindow& w, const std::vector<std::size_t>& px, std::size_t i0, std::size_t n) {
  const auto B = static_cast<std::int64_t>(m.bands), p = static_cast<std::int64_t>(m.patch);
  torch::Tensor x = p == 1 ? torch::empty({static_cast<std::int64_t>(n), B}) : torch::empty({static_cast<std::int64_t>(n), B, p, p});
  float* dst = x.data_ptr<float>();
  const std::size_t per = static_cast<std::size_t>(B) * static_cast<std::size_t>(p) * static_cast<std::size_t>(p);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t r = px[i0 + i] / w.cols + w.row0, c = px[i0 + i] % w.cols;
    if (p == 1) std::copy(w.pixel(r, c), w.pixel(r, c) + B, dst + i * per);
    else cache::cut_patch(w, r, c, p, m.border, dst + i * per);
  }
  c10::InferenceMode inference;  // no autograd records, no version counters: cheaper than NoGradGuard
  const torch::Tensor xd = x.to(m.device);
  torch::Tensor sum;
  for (const auto& net : m.nets) {
    torch::Tensor logits;
    {
      AutocastScope ac(m.precision, m.device);
      logits = net->forward(xd);
    }
    const torch::Tensor s = torch::softmax(logits.to(torch::kFloat32), 1);
    sum = sum.defined() ? sum + s : s;
  }
  if (m.nets.size() > 1) sum = sum / static_cast<double>(m.nets.size());
  return sum.to(torch::kCPU).contiguous();
}

/// One chunk of a rank's rows: the transformed window (rows plus the patch halo) and its valid pixels.
struct Chunk {
  cache::RowWindow w;
  std::vector<std::size_t> px;  ///< window pixel index of each valid pixel of the chunk's rows, row-major
  std::size_t r0 = 0, r1 = 0;   ///< the chunk's rows
};

/// Reads rows [r0, r1) of `s` plus the halo and transforms them as decode did (values rounded to the cache dtype).
void read_chunk(const Models& m, const io::Scene& s, std::size_t r0, std::size_t r1, Chunk& c) {
  const std::size_t W = s.cols(), h = static_cast<std::size_t>(m.patch / 2);
  const std::size_t w0 = r0 >= h ? r0 - h : 0, w1 = std::min(s.rows(), r1 + h);
  std::vector<std::uint8_t> valid;
  c.w = cache::transformed_rows(s, m.pre, w0, w1, &valid);
  cache::round_to_dtype(c.w.data.data(), c.w.data.size(), m.dtype);  // the values training read from the cache
  c.r0 = r0;
  c.r1 = r1;
  c.px.clear();
  for (std::size_t i = (r0 - w0) * W; i < (r1 - w0) * W; ++i)
    if (valid[i]) c.px.push_back(i);
}

/// The classes (and with --probabilities the scores) of a chunk's valid pixels into `out`.
void classify_chunk(const Models& m, const Chunk& c, const PredictOptions& o, const std::vector<std::int32_t>& labels, RankMap& out) {
  const std::size_t W = c.w.cols, C = static_cast<std::size_t>(m.classes), base = (out.row0 - c.w.row0) * W;
  const auto bs = static_cast<std::size_t>(std::max<std::int64_t>(1, m.batch));
  for (std::size_t i0 = 0; i0 < c.px.size(); i0 += bs) {
    const std::size_t n = std::min(bs, c.px.size() - i0);
    const torch::Tensor sc = scores_of(m, c.w, c.px, i0, n);
    const torch::Tensor am = sc.argmax(1).to(torch::kInt64).contiguous();
    const float* sp = sc.data_ptr<float>();
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t at = c.px[i0 + i] - base;
      out.values[at] = static_cast<std::uint16_t>(labels[static_cast<std::size_t>(am.data_ptr<std::int64_t>()[i])]);
      if (o.probabilities) floats_to_halves(sp + i * C, out.probs.data() + at * C, C);
    }
  }
}

/// This rank's rows [row0, row0 + rows) of scene `in`: classes (label values, nodata where invalid). Chunk k+1
/// is read and transformed on this thread while a helper thread runs the model on chunk k (core/overlap.hpp);
/// the chunks and batches are the same for any rank count, so the map is too.
void map_rows(const Models& m, const SceneInput& in, const PredictOptions& o, std::uint16_t nodata, const std::vector<std::int32_t>& labels,
              RankMap& out) {
  const io::Scene& s = *in.scene;
  const std::size_t W = s.cols(), C = static_cast<std::size_t>(m.classes);
  out.values.assign(out.rows * W, nodata);
  if (o.probabilities) out.probs.assign(out.rows * W * C, 0);
  const std::size_t CR = chunk_rows(s, m, m.batch);
  overlap_rounds<Chunk>(
      (out.rows + CR - 1) / CR, true,
      [&](std::uint64_t k, Chunk& c) {
        const std::size_t r0 = out.row0 + k * CR;
        read_chunk(m, s, r0, std::min(out.row0 + out.rows, r0 + CR), c);
      },
      [&](std::uint64_t, Chunk& c, const std::exception_ptr& err) {
        if (err) std::rethrow_exception(err);
        classify_chunk(m, c, o, labels, out);
      });
}

// ---------------------------------------------------------------------------------------------
// Outputs (rank 0, except the probabilities, which every rank writes in place)

/// The colour and name of each value 0 .. max of a map (ENVI classes are 0 .. N - 1).
void colour_table(const std::vector<std::int32_t>& labels, std::uint16_t nodata, io::ClassRaster& r) {
  const std::size_t n = static_cast<std::size_t>(std::max<std::int32_t>(nodata, *std::max_element(labels.begin(), labels.end()))) + 1;
  r.colours.assign(n, {128, 128, 128});
  r.names.assign(n, "");
  r.colours[nodata] = {0, 0, 0};
  r.names[nodata] = "nodata";
  for (std::size_t i = 0; i < labels.size(); ++i) {
    const Rgb c = class_colour(static_cast<int>(i));
    r.colours[static_cast<std::size_t>(labels[i])] = {c.r, c.g, c.b};
    r.names[static_cast<std::size_t>(labels[i])] = "class " + std::to_string(labels[i]);
  }
  r.u16 = n > 256;
}

/// Counts per label, and with reference labels the map's accuracy on the pixels whose label is a class.
json map_record(const std::vector<std::uint16_t>& map, const SceneInput& in, const std::vector<std::int32_t>& labels, std::uint16_t nodata) {
  std::map<std::uint16_t, std::uint64_t> counts;
  for (auto v : map) ++counts[v];
  json c = json::object();
  for (const auto& [v, n] : counts) c[v == nodata ? std::string("nodata") : std::to_string(v)] = n;
  json rec = {{"counts", c}};
  if (!in.labels) return rec;
  const ClassIndex ci(labels);
  std::uint64_t n = 0, correct = 0, unmapped = 0;
  for (std::size_t i = 0; i < map.size(); ++i) {
    const std::int32_t t = in.labels->labels[i];
    if (!ci.contains(t)) continue;
    ++n;
    correct += map[i] == t;
    unmapped += map[i] == nodata;
  }
  rec["accuracy"] = {{"labels", in.labels->source}, {"labeled_pixels", n}, {"correct", correct}, {"nodata_pixels", unmapped},
                     {"oa", n ? static_cast<double>(correct) / static_cast<double>(n) : 0.0}};
  return rec;
}

void write_preview(const std::string& path, const std::vector<std::uint16_t>& map, const SceneInput& in, const RunSpec& r,
                   std::uint16_t nodata, const PredictOptions& o) {
  ClassGrid g{in.name, static_cast<std::uint32_t>(in.scene->rows()), static_cast<std::uint32_t>(in.scene->cols()), {}};
  const ClassIndex ci(r.label_values);
  g.index.resize(map.size());
  for (std::size_t i = 0; i < map.size(); ++i) g.index[i] = map[i] == nodata ? ClassGrid::kNone : ci.index(map[i]);
  const std::string title = o.ensemble ? "ENSEMBLE OF " + std::to_string(r.folds.size()) + " FOLDS (" + r.model + ")"
                                       : "FOLD " + std::to_string(r.folds[0]) + " (" + r.model + ")";
  write_class_png(path, title, {g}, r.label_values, "NODATA");
}

std::string prefix(const PredictOptions& o, const SceneInput& in) { return (stdfs::path(o.out) / in.name).string(); }

/// Rank 0: the class map as GeoTIFF and ENVI, the preview, the record (last).
void write_outputs(const std::vector<std::uint16_t>& map, const SceneInput& in, const RunSpec& r, const PredictOptions& o,
                   json rec) {
  const std::uint16_t nodata = map_nodata(r.label_values);
  io::ClassRaster cr;
  cr.rows = in.scene->rows();
  cr.cols = in.scene->cols();
  cr.values = map;
  cr.nodata = nodata;
  colour_table(r.label_values, nodata, cr);
  const auto& api = io::gdal_api();
  cr.georef = api.read_georef(in.scene->source_files());
  stdfs::create_directories(o.out);
  const std::string p = prefix(o, in);
  rec["georeferenced"] = cr.georef.has_value();
  rec["crs"] = cr.georef ? cr.georef->wkt : "";
  rec["nodata"] = nodata;
  rec["data_type"] = cr.u16 ? "uint16" : "uint8";
  // each file is written atomically; a failure part-way removes the ones this call wrote, so no map stands
  // without its record (a remote scene's ENVI output once failed after its GeoTIFF was written)
  try {
    api.write_class_raster(cr, "GTiff", p + "_class.tif");
    api.write_class_raster(cr, "ENVI", p + "_class.img");
    write_preview(p + "_preview.png", map, in, r, nodata, o);
    fs::write_text_atomic(p + "_predict.json", rec.dump(2) + "\n");
  } catch (...) {
    std::error_code ec;
    for (const char* suffix : kOutputSuffixes)
      if (std::string(suffix) != "_probabilities.npy") stdfs::remove(p + suffix, ec);
    throw;
  }
}

/// A file opened for writing, closed on destruction; pwrite() writes all bytes or throws IoError.
class WriteFile {
 public:
  WriteFile(const std::string& path, int flags) : path_(path), fd_(::open(path.c_str(), O_WRONLY | flags, 0644)) {
    if (fd_ < 0) throw IoError(path, "open", errno);
  }
  ~WriteFile() { ::close(fd_); }
  WriteFile(const WriteFile&) = delete;
  WriteFile& operator=(const WriteFile&) = delete;
  void pwrite(const void* data, std::size_t n, std::uint64_t offset) const {
    const auto* p = static_cast<const char*>(data);
    while (n > 0) {
      const ssize_t w = ::pwrite(fd_, p, std::min<std::size_t>(n, std::size_t{1} << 30), static_cast<off_t>(offset));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) throw IoError(path_, "pwrite", w < 0 ? errno : ENOSPC);
      p += w, n -= static_cast<std::size_t>(w), offset += static_cast<std::uint64_t>(w);
    }
  }
  void truncate(std::uint64_t bytes) const {
    if (::ftruncate(fd_, static_cast<off_t>(bytes)) != 0) throw IoError(path_, "ftruncate", errno);
  }
  void sync() const {
    if (::fsync(fd_) != 0) throw IoError(path_, "fsync", errno);
  }

 private:
  std::string path_;
  int fd_;
};

/// COLLECTIVE. OUT/NAME_probabilities.npy: rank 0 makes the file at full size under a temporary name, every
/// rank writes its rows in place, rank 0 makes it durable and renames it.
void write_probabilities(const dist::Comm& world, const RankMap& mine, const SceneInput& in, const PredictOptions& o, std::size_t C) {
  const std::string path = prefix(o, in) + "_probabilities.npy";
  const std::string tmp = world.bcast_string(path + ".tmp-" + std::to_string(::getpid()));
  const std::string header = cache::npy_header_bytes(DType::f16, {in.scene->rows(), in.scene->cols(), C});
  const std::uint64_t bytes = header.size() + in.scene->rows() * in.scene->cols() * C * 2;
  collective_step(world, "creating " + path, [&] {
    if (world.rank() != 0) return;
    stdfs::create_directories(o.out);
    const WriteFile f(tmp, O_CREAT | O_TRUNC);
    f.truncate(bytes);
    f.pwrite(header.data(), header.size(), 0);
  });
  collective_step(world, "writing " + path, [&] {
    const WriteFile f(tmp, 0);
    f.pwrite(mine.probs.data(), mine.probs.size() * 2, header.size() + mine.row0 * in.scene->cols() * C * 2);
    f.sync();
  });
  collective_step(world, "publishing " + path, [&] {
    if (world.rank() != 0) return;
    if (std::rename(tmp.c_str(), path.c_str()) != 0) throw IoError(path, "rename", errno);
  });
}

/// COLLECTIVE. One scene: each rank its chunks of rows, the map gathered on rank 0 and written there.
json predict_scene(const dist::Comm& world, const Models& m, const SceneInput& in, const RunSpec& r, const PredictOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::size_t H = in.scene->rows(), W = in.scene->cols(), CR = chunk_rows(*in.scene, m, m.batch);
  const Range chunks = split_range((H + CR - 1) / CR, world.size(), world.rank());
  RankMap mine;
  mine.row0 = std::min(H, chunks.begin * CR);
  mine.rows = std::min(H, chunks.end * CR) - mine.row0;
  const std::uint16_t nodata = map_nodata(r.label_values);
  collective_step(world, "mapping " + in.name, [&] { map_rows(m, in, o, nodata, r.label_values, mine); });
  std::vector<std::uint8_t> bytes(mine.values.size() * 2);  // as bytes: rank order is row order
  std::memcpy(bytes.data(), mine.values.data(), bytes.size());
  bytes = world.allgatherv(bytes);
  std::vector<std::uint16_t> map(bytes.size() / 2);
  std::memcpy(map.data(), bytes.data(), bytes.size());
  if (o.probabilities) write_probabilities(world, mine, in, o, static_cast<std::size_t>(m.classes));
  json rec;
  collective_step(world, "writing the maps of " + in.name, [&] {
    if (world.rank() != 0) return;
    rec = map_record(map, in, r.label_values, nodata);
    rec.update({{"format", "hsipipe-predict"}, {"version", 1}, {"scene", in.scene->source_files().empty() ? in.name : in.scene->source_files()[0]},
                {"name", in.name}, {"rows", H}, {"cols", W}, {"run", stdfs::absolute(o.run).string()}, {"folds", r.folds},
                {"ensemble", o.ensemble}, {"model", r.model}, {"precision", r.precision},
                {"cache_data_checksum", r.manifest.value("data_checksum", "")}, {"label_values", r.label_values},
                {"ranks", world.size()}, {"batch", m.batch}, {"device", m.device.str()}, {"probabilities", o.probabilities},
                {"seconds", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()}});
    write_outputs(map, in, r, o, rec);
  });
  return rec;
}

/// glibc's malloc hands a batch's activations (MiBs each) back to the kernel when they are freed, and the next
/// forward pass faults them in again, a page at a time: keep freed memory in the process instead (blocks up to
/// 32 MiB from the heap, no trimming below 1 GiB). hybridsn, 1024 x 1024, 2 ranks, batch 256: 80.1 s with
/// glibc's defaults, 56.4 s with these (5 Dec 2026). Process-wide; predict is the whole process.
void keep_freed_memory() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_TOP_PAD, 64 << 20);
}

}  // namespace


int predict(const PredictOptions& o, const dist::Comm& world, std::ostream& log) {
  keep_freed_memory();
  const dist::Comm local = world.split_shared();  // COLLECTIVE
  std::string text;
  collective_step(world, "reading the run", [&] {
    if (o.scenes.empty()) throw ConfigError("hsipipe predict: no --scene given");
    if (world.rank() != 0) return;
    check_out_dir(o);
    text = read_run(o.run, o.fold, o.ensemble).to_json().dump();
  });
  const RunSpec r = RunSpec::from_json(json::parse(world.bcast_string(text)));
  const std::size_t threads = dist::compute_threads(local);  // COLLECTIVE (local)
  if (!std::getenv("OMP_NUM_THREADS")) torch::set_num_threads(static_cast<int>(threads));
  Models m;
  collective_step(world, "loading the models", [&] { m = load_models(r, o, local); });
  if (world.rank() == 0 && !o.quiet && !m.device.is_cuda()) log << reference_blas_note();
  // Every scene is checked before any is mapped (a bad one on line 250 of a list fails now, not hours on), but
  // only the one being mapped is held open: a list of hundreds of scenes keeps a few files open, and one
  // label raster in memory. The first stays open from its check to its map (one scene: opened once).
  SceneInput first;
  collective_step(world, "checking the scenes", [&] {
    for (std::size_t i = 0; i < o.scenes.size(); ++i) {
      SceneInput in = open_listed(o.scenes[i], r, m.pre);
      if (i == 0) first = std::move(in);
    }
  });
  for (std::size_t i = 0; i < o.scenes.size(); ++i) {
    SceneInput in = i == 0 ? std::move(first) : SceneInput{};
    if (i > 0) collective_step(world, "opening scene " + o.scenes[i].name, [&] { in = open_listed(o.scenes[i], r, m.pre); });
    if (world.rank() == 0 && !o.quiet && o.scenes.size() > 1) log << "scene " << i + 1 << "/" << o.scenes.size() << ": " << in.name << "\n" << std::flush;
    const json rec = predict_scene(world, m, in, r, o);
    if (world.rank() != 0 || o.quiet) continue;
    log << "hsipipe predict: " << in.name << " (" << in.scene->rows() << " x " << in.scene->cols() << ") with " << r.model
        << (o.ensemble ? ", ensemble of " + std::to_string(r.folds.size()) + " folds" : ", fold " + std::to_string(r.folds[0])) << ", "
        << world.size() << " rank(s), " << std::fixed << std::setprecision(2) << rec.value("seconds", 0.0) << " s -> "
        << prefix(o, in) << "_class.tif, _class.img/.hdr, _preview.png" << (o.probabilities ? ", _probabilities.npy" : "")
        << (rec.value("georeferenced", false) ? " (georeferenced)" : " (no georeferencing in the source)") << "\n";
    if (rec.contains("accuracy"))
      log << "  accuracy on " << rec["accuracy"]["labeled_pixels"].get<std::uint64_t>() << " labeled pixels: OA " << std::setprecision(4)
          << rec["accuracy"]["oa"].get<double>() << "\n";
  }
  return 0;
}

}  // namespace hsipipe::train
