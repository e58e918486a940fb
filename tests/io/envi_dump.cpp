// envi_dump: test helper. Decodes ENVI scenes with open_envi() and writes the float32 BIP cube raw
// (little-endian) so that tests/io/envi_spy_compare.py can compare it with SPy's decoding. Also
// prints the band metadata as JSON. Usage:
//   envi_dump [--block-rows N] [--threads T] SCENE OUT.f32 [SCENE OUT.f32 ...]
// With T > 1 the row blocks are decoded concurrently on one Scene (read_rows thread-safety).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "io/readers.hpp"

int main(int argc, char** argv) {
  std::size_t block = 0;  // 0 = all rows in one call
  int threads = 1;
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--block-rows") && i + 1 < argc) block = std::strtoul(argv[++i], nullptr, 10);
    else if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) threads = std::atoi(argv[++i]);
    else args.emplace_back(argv[i]);
  }
  if (args.empty() || args.size() % 2 || threads < 1) {
    std::cerr << "usage: envi_dump [--block-rows N] [--threads T] SCENE OUT.f32 [...]\n";
    return 2;
  }
  nlohmann::json all = nlohmann::json::array();
  for (std::size_t i = 0; i < args.size(); i += 2) {
    nlohmann::json j;
    j["scene"] = args[i];
    try {
      hsipipe::io::SceneSpec spec;
      spec.path = args[i];
      const auto s = hsipipe::io::open_envi(spec);
      const std::size_t R = s->rows(), per_row = s->cols() * s->bands();
      std::vector<float> cube(R * per_row);
      const std::size_t step = block ? block : R;
      std::vector<std::thread> pool;
      std::vector<std::string> errors(static_cast<std::size_t>(threads));
      for (int t = 0; t < threads; ++t) {
        pool.emplace_back([&, t] {
          try {
            for (std::size_t r0 = static_cast<std::size_t>(t) * step; r0 < R; r0 += static_cast<std::size_t>(threads) * step) {
              const std::size_t r1 = std::min(R, r0 + step);
              s->read_rows(r0, r1, cube.data() + r0 * per_row);
            }
          } catch (const std::exception& e) {
            errors[static_cast<std::size_t>(t)] = e.what();
          }
        });
      }
      for (auto& th : pool) th.join();
      for (const auto& e : errors)
        if (!e.empty()) throw hsipipe::Error(e);
      std::ofstream out(args[i + 1], std::ios::binary);
      out.write(reinterpret_cast<const char*>(cube.data()), static_cast<std::streamsize>(cube.size() * sizeof(float)));
      if (!out) throw hsipipe::IoError(args[i + 1], "write failed");
      const auto& bi = s->band_info();
      j["rows"] = R;
      j["cols"] = s->cols();
      j["bands"] = s->bands();
      j["dtype"] = std::string(hsipipe::dtype_name(s->source_type()));
      j["wavelengths"] = bi.wavelengths;
      j["fwhm"] = bi.fwhm;
      j["units"] = bi.wavelength_units;
      j["bbl"] = bi.bbl;
      j["scale"] = bi.scale_factor;
      j["ignore"] = s->ignore_value() ? nlohmann::json(*s->ignore_value()) : nlohmann::json(nullptr);
      j["bytes_read"] = s->bytes_read();
    } catch (const hsipipe::Error& e) {
      j["error"] = e.what();
    }
    all.push_back(j);
  }
  std::cout << all.dump() << "\n";
  return 0;
}
