#pragma once
// io/scene_pool: scenes whose readers are opened when their rows are read and closed again, so that a
// decode (or verify) of hundreds of scenes (decode --scene-list) keeps a bounded number of scene files open.
//
// ScenePool::open(spec) opens the scene at once (its errors are open_scene's, then) and keeps what the Scene
// interface says about it (size, bands, band info, nodata, format, files); the reader itself stays open only
// while the pool has room: at most max_open() readers of the pool's scenes are open at once, the least recently
// used closed first. A later read_rows() (or details(), source_identity()) of a closed scene opens its reader
// again. A decode visits its blocks scene by scene, so each pass opens each of the rank's scenes about once.
// A reader in use on a thread (inside read_rows) is never closed: the bound is exceeded only while more threads
// read different scenes at once than max_open() allows (decode reads on at most two).
//
// Remote scenes (http(s)://, s3://, /vsicurl/ ...) are returned as open_scene opened them: they hold no file,
// and reopening one would repeat its requests. A scene reopened with other dimensions (the file replaced
// meanwhile) is a FormatError naming it. Label rasters are read whole (read_labels) and closed at once.
//
// Thread-safety: as io::Scene's (read_rows from several threads); the pool's bookkeeping takes one mutex. A
// pooled scene may outlive its ScenePool object.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "io/scene.hpp"

namespace hsipipe::io {

/// Default bound on the readers a pool keeps open (decode and verify; docs/COMMANDS.md states it).
inline constexpr std::size_t kMaxOpenScenes = 8;

class ScenePool {
 public:
  explicit ScenePool(std::size_t max_open = kMaxOpenScenes);
  ~ScenePool();
  ScenePool(const ScenePool&) = delete;
  ScenePool& operator=(const ScenePool&) = delete;

  /// Opens `spec` now (throws what open_scene throws); the Scene returned reopens its reader on demand.
  std::unique_ptr<Scene> open(const SceneSpec& spec);

  std::size_t max_open() const;
  /// Readers open now, and the most that were open at once.
  std::size_t open_now() const;
  std::size_t peak_open() const;
  /// Readers opened so far (first opens and reopens).
  std::uint64_t opens() const;

  struct State;  // shared with the pooled scenes (scene_pool.cpp)

 private:
  std::shared_ptr<State> state_;
};

}  // namespace hsipipe::io
