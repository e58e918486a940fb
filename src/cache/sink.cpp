#include "cache/sink.hpp"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <exception>
#include <future>

#include "cache/h5util.hpp"
#include "cache/npy.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/test_hook.hpp"

namespace hsipipe::cache {

std::uint64_t ArraySpec::item_bytes() const {
  std::uint64_t n = dtype_size(dtype);
  for (std::size_t i = 1; i < shape.size(); ++i) n *= shape[i];
  return n;
}

namespace {

class FdOwner {
 public:
  FdOwner() = default;
  explicit FdOwner(int fd) : fd_(fd) {}
  ~FdOwner() { if (fd_ >= 0) ::close(fd_); }
  FdOwner(FdOwner&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  FdOwner& operator=(FdOwner&& o) noexcept {
    if (this != &o) { if (fd_ >= 0) ::close(fd_); fd_ = std::exchange(o.fd_, -1); }
    return *this;
  }
  int get() const noexcept { return fd_; }
  int release() noexcept { return std::exchange(fd_, -1); }

 private:
  int fd_ = -1;
};

void pwrite_all(int fd, const char* p, std::uint64_t n, std::uint64_t off, const std::string& path) {
  while (n > 0) {
    const ssize_t w = ::pwrite(fd, p, n, static_cast<off_t>(off));
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) throw IoError(path, "pwrite", errno);
    p += w;
    off += static_cast<std::uint64_t>(w);
    n -= static_cast<std::uint64_t>(w);
  }
}

/// Allocates the file's blocks up front (fallocate): a disk too small fails here, naming the file, before
/// any rank writes, and the ranks' stores into one file then need no block reservation each (ext4's
/// delayed allocation takes per-inode locks for every new block: two ranks writing one file took turns;
/// bench_decode_ab.sh with a temporary switch, 2 Dec 2026, h5 2 ranks: min 0.570 -> 0.498 s, median 0.628
/// -> 0.558 s; npy 1 rank median 0.812 -> 0.723 s). A file system without fallocate (EOPNOTSUPP) allocates
/// as the pages are written.
/// `unless_tmpfs`: not on tmpfs (/dev/shm on a diskless node), whose fallocate allocates and zeroes the
/// memory itself, on the one rank that creates the file; there the npy sink's place() faults each rank's
/// own pages in, in parallel, and a full tmpfs fails there, rank-local (the benchmark's npy decode with
/// TMPDIR=/dev/shm, bench_decode_ab.sh with a temporary switch, 2 Dec 2026, 6 pairs: 2 ranks min 0.532 ->
/// 0.518 s, median 0.571 -> 0.534 s; 1 rank within noise). h5 reserves on tmpfs too: a full disk inside
/// HDF5's collective write would fail one rank in the middle of a collective call.
void reserve_blocks(int fd, std::uint64_t bytes, const std::string& path, int mode, bool unless_tmpfs) {
  struct statfs fs {};
  if (bytes == 0 || (unless_tmpfs && ::fstatfs(fd, &fs) == 0 && fs.f_type == TMPFS_MAGIC)) return;
  int rc;
  do rc = ::fallocate(fd, mode, 0, static_cast<off_t>(bytes));
  while (rc != 0 && errno == EINTR);
  const int e = errno;
  if (rc != 0 && e != EOPNOTSUPP && e != ENOSYS)
    throw IoError(path, "allocating " + std::to_string(bytes) + " bytes (fallocate)", e);
}

/// fsyncs files on a thread of its own, so that the fsync that makes a cache durable before it is published
/// (finish()) waits only for what was written since, and the wait for the disk runs beside the checksum and
/// the manifest (in the benchmark's 2-rank npy decode the disk is still writing then: its phases line shows
/// 0.05-0.13 s of "checksum + manifest + publish", against 0.02 s on 1 rank). The descriptors must stay open
/// until wait(), which gives the first failure (err 0: none): the kernel reports a writeback error to one
/// fsync only, so it must not be lost here.
class EarlyFlush {
 public:
  EarlyFlush() = default;
  EarlyFlush(const EarlyFlush&) = delete;
  EarlyFlush& operator=(const EarlyFlush&) = delete;
  ~EarlyFlush() {
    if (job_.valid()) job_.wait();
  }
  struct Failure {
    std::string path;
    int err = 0;  ///< 0: none
  };
  void start(std::vector<std::pair<std::string, int>> files) noexcept {
    try {
      job_ = std::async(std::launch::async, [files = std::move(files)] {
        for (const auto& [p, fd] : files)
          if (::fsync(fd) != 0) return Failure{p, errno};
        return Failure{};
      });
    } catch (const std::exception&) {  // no thread to be had: finish() makes it durable, only later
    }
  }
  Failure wait() { return job_.valid() ? job_.get() : Failure{}; }

 private:
  std::future<Failure> job_;
};

// ------------------------------------------------------------------------------------------------
class NpySink final : public Sink {
 public:
  NpySink(const std::string& dir, const std::vector<ArraySpec>& arrays, const dist::Comm& comm)
      : dir_(dir), arrays_(arrays), comm_(comm), network_(fs::network_fs_type(dir).has_value()) {
    collective_step(comm, "creating the .npy files", [&] {
      if (comm.rank() != 0) return;
      for (const auto& a : arrays_) {
        const std::string p = path(a);
        FdOwner fd(::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
        if (fd.get() < 0) throw IoError(p, "create", errno);
        const std::string hdr = npy_header_bytes(a.dtype, a.shape);
        pwrite_all(fd.get(), hdr.data(), hdr.size(), 0, p);
        const std::uint64_t total = hdr.size() + a.shape.at(0) * a.item_bytes();
        if (::ftruncate(fd.get(), static_cast<off_t>(total)) != 0) throw IoError(p, "ftruncate", errno);
        reserve_blocks(fd.get(), total, p, 0, true);
      }
    });
    collective_step(comm, "opening the .npy files", [&] {
      for (const auto& a : arrays_) {
        const std::string p = path(a);
        FdOwner fd(::open(p.c_str(), O_RDWR | O_CLOEXEC));
        if (fd.get() < 0) throw IoError(p, "open", errno);
        offsets_.push_back(npy_header_bytes(a.dtype, a.shape).size());
        // Ranks build their items in the file's pages (place()): a pwrite would copy them once more and,
        // worse, hold the file's inode lock while copying, so the ranks' writes to one file would queue.
        // Without a mapping (a file system that refuses it; tests: HSIPIPE_TEST_NPY_PWRITE=1) write() copies.
        // Never mapped on a network file system: there ranks on other nodes write through page caches of
        // their own, and an NFS client writes a dirty mapped page back whole, over the bytes a rank on
        // another node wrote into the same page (pwrite's dirty ranges are exact).
        const std::uint64_t total = offsets_.back() + a.shape.at(0) * a.item_bytes();
        const bool map = total > 0 && !network_ && !test_switch("HSIPIPE_TEST_NPY_PWRITE").value_or(false);
        void* m = map ? ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0) : MAP_FAILED;
        maps_.emplace_back(m == MAP_FAILED ? nullptr : static_cast<char*>(m), total);
        fds_.push_back(std::move(fd));
      }
    });
  }

  ~NpySink() override { unmap(); }

  bool independent_writes() const override { return true; }  // pwrite / in-place stores, rank-local
  bool places(int array) const override { return maps_.at(static_cast<std::size_t>(array)).first != nullptr; }

  void* place(int array, std::uint64_t first, std::uint64_t n) override {
    const auto i = static_cast<std::size_t>(array);
    const auto& a = arrays_.at(i);
    if (!maps_[i].first || n == 0) return nullptr;
    if (first + n > a.shape[0]) throw Error(path(a) + ": write past the end of the array (internal error)");
    char* p = maps_[i].first + offsets_[i] + first * a.item_bytes();
    // Fault the range's pages in writable now, in one call, so that a full disk is an error here and not
    // a SIGBUS in the middle of a store. Kernels before 5.14 lack it (EINVAL): the stores fault them in.
    static const std::uintptr_t page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
    const auto b = reinterpret_cast<std::uintptr_t>(p) & ~(page - 1);
    const auto e = reinterpret_cast<std::uintptr_t>(p) + n * a.item_bytes();
    if (::madvise(reinterpret_cast<void*>(b), e - b, MADV_POPULATE_WRITE) != 0 && errno != EINVAL) {
      const int err = errno;
      const std::string what = "mapping items " + std::to_string(first) + ".." + std::to_string(first + n) + " for writing";
      // a page the file system cannot give (a full tmpfs, where no blocks were reserved) is EFAULT here
      if (err == EFAULT) throw IoError(path(a), what + " failed: the file system cannot give the pages (no space left?)");
      throw IoError(path(a), what, err);
    }
    return p;
  }

  void write(int array, std::uint64_t first, std::uint64_t n, const void* data) override {
    if (n == 0) return;
    const auto i = static_cast<std::size_t>(array);
    const auto& a = arrays_.at(i);
    const std::uint64_t ib = a.item_bytes();
    if (first + n > a.shape[0]) throw Error(path(a) + ": write past the end of the array (internal error)");
    const int fd = fds_[i].get();
    const std::uint64_t off = offsets_[i] + first * ib;
    const bool in_place = maps_[i].first && data == maps_[i].first + off;
    if (!in_place) pwrite_all(fd, static_cast<const char*>(data), n * ib, off, path(a));
    // Built in place: drop this range's whole pages from our page tables (the data stays in the page
    // cache, dirty) before asking for writeback. Writeback write-protects every page still mapped, one TLB
    // flush per page (a cross-CPU one once MPI's threads have run on the other core): with the pages
    // mapped, that was a quarter of the 2-rank decode's CPU time on a virtual machine (perf, 1 Dec 2026);
    // dropping them: the benchmark's npy decode, 2 ranks, 1.93 -> 1.53 s min wall (4 pairs in rotated
    // order), 1 rank unchanged.
    // MADV_DONTNEED, not munmap: the address range stays ours until finish().
    if (in_place) {
      static const std::uint64_t page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
      const auto base = reinterpret_cast<std::uintptr_t>(maps_[i].first);
      const std::uint64_t b = (off + page - 1) / page * page, e = (off + n * ib) / page * page;
      if (e > b) (void)::madvise(reinterpret_cast<void*>(base + b), e - b, MADV_DONTNEED);
    }
    // Start writing this range back to disk now, beside the decode, so that finish()'s fsync has little
    // left to wait for. Advisory: a file system without it (EINVAL, ESPIPE, ENOSYS) just skips it.
    (void)::sync_file_range(fd, static_cast<off_t>(off), static_cast<off_t>(n * ib), SYNC_FILE_RANGE_WRITE);
    bytes_written_ += n * ib;
  }

  void write_small(const ArraySpec& spec, const void* data) override {
    // Rank 0 writes the whole file now and makes it durable with the others in finish(): a file of its own
    // (tmp + fsync + rename) is not needed inside the unpublished directory, and each fsync waited for a
    // journal commit of its own.
    collective_step(comm_, "writing " + spec.name + ".npy", [&] {
      if (comm_.rank() != 0) return;
      const std::string p = path(spec);
      FdOwner fd(::open(p.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
      if (fd.get() < 0) throw IoError(p, "create", errno);
      const std::string bytes = npy_file_bytes(spec.dtype, spec.shape, data);
      pwrite_all(fd.get(), bytes.data(), bytes.size(), 0, p);
      (void)::sync_file_range(fd.get(), 0, 0, SYNC_FILE_RANGE_WRITE);  // advisory, as in write()
      small_.emplace_back(p, std::move(fd));
      bytes_written_ += spec.shape.empty() ? 0 : spec.shape[0] * spec.item_bytes();
    });
  }

  void start_flush() override {  // rank 0, which fsyncs in finish(): every file it has so far
    if (comm_.rank() != 0) return;
    std::vector<std::pair<std::string, int>> files;
    for (std::size_t i = 0; i < fds_.size(); ++i) files.emplace_back(path(arrays_[i]), fds_[i].get());
    for (const auto& [p, fd] : small_) files.emplace_back(p, fd.get());
    early_.start(std::move(files));
  }

  void finish(const std::string&) override {
    // After the barrier every rank's writes are done. One fsync per file, on rank 0, makes all of them
    // durable: fsync covers the file's pages whoever wrote them, on one node. On a network file system
    // every rank fsyncs its own writes, which may be in another node's page cache.
    unmap();  // the pages stay dirty in the page cache, where fsync finds them
    comm_.barrier();
    collective_step(comm_, "flushing the .npy files", [&] {
      if (const auto f = early_.wait(); f.err != 0) throw IoError(f.path, "fsync", f.err);
      for (std::size_t i = 0; i < fds_.size(); ++i) {
        const int fd = fds_[i].release();
        const bool ok = (comm_.rank() != 0 && !network_) || ::fsync(fd) == 0;
        const int e = errno;
        if (::close(fd) != 0 || !ok) throw IoError(path(arrays_[i]), "fsync/close", ok ? errno : e);
      }
      for (auto& [p, fd] : small_)  // rank 0's only
        if (::fsync(fd.get()) != 0) throw IoError(p, "fsync", errno);
      small_.clear();
    });
  }

 private:
  std::string path(const ArraySpec& a) const { return dir_ + "/" + a.name + ".npy"; }
  std::string dir_;
  std::vector<ArraySpec> arrays_;
  const dist::Comm& comm_;
  bool network_;  ///< dir_ on a network file system (fs::network_fs_type): pwrite, and every rank fsyncs
  void unmap() noexcept {
    for (auto& [p, n] : maps_)
      if (p) ::munmap(p, n), p = nullptr;
  }
  std::vector<FdOwner> fds_;
  std::vector<std::pair<std::string, FdOwner>> small_;  ///< write_small()'s files, rank 0: fsynced in finish()
  EarlyFlush early_;  ///< declared after the descriptors it uses: destroyed (joined) before them
  std::vector<std::uint64_t> offsets_;
  std::vector<std::pair<char*, std::uint64_t>> maps_;  ///< whole-file shared mappings (nullptr: none)
};

// ------------------------------------------------------------------------------------------------
class H5Sink final : public Sink {
 public:
  H5Sink(const std::string& dir, const std::vector<ArraySpec>& arrays, const dist::Comm& comm)
      : path_(dir + "/cache.h5"), arrays_(arrays), comm_(comm) {
    h5::Id fapl(HSIPIPE_H5(H5Pcreate(H5P_FILE_ACCESS), path_));
    HSIPIPE_H5(H5Pset_fapl_mpio(fapl, comm.get(), MPI_INFO_NULL), path_);
    HSIPIPE_H5(H5Pset_libver_bounds(fapl, H5F_LIBVER_V18, H5F_LIBVER_V110), path_);
    HSIPIPE_H5(H5Pset_all_coll_metadata_ops(fapl, true), path_);
    HSIPIPE_H5(H5Pset_coll_metadata_write(fapl, true), path_);
    h5::Id fcpl(HSIPIPE_H5(H5Pcreate(H5P_FILE_CREATE), path_));
    HSIPIPE_H5(H5Pset_attr_phase_change(fcpl, 0, 0), path_);  // dense attributes: the manifest may exceed 64 KiB
    file_ = h5::Id(HSIPIPE_H5(H5Fcreate(path_.c_str(), H5F_ACC_EXCL, fcpl, fapl), path_));
    dxpl_ = h5::Id(HSIPIPE_H5(H5Pcreate(H5P_DATASET_XFER), path_));
    HSIPIPE_H5(H5Pset_dxpl_mpio(dxpl_, H5FD_MPIO_COLLECTIVE), path_);
    std::uint64_t end = 0;  // of the last chunk: the datasets' space, allocated at creation
    for (const auto& a : arrays_) {
      datasets_.push_back(create(a, true));
      chunks_.push_back(chunk_places(datasets_.back(), a));
      for (const std::uint64_t at : chunks_.back().addr) end = std::max(end, at + chunks_.back().rows * a.item_bytes());
    }
    // The chunks' blocks, reserved up front as for npy (reserve_blocks), past the end of file HDF5 has
    // written so far (FALLOC_FL_KEEP_SIZE: the file's size stays HDF5's business)
    collective_step(comm, "allocating " + path_, [&] {
      if (comm.rank() != 0 || end == 0) return;
      FdOwner fd(::open(path_.c_str(), O_WRONLY | O_CLOEXEC));
      if (fd.get() < 0) throw IoError(path_, "open", errno);
      reserve_blocks(fd.get(), end, path_, FALLOC_FL_KEEP_SIZE, false);
    });
    // Our own descriptor on the file, only to start writeback beside the decode (see write()).
    writeback_ = FdOwner(::open(path_.c_str(), O_RDONLY | O_CLOEXEC));
  }

  void write(int array, std::uint64_t first, std::uint64_t n, const void* data) override {
    const auto& a = arrays_.at(static_cast<std::size_t>(array));
    write_range(datasets_[static_cast<std::size_t>(array)], a, first, n, data);
    bytes_written_ += n * a.item_bytes();
    // As the npy sink does: start writing the dirty pages back now, so that the flush in finish() has
    // little left to wait for (on a virtual disk it waited ~0.1 s per 300 MB). Only the byte ranges this
    // write filled, found through the chunks' file addresses: when every rank asked for the whole file,
    // the ranks scanned the same pages and took turns on the inode's block allocation (the benchmark's
    // decode in ABBA order with a temporary switch between the two, 1 Dec 2026: 2 ranks 0.570 -> 0.558 s
    // min wall, 1 rank unchanged). Advisory and non-blocking for pages
    // already under writeback; skipped where unsupported.
    if (n == 0 || writeback_.get() < 0) return;
    const Chunks& ch = chunks_[static_cast<std::size_t>(array)];
    if (ch.addr.empty()) {  // HDF5 did not say where the chunks are: the whole file
      (void)::sync_file_range(writeback_.get(), 0, 0, SYNC_FILE_RANGE_WRITE);
      return;
    }
    const std::uint64_t item = a.item_bytes();
    for (std::uint64_t i = first; i < first + n;) {  // the part of [first, first + n) in each chunk
      const std::uint64_t c = i / ch.rows, end = std::min(first + n, (c + 1) * ch.rows);
      const std::uint64_t off = ch.addr[c] + (i - c * ch.rows) * item;
      (void)::sync_file_range(writeback_.get(), static_cast<off64_t>(off), static_cast<off64_t>((end - i) * item),
                              SYNC_FILE_RANGE_WRITE);
      i = end;
    }
  }

  void write_small(const ArraySpec& spec, const void* data) override {
    h5::Id ds = create(spec, false);
    const std::uint64_t n = comm_.rank() == 0 ? spec.shape.at(0) : 0;
    write_range(ds, spec, 0, n, data);
    bytes_written_ += n * spec.item_bytes();
  }

  void start_flush() override {  // our own descriptor, not an HDF5 call: rank 0's fsync of what is written
    if (comm_.rank() == 0 && writeback_.get() >= 0) early_.start({{path_, writeback_.get()}});
  }

  void finish(const std::string& manifest) override {
    collective_step(comm_, "flushing " + path_, [&] {
      if (const auto f = early_.wait(); f.err != 0) throw IoError(f.path, "fsync", f.err);
    });
    h5::Id type(HSIPIPE_H5(H5Tcopy(H5T_C_S1), path_));
    HSIPIPE_H5(H5Tset_size(type, std::max<std::size_t>(1, manifest.size())), path_);
    HSIPIPE_H5(H5Tset_strpad(type, H5T_STR_NULLPAD), path_);
    h5::Id space(HSIPIPE_H5(H5Screate(H5S_SCALAR), path_));
    h5::Id attr(HSIPIPE_H5(H5Acreate2(file_, "manifest", type, space, H5P_DEFAULT, H5P_DEFAULT), path_));
    const std::string buf = manifest.empty() ? std::string(1, '\0') : manifest;
    HSIPIPE_H5(H5Awrite(attr, type, buf.data()), path_);
    attr.reset();
    datasets_.clear();
    HSIPIPE_H5(H5Fflush(file_, H5F_SCOPE_GLOBAL), path_);
    // H5Fflush ends with the MPI-IO driver's sync, but H5Fclose then writes the superblock once more (strace
    // of a decode, 2 Dec 2026): rank 0 makes that write durable too, before the cache can be published. In
    // one step, so that a close that fails on one rank fails them all.
    collective_step(comm_, "closing " + path_, [&] {
      file_.close(path_);
      if (comm_.rank() == 0 && writeback_.get() >= 0 && ::fsync(writeback_.get()) != 0) throw IoError(path_, "fsync", errno);
    });
    writeback_ = FdOwner();
  }

 private:
  h5::Id create(const ArraySpec& a, bool chunked) {
    std::vector<hsize_t> d(a.shape.begin(), a.shape.end());
    h5::Id space(HSIPIPE_H5(H5Screate_simple(static_cast<int>(d.size()), d.data(), nullptr), path_));
    h5::Id dcpl(HSIPIPE_H5(H5Pcreate(H5P_DATASET_CREATE), path_));
    HSIPIPE_H5(H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER), path_);
    HSIPIPE_H5(H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY), path_);
    if (chunked && d.at(0) > 0) {
      std::vector<hsize_t> chunk = d;
      const std::uint64_t ib = std::max<std::uint64_t>(1, a.item_bytes());
      chunk[0] = std::max<hsize_t>(1, std::min<hsize_t>(d[0], (4ull << 20) / ib));  // ~4 MiB chunks
      HSIPIPE_H5(H5Pset_chunk(dcpl, static_cast<int>(chunk.size()), chunk.data()), path_);
    }
    h5::Id lcpl(HSIPIPE_H5(H5Pcreate(H5P_LINK_CREATE), path_));
    HSIPIPE_H5(H5Pset_create_intermediate_group(lcpl, 1), path_);
    h5::Id type = h5::file_type(a.dtype);
    return h5::Id(HSIPIPE_H5(H5Dcreate2(file_, a.h5name.c_str(), type, space, lcpl, dcpl, H5P_DEFAULT), path_));
  }

  void write_range(hid_t ds, const ArraySpec& a, std::uint64_t first, std::uint64_t n, const void* data) {
    std::vector<hsize_t> d(a.shape.begin(), a.shape.end()), start(d.size(), 0), count = d;
    if (d.empty() || d[0] == 0) return;  // an empty dataset (e.g. no wavelengths): same on every rank
    h5::Id fspace(HSIPIPE_H5(H5Dget_space(ds), path_));
    start[0] = first;
    count[0] = n;
    std::vector<hsize_t> mdims = count;
    if (n == 0) mdims[0] = 1;
    h5::Id mspace(HSIPIPE_H5(H5Screate_simple(static_cast<int>(mdims.size()), mdims.data(), nullptr), path_));
    if (n == 0 || d[0] == 0) {
      HSIPIPE_H5(H5Sselect_none(fspace), path_);
      HSIPIPE_H5(H5Sselect_none(mspace), path_);
    } else {
      HSIPIPE_H5(H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr), path_);
    }
    static const char dummy[16] = {};
    h5::Id mt = h5::mem_type(a.dtype);
    HSIPIPE_H5(H5Dwrite(ds, mt, mspace, fspace, dxpl_, n ? data : dummy), path_ + " " + a.h5name);
  }

  // Where a chunked dataset's chunks lie in the file (allocated at creation, H5D_ALLOC_TIME_EARLY): rows
  // per chunk (a chunk holds whole rows of the other dimensions, so a chunk's rows are contiguous in the
  // file) and each chunk's address, for the writeback hint; empty when HDF5 does not say. Every rank asks
  // for the same chunks in the same order (with all_coll_metadata_ops the lookups may be collective
  // metadata reads), and an early return depends only on what HDF5 returned, the same on every rank.
  struct Chunks {
    std::uint64_t rows = 0;
    std::vector<std::uint64_t> addr;
  };
  Chunks chunk_places(hid_t ds, const ArraySpec& a) {
    Chunks out;
    if (a.shape.empty() || a.shape[0] == 0) return out;
    h5::Id dcpl(HSIPIPE_H5(H5Dget_create_plist(ds), path_));
    if (H5Pget_layout(dcpl) != H5D_CHUNKED) return out;
    std::vector<hsize_t> dims(a.shape.size());
    if (H5Pget_chunk(dcpl, static_cast<int>(dims.size()), dims.data()) < 0 || dims[0] == 0) return out;
    out.rows = dims[0];
    const std::uint64_t n = (a.shape[0] + out.rows - 1) / out.rows;
    std::vector<hsize_t> at(a.shape.size(), 0);
    for (std::uint64_t c = 0; c < n; ++c) {
      at[0] = c * out.rows;
      unsigned mask = 0;
      haddr_t addr = HADDR_UNDEF;
      hsize_t size = 0;
      if (H5Dget_chunk_info_by_coord(ds, at.data(), &mask, &addr, &size) < 0 || addr == HADDR_UNDEF) return {};
      out.addr.push_back(addr);
    }
    return out;
  }

  std::string path_;
  std::vector<ArraySpec> arrays_;
  const dist::Comm& comm_;
  h5::Id file_, dxpl_;
  std::vector<h5::Id> datasets_;
  std::vector<Chunks> chunks_;
  FdOwner writeback_;
  EarlyFlush early_;  ///< after writeback_, whose descriptor it uses: destroyed (joined) first
};

}  // namespace

std::unique_ptr<Sink> make_npy_sink(const std::string& dir, const std::vector<ArraySpec>& arrays,
                                    const dist::Comm& comm) {
  return std::make_unique<NpySink>(dir, arrays, comm);
}

std::unique_ptr<Sink> make_h5_sink(const std::string& dir, const std::vector<ArraySpec>& arrays,
                                   const dist::Comm& comm) {
  h5::Silence quiet;  // errors reach us through the checks; HDF5 would print its stack on every rank
  return std::make_unique<H5Sink>(dir, arrays, comm);
}

}  // namespace hsipipe::cache
