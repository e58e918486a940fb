// io/scene_pool: scenes opened on demand, at most N readers open at once (see scene_pool.hpp).
#include "io/scene_pool.hpp"

#include <algorithm>
#include <list>
#include <mutex>
#include <utility>

#include "core/error.hpp"
#include "io/remote_path.hpp"

namespace hsipipe::io {

class PooledScene;

struct ScenePool::State {
  explicit State(std::size_t n) : max_open(std::max<std::size_t>(1, n)) {}
  const std::size_t max_open;
  std::mutex mu;
  std::list<PooledScene*> lru;  ///< the scenes whose reader is open, least recently used first
  std::size_t peak = 0;
  std::uint64_t opens = 0;

  /// Under mu: closes the least recently used readers not in use (and not `keep`'s) until one more fits.
  void make_room(const PooledScene* keep);
  /// Under mu: `s` (now open) joins the list.
  void added(PooledScene* s);
};

namespace {
bool is_remote(const std::string& p) {
  return is_remote_path(p) || p.rfind("/vsi", 0) == 0 || p.find("://") != std::string::npos;
}
}  // namespace

class PooledScene final : public Scene {
 public:
  PooledScene(std::shared_ptr<ScenePool::State> pool, SceneSpec spec, std::unique_ptr<Scene> first)
      : pool_(std::move(pool)), spec_(std::move(spec)), inner_(std::move(first)) {
    const Scene& s = *inner_;
    rows_ = s.rows(), cols_ = s.cols(), bands_ = s.bands(), block_rows_ = s.block_rows();
    type_ = s.source_type();
    band_info_ = s.band_info();
    ignore_ = s.ignore_value();
    classes_ = s.declared_classes();
    variable_ = s.variable(), image_size_ = s.image_size(), format_ = s.format();
    uses_hdf5_ = s.uses_hdf5(), rereads_ = s.rereads_cheaply();
    files_ = s.source_files();
  }
  ~PooledScene() override {
    std::lock_guard<std::mutex> lock(pool_->mu);
    if (inner_) pool_->lru.erase(where_);
  }

  std::size_t rows() const override { return rows_; }
  std::size_t cols() const override { return cols_; }
  std::size_t bands() const override { return bands_; }
  DType source_type() const override { return type_; }
  const BandInfo& band_info() const override { return band_info_; }
  std::optional<double> ignore_value() const override { return ignore_; }
  std::optional<std::uint64_t> declared_classes() const override { return classes_; }
  std::string variable() const override { return variable_; }
  std::string image_size() const override { return image_size_; }
  std::string format() const override { return format_; }
  std::size_t block_rows() const override { return block_rows_; }
  bool uses_hdf5() const override { return uses_hdf5_; }
  bool rereads_cheaply() const override { return rereads_; }
  std::vector<std::string> source_files() const override { return files_; }

  void set_validity_bands(std::vector<std::uint8_t> counts) override {
    Scene::set_validity_bands(std::move(counts));  // checks and stores them (all bands: none)
    const std::uint8_t* v = validity_bands();
    std::lock_guard<std::mutex> lock(pool_->mu);
    validity_ = v ? std::vector<std::uint8_t>(v, v + bands_) : std::vector<std::uint8_t>();
    if (inner_) inner_->set_validity_bands(validity_);
  }
  void read_rows(std::size_t r0, std::size_t r1, float* out) const override {
    const Use use(*this);
    use.scene->read_rows(r0, r1, out);
  }
  std::vector<std::pair<std::string, std::string>> details() const override {
    const Use use(*this);
    return use.scene->details();
  }
  std::uint64_t bytes_read() const override {
    std::lock_guard<std::mutex> lock(pool_->mu);
    return retired_bytes_ + (inner_ ? inner_->bytes_read() : 0);
  }

 private:
  friend struct ScenePool::State;
  friend class ScenePool;

  /// The reader, open and pinned for the lifetime of a Use (never closed meanwhile).
  struct Use {
    explicit Use(const PooledScene& s) : self(const_cast<PooledScene&>(s)) { scene = self.pin(); }
    ~Use() { self.unpin(); }
    Use(const Use&) = delete;
    Use& operator=(const Use&) = delete;
    PooledScene& self;
    Scene* scene = nullptr;
  };

  Scene* pin() {
    std::lock_guard<std::mutex> lock(pool_->mu);
    if (!inner_) reopen();
    else pool_->lru.splice(pool_->lru.end(), pool_->lru, where_);  // most recently used
    ++pins_;
    return inner_.get();
  }
  void unpin() {
    std::lock_guard<std::mutex> lock(pool_->mu);
    --pins_;
  }
  /// Under the pool's mutex: the reader opened again, checked against what it said the first time.
  void reopen() {
    pool_->make_room(this);
    std::unique_ptr<Scene> s = open_scene(spec_);
    if (s->rows() != rows_ || s->cols() != cols_ || s->bands() != bands_)
      throw FormatError(spec_.str(), "dimensions",
                        "changed while it was read: " + std::to_string(rows_) + " x " + std::to_string(cols_) + " x " +
                            std::to_string(bands_) + " when opened, " + std::to_string(s->rows()) + " x " +
                            std::to_string(s->cols()) + " x " + std::to_string(s->bands()) + " now");
    if (!validity_.empty()) s->set_validity_bands(validity_);
    inner_ = std::move(s);
    ++pool_->opens;
    pool_->added(this);
  }
  /// Under the pool's mutex: the reader closed (its bytes read kept).
  void close_reader() {
    retired_bytes_ += inner_->bytes_read();
    inner_.reset();
  }

  std::shared_ptr<ScenePool::State> pool_;
  SceneSpec spec_;
  std::unique_ptr<Scene> inner_;  // guarded by pool_->mu, like the members below
  std::list<PooledScene*>::iterator where_;
  int pins_ = 0;
  std::uint64_t retired_bytes_ = 0;
  std::vector<std::uint8_t> validity_;
  // what the reader said when first opened
  std::size_t rows_ = 0, cols_ = 0, bands_ = 0, block_rows_ = 1;
  DType type_{};
  BandInfo band_info_;
  std::optional<double> ignore_;
  std::optional<std::uint64_t> classes_;
  std::string variable_, image_size_, format_;
  bool uses_hdf5_ = true, rereads_ = false;
  std::vector<std::string> files_;
};

void ScenePool::State::make_room(const PooledScene* keep) {
  for (auto it = lru.begin(); lru.size() >= max_open && it != lru.end();) {
    PooledScene* s = *it;
    if (s == keep || s->pins_ > 0) {
      ++it;
      continue;
    }
    s->close_reader();
    it = lru.erase(it);
  }
}

void ScenePool::State::added(PooledScene* s) {
  s->where_ = lru.insert(lru.end(), s);
  peak = std::max(peak, lru.size());
}

ScenePool::ScenePool(std::size_t max_open) : state_(std::make_shared<State>(max_open)) {}
ScenePool::~ScenePool() = default;

std::unique_ptr<Scene> ScenePool::open(const SceneSpec& spec) {
  if (is_remote(spec.path)) return open_scene(spec);
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->make_room(nullptr);  // before this open: the bound holds while it opens too
  }
  auto s = std::make_unique<PooledScene>(state_, spec, open_scene(spec));
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->make_room(s.get());  // another thread may have opened one meanwhile
  ++state_->opens;
  state_->added(s.get());
  return s;
}

std::size_t ScenePool::max_open() const { return state_->max_open; }
std::size_t ScenePool::open_now() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->lru.size();
}
std::size_t ScenePool::peak_open() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->peak;
}
std::uint64_t ScenePool::opens() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->opens;
}

}  // namespace hsipipe::io
