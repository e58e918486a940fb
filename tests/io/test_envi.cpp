// ENVI reader: header grammar, file discovery, bad input (typed errors naming file and field, non-zero
// exit from the CLI), row blocks and thread-safety, the SIMD and the scalar kernels, the writer, and a
// bounded random-mutation fuzz of the header parser. Bit-exactness against SPy is in
// envi_spy_compare.py.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <stdexcept>
#include <thread>

#include "core/error.hpp"
#include "io/envi.hpp"
#include "io/readers.hpp"
#include "support/test_util.hpp"

using namespace hsipipe;
using namespace hsipipe::io;

namespace {

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(f.good());
}

std::string int16_le(const std::vector<std::int16_t>& v) {
  std::string s(v.size() * 2, '\0');
  for (std::size_t i = 0; i < v.size(); ++i) {
    const auto u = static_cast<std::uint16_t>(v[i]);
    s[2 * i] = static_cast<char>(u & 0xff);
    s[2 * i + 1] = static_cast<char>(u >> 8);
  }
  return s;
}

/// A header of the given shape; a key that `extra` sets replaces its default line (a key given twice with two
/// values is an error of its own)
std::string header(const std::string& extra = "", int dtype = 2, const std::string& inter = "bil", int rows = 3,
                   int cols = 4, int bands = 2) {
  const std::pair<std::string, std::string> defaults[] = {
      {"samples", std::to_string(cols)}, {"lines", std::to_string(rows)},      {"bands", std::to_string(bands)},
      {"header offset", "0"},            {"data type", std::to_string(dtype)}, {"interleave", inter},
      {"byte order", "0"}};
  std::string h = "ENVI\n";
  for (const auto& [k, v] : defaults)
    if (("\n" + extra).find("\n" + k + " =") == std::string::npos) h += k + " = " + v + "\n";
  return h + extra;
}

std::unique_ptr<Scene> open(const std::string& p) {
  SceneSpec s;
  s.path = p;
  return open_envi(s);
}

/// Runs `fn` and returns the FormatError message, failing the test when something else happens.
template <class Fn>
std::string format_error(Fn fn) {
  try {
    fn();
  } catch (const FormatError& e) {
    return e.what();
  } catch (const std::exception& e) {
    FAIL("expected FormatError, got: " << e.what());
  }
  FAIL("expected FormatError, nothing thrown");
  return {};
}

std::vector<float> decode_all(const Scene& s) {
  std::vector<float> v(s.rows() * s.cols() * s.bands());
  s.read_rows(0, s.rows(), v.data());
  return v;
}

}  // namespace

TEST_CASE("ENVI header grammar: case-insensitive keys, multi-line lists, comments", "[envi]") {
  const std::string text =
      "ENVI\n"
      "; a comment line\n"
      "description = {two\n  lines; with = signs}\n"
      "SAMPLES = 4\n"
      "Lines   =3\n"
      "  bands=  2\n"
      "Data   Type = 12\n"
      "INTERLEAVE = BSQ\n"
      "byte order = 1\n"
      "header offset = 7\n"
      "wavelength units = Micrometers\n"
      "wavelength = {\n 0.4,\n 2.5 }\n"
      "fwhm = {0.01, 0.02}\n"
      "bbl = {1, 0}\n"
      "data ignore value = -9999\n"
      "reflectance scale factor = 10000.0\n";
  const EnviHeader h = parse_envi_header(text, "t.hdr");
  CHECK(h.samples == 4);
  CHECK(h.lines == 3);
  CHECK(h.bands == 2);
  CHECK(h.dtype == DType::u16);
  CHECK(h.interleave == Interleave::bsq);
  CHECK(h.byte_order == 1);
  CHECK(h.header_offset == 7);
  CHECK(h.band_info.wavelengths == std::vector<double>{0.4, 2.5});
  CHECK(h.band_info.fwhm == std::vector<double>{0.01, 0.02});
  CHECK(h.band_info.bbl == std::vector<int>{1, 0});
  CHECK(h.band_info.wavelength_units == "Micrometers");
  CHECK(h.band_info.scale_factor == 10000.0);
  REQUIRE(h.ignore_value);
  CHECK(*h.ignore_value == -9999.0);
  REQUIRE(h.find("description"));
  CHECK(h.find("description")->find("lines; with = signs") != std::string::npos);

  // format -> parse round trip keeps everything
  const EnviHeader back = parse_envi_header(format_envi_header(h), "back.hdr");
  CHECK(back.samples == h.samples);
  CHECK(back.dtype == h.dtype);
  CHECK(back.interleave == h.interleave);
  CHECK(back.byte_order == h.byte_order);
  CHECK(back.header_offset == h.header_offset);
  CHECK(back.band_info.wavelengths == h.band_info.wavelengths);
  CHECK(back.band_info.bbl == h.band_info.bbl);
  CHECK(back.ignore_value == h.ignore_value);
}

TEST_CASE("ENVI files are found from the header or the data file", "[envi]") {
  test::TempDir d("envi-names");
  const std::string data = int16_le({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24});
  // X.hdr + X.img
  write_file(d.str("a.hdr"), header());
  write_file(d.str("a.img"), data);
  // X.img.hdr + X.img
  write_file(d.str("b.img.hdr"), header());
  write_file(d.str("b.img"), data);
  // X.hdr + X.dat, X.hdr + X (no extension), X.hdr + X.bil
  write_file(d.str("c.hdr"), header());
  write_file(d.str("c.dat"), data);
  write_file(d.str("e.hdr"), header());
  write_file(d.str("e"), data);
  write_file(d.str("f.hdr"), header());
  write_file(d.str("f.bil"), data);
  for (const char* p : {"a.hdr", "a.img", "b.img.hdr", "b.img", "c.hdr", "c.dat", "e.hdr", "e", "f.hdr", "f.bil"}) {
    INFO(p);
    CHECK(looks_like_envi(d.str(p)));
    const auto s = open(d.str(p));
    CHECK(s->rows() == 3);
    CHECK(s->cols() == 4);
    CHECK(s->bands() == 2);
    const auto v = decode_all(*s);
    // BIL: row 0 = band 0 cols 1..4, band 1 cols 5..8 -> pixel (0,0) = {1, 5}
    CHECK(v[0] == 1.0f);
    CHECK(v[1] == 5.0f);
    CHECK(v[2] == 2.0f);
    CHECK(s->source_files().size() == 2);
  }
  write_file(d.str("lonely.hdr"), header());
  CHECK(looks_like_envi(d.str("lonely.hdr")));
  CHECK_THROWS_AS(open(d.str("lonely.hdr")), IoError);
  write_file(d.str("nohdr.img"), data);
  CHECK_FALSE(looks_like_envi(d.str("nohdr.img")));
  CHECK_THROWS_AS(open(d.str("nohdr.img")), IoError);
  write_file(d.str("notenvi.hdr"), "GDAL\nsamples = 1\n");
  CHECK_FALSE(looks_like_envi(d.str("notenvi.hdr")));
}

TEST_CASE("ENVI bad input: typed errors naming file and field", "[envi][errors]") {
  test::TempDir d("envi-bad");
  const std::string good = int16_le(std::vector<std::int16_t>(24, 7));
  auto scene_with = [&](const std::string& name, const std::string& hdr, const std::string& data) {
    write_file(d.str(name + ".hdr"), hdr);
    write_file(d.str(name + ".img"), data);
    return d.str(name + ".hdr");
  };
  struct Case {
    std::string name, hdr, data, file, field, phrase;
  };
  const std::vector<Case> cases = {
      {"truncated", header(), good.substr(0, 40), "truncated.img", "samples, lines, bands", "truncated"},
      {"toolong", header(), good + "xx", "toolong.img", "samples, lines, bands", "disagrees"},
      {"offset", header("header offset = 4\n"), good, "offset.img", "header offset", "truncated"},
      {"complex6", header("", 6), good, "complex6.hdr", "data type", "complex"},
      {"complex9", header("", 9), good, "complex9.hdr", "data type", "complex"},
      {"unknowntype", header("", 7), good, "unknowntype.hdr", "data type", "unknown data type"},
      {"nosamples", "ENVI\nlines = 3\nbands = 2\ndata type = 2\ninterleave = bil\n", good, "nosamples.hdr", "samples",
       "missing"},
      {"nolines", "ENVI\nsamples = 4\nbands = 2\ndata type = 2\ninterleave = bil\n", good, "nolines.hdr", "lines",
       "missing"},
      {"nobands", "ENVI\nsamples = 4\nlines = 3\ndata type = 2\ninterleave = bil\n", good, "nobands.hdr", "bands",
       "missing"},
      {"notype", "ENVI\nsamples = 4\nlines = 3\nbands = 2\ninterleave = bil\n", good, "notype.hdr", "data type", "missing"},
      {"nointer", "ENVI\nsamples = 4\nlines = 3\nbands = 2\ndata type = 2\n", good, "nointer.hdr", "interleave",
       "missing"},
      {"badinter", header("", 2, "bsx"), good, "badinter.hdr", "interleave", "bsq, bil or bip"},
      {"unterminated", header("wavelength = {1, 2\n"), good, "unterminated.hdr", "wavelength", "never closed"},
      {"nested", header("wavelength = {1, {2}}\n"), good, "nested.hdr", "wavelength", "malformed list"},
      {"emptyitem", header("fwhm = {1,,2}\n"), good, "emptyitem.hdr", "fwhm", "empty entry"},
      {"count", header("wavelength = {1, 2, 3}\n"), good, "count.hdr", "wavelength", "one per band"},
      {"nonnumber", header("wavelength = {1, blue}\n"), good, "nonnumber.hdr", "wavelength", "not a number"},
      {"closeonly", header("bbl = 1, 0}\n"), good, "closeonly.hdr", "bbl", "malformed list"},
      {"badbbl", header("bbl = {1, 2}\n"), good, "badbbl.hdr", "bbl", "expected 0 or 1"},
      {"badorder", header("byte order = 2\n"), good, "badorder.hdr", "byte order", "out of range"},
      {"negsamples", "ENVI\nsamples = -4\nlines = 3\nbands = 2\ndata type = 2\ninterleave = bil\n", good,
       "negsamples.hdr", "samples", "non-negative integer"},
      {"zerobands", header("bands = 0\n"), good, "zerobands.hdr", "bands", "at least 1"},
      {"nomagic", "samples = 4\n", good, "nomagic.hdr", "ENVI", "first line"},
      {"noequals", header("this line has no equals sign\n"), good, "noequals.hdr", "line", "key = value"},
      {"huge", header("samples = 2000000000\nlines = 2000000000\n"), good, "huge.hdr", "samples, lines, bands",
       "overflows"},
      // a key that decides how the bytes are read, given twice with two values: neither is guessed
      {"twice", header() + "samples = 2\n", good, "twice.hdr", "samples", "given twice with different values"},
      {"twiceorder", header() + "byte order = 1\n", good, "twiceorder.hdr", "byte order", "given twice"},
      {"twicenodata", header("data ignore value = 0\ndata ignore value = -1\n"), good, "twicenodata.hdr",
       "data ignore value", "given twice"},
      {"zeroclasses", header("classes = 0\n"), good, "zeroclasses.hdr", "classes", "at least 1"},
  };
  // the same value twice, and a repeated description (last wins), are no error
  CHECK(parse_envi_header(header() + "samples = 4\ndescription = {a}\ndescription = {b}\n", "x.hdr").samples == 4);
  CHECK(*parse_envi_header(header("description = {a}\ndescription = {b}\n"), "x.hdr").find("description") == "{b}");
  // two spellings of one value: a number as a number, a word in any case
  CHECK(parse_envi_header(header("data ignore value = -9999\ndata ignore value = -9999.0\n"), "x.hdr").ignore_value == -9999.0);
  CHECK(parse_envi_header(header("interleave = bsq\ninterleave = BSQ\n"), "x.hdr").interleave == Interleave::bsq);
  for (const Case& c : cases) {
    INFO(c.name);
    const std::string hdr = scene_with(c.name, c.hdr, c.data);
    const std::string msg = format_error([&] { open(hdr); });
    INFO(msg);
    CHECK(msg.find(c.file) != std::string::npos);
    CHECK(msg.find(c.field) != std::string::npos);
    CHECK(msg.find(c.phrase) != std::string::npos);
  }

  SECTION("the CLI exits non-zero with the message") {
    const std::string bin = test::hsipipe_bin();
    for (const char* name : {"truncated", "complex6", "unterminated", "nobands", "toolong"}) {
      const auto r = test::run(bin + " info " + d.str(std::string(name) + ".hdr"));
      INFO(r.output);
      CHECK(r.status == 3);
      CHECK(r.output.find(std::string(name) + ".") != std::string::npos);
      CHECK(r.output.find("field '") != std::string::npos);
    }
  }
}

TEST_CASE("ENVI writer and reader agree for every type, interleave and byte order; both access paths", "[envi]") {
  test::TempDir d("envi-rt");
  // C and B cover the 8 x 8 AVX2 blocks and both tails (19 = 2 x 8 + 3, 13 = 8 + 5).
  const std::size_t R = 9, C = 19, B = 13;
  std::vector<float> v(R * C * B);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 37) % 200) - (i % 3 == 0 ? 50.0f : 0.0f);
  int n = 0;
  for (DType t : {DType::u8, DType::i16, DType::u16, DType::i32, DType::u32, DType::i64, DType::u64, DType::f32,
                  DType::f64}) {
    for (Interleave il : {Interleave::bsq, Interleave::bil, Interleave::bip}) {
      for (int bo : {0, 1}) {
        EnviHeader h;
        h.samples = C;
        h.lines = R;
        h.bands = B;
        h.dtype = t;
        h.interleave = il;
        h.byte_order = bo;
        h.header_offset = (n % 2) ? 16 : 0;
        const std::string base = d.str("s" + std::to_string(n++));
        {
          EnviWriter w(base + ".hdr", base + ".img", h);
          w.write_rows(4, R, v.data() + 4 * C * B);  // out of order on purpose
          w.write_rows(0, 4, v.data());
          w.commit();
        }
        std::vector<float> expect = v;
        const bool is_unsigned = t == DType::u8 || t == DType::u16 || t == DType::u32 || t == DType::u64;
        if (is_unsigned)
          for (float& x : expect) x = std::max(0.0f, x);
        for (const char* nosimd : {"0", "1"}) {
          ::setenv("HSIPIPE_TEST_NO_SIMD", nosimd, 1);
          const auto s = open(base + ".hdr");
          ::unsetenv("HSIPIPE_TEST_NO_SIMD");
          INFO(dtype_name(t) << " " << interleave_name(il) << " byte order " << bo << " no-simd=" << nosimd);
          CHECK(s->source_type() == t);
          CHECK(decode_all(*s) == expect);
        }
      }
    }
  }
}

TEST_CASE("ENVI row blocks equal the full decode, also from concurrent threads", "[envi]") {
  test::TempDir d("envi-blocks");
  const std::size_t R = 37, C = 23, B = 19;
  std::vector<float> v(R * C * B);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(static_cast<int>((i * 2654435761u) % 60001) - 30000);
  for (Interleave il : {Interleave::bsq, Interleave::bil, Interleave::bip}) {
    for (const char* nosimd : {"0", "1"}) {
      INFO(interleave_name(il) << " no-simd=" << nosimd);
      EnviHeader h;
      h.samples = C;
      h.lines = R;
      h.bands = B;
      h.dtype = DType::i16;
      h.interleave = il;
      h.byte_order = 1;
      const std::string base = d.str(std::string(interleave_name(il)) + nosimd);
      EnviWriter w(base + ".hdr", base + ".img", h);
      w.write_rows(0, R, v.data());
      w.commit();
      ::setenv("HSIPIPE_TEST_NO_SIMD", nosimd, 1);
      const auto s = open(base + ".img");
      ::unsetenv("HSIPIPE_TEST_NO_SIMD");
      REQUIRE(decode_all(*s) == v);
      std::mt19937 g(7);
      for (int k = 0; k < 40; ++k) {
        std::size_t r0 = g() % R, r1 = g() % (R + 1);
        if (r0 > r1) std::swap(r0, r1);
        std::vector<float> part((r1 - r0) * C * B, -1.0f);
        s->read_rows(r0, r1, part.data());
        CHECK(std::equal(part.begin(), part.end(), v.begin() + static_cast<long>(r0 * C * B)));
      }
      const std::uint64_t before = s->bytes_read();
      std::vector<float> out(v.size(), -1.0f);
      std::vector<std::thread> pool;
      for (int t = 0; t < 4; ++t)
        pool.emplace_back([&, t] {
          for (std::size_t r = static_cast<std::size_t>(t); r < R; r += 4) s->read_rows(r, r + 1, out.data() + r * C * B);
        });
      for (auto& th : pool) th.join();
      CHECK(out == v);
      CHECK(s->bytes_read() - before == R * C * B * 2);
      CHECK_THROWS_AS(s->read_rows(3, R + 1, out.data()), Error);
    }
  }
}

TEST_CASE("ENVI data ignore value and float NaN invalidate the whole pixel", "[envi]") {
  test::TempDir d("envi-ignore");
  // 1 row, 3 pixels, 2 bands, BIP int16; pixel 1 has band 1 == -9999.
  write_file(d.str("i.hdr"), header("data ignore value = -9999\n", 2, "bip", 1, 3, 2));
  write_file(d.str("i.img"), int16_le({1, 2, 3, -9999, 5, 6}));
  auto v = decode_all(*open(d.str("i.hdr")));
  CHECK(v[0] == 1.0f);
  CHECK(std::isnan(v[2]));
  CHECK(std::isnan(v[3]));
  CHECK(v[4] == 5.0f);
  // An ignore value the type cannot hold never matches.
  write_file(d.str("j.hdr"), header("data ignore value = 1e9\n", 2, "bip", 1, 3, 2));
  write_file(d.str("j.img"), int16_le({1, 2, 3, 4, 5, 6}));
  v = decode_all(*open(d.str("j.hdr")));
  for (float x : v) CHECK_FALSE(std::isnan(x));
  // float32 BSQ with a NaN in band 0 of pixel 2
  write_file(d.str("f.hdr"), header("", 4, "bsq", 1, 3, 2));
  const float vals[6] = {1, 2, std::nanf(""), 4, 5, 6};
  write_file(d.str("f.img"), std::string(reinterpret_cast<const char*>(vals), sizeof vals));
  v = decode_all(*open(d.str("f.hdr")));
  CHECK(v[0] == 1.0f);
  CHECK(v[1] == 4.0f);
  CHECK(std::isnan(v[4]));
  CHECK(std::isnan(v[5]));
}

TEST_CASE("ENVI: only the validity bands decide whether a pixel is invalid", "[envi]") {
  test::TempDir d("envi-validity");
  // int16 BIP, pixel 1's band 1 is the ignore value; float32 BSQ, pixel 2's band 0 is NaN
  write_file(d.str("i.hdr"), header("data ignore value = -9999\n", 2, "bip", 1, 3, 2));
  write_file(d.str("i.img"), int16_le({1, 2, 3, -9999, 5, 6}));
  write_file(d.str("b.hdr"), header("data ignore value = -9999\n", 2, "bsq", 1, 3, 2));  // the per-band loop
  write_file(d.str("b.img"), int16_le({1, 3, 5, 2, -9999, 6}));
  for (const char* name : {"i.hdr", "b.hdr"}) {
    INFO(name);
    auto s = open(d.str(name));
    s->set_validity_bands({1, 0});  // band 1 does not count: pixel 1 is valid, its -9999 a plain value
    auto v = decode_all(*s);
    CHECK(v[2] == 3.0f);
    CHECK(v[3] == -9999.0f);
    s->set_validity_bands({0, 1});
    v = decode_all(*s);
    CHECK(std::isnan(v[2]));
    CHECK(std::isnan(v[3]));
    s->set_validity_bands({});  // every band again
    CHECK(std::isnan(decode_all(*s)[2]));
    CHECK_THROWS_AS(s->set_validity_bands({1}), std::invalid_argument);
    CHECK_THROWS_AS(s->set_validity_bands({0, 0}), std::invalid_argument);
  }
  write_file(d.str("f.hdr"), header("", 4, "bsq", 1, 3, 2));
  const float vals[6] = {1, 2, std::nanf(""), 4, 5, 6};
  write_file(d.str("f.img"), std::string(reinterpret_cast<const char*>(vals), sizeof vals));
  auto s = open(d.str("f.hdr"));
  s->set_validity_bands({0, 1});
  const auto v = decode_all(*s);
  CHECK(std::isnan(v[4]));  // the NaN itself stays
  CHECK(v[5] == 6.0f);      // but the pixel is valid
}

TEST_CASE("ENVI header fuzz: mutated headers parse or throw hsipipe::Error, never crash or hang", "[envi][fuzz]") {
  const std::vector<std::string> seeds = {
      header("wavelength units = Nanometers\nwavelength = {400.5, 2500}\nfwhm = {10, 10}\nbbl = {1, 0}\n"),
      header("description = {multi\nline}\ndata ignore value = -9999\nreflectance scale factor = 10000\n", 12, "bsq"),
      "ENVI\n; comment\nSAMPLES=1\nLINES=1\nBANDS=1\nDATA TYPE=1\nINTERLEAVE=BIP\n",
  };
  static const char kAlphabet[] = "{}=,;\n\r\t -+.0123456789eEnaNIfENVIbilsqdtwhm\xff\x00";
  const std::string alphabet(kAlphabet, sizeof kAlphabet - 1);
  std::mt19937_64 g(0x5eedULL);
  int parsed = 0, rejected = 0;
  const int iterations = 20000;
  for (int it = 0; it < iterations; ++it) {
    std::string s = seeds[static_cast<std::size_t>(it) % seeds.size()];
    const int nmut = 1 + static_cast<int>(g() % 8);
    for (int m = 0; m < nmut && !s.empty(); ++m) {
      const std::size_t pos = g() % (s.size() + 1);
      switch (g() % 6) {
        case 0: s.insert(pos, 1, alphabet[g() % alphabet.size()]); break;                     // insert
        case 1: if (pos < s.size()) s.erase(pos, 1 + g() % 8); break;                         // delete run
        case 2: if (pos < s.size()) s[pos] = static_cast<char>(g() & 0xff); break;            // random byte
        case 3: { const std::size_t a = g() % s.size(); s.insert(pos, s.substr(a, g() % 40)); break; }  // duplicate
        case 4: s.resize(pos); break;                                                         // truncate
        case 5: s.insert(pos, std::to_string(static_cast<std::int64_t>(g()))); break;         // big numbers
      }
    }
    try {
      const EnviHeader h = parse_envi_header(s, "fuzz.hdr");
      ++parsed;
      // Anything accepted is consistent.
      REQUIRE(h.samples >= 1);
      REQUIRE(h.lines >= 1);
      REQUIRE(h.bands >= 1);
      REQUIRE((h.band_info.wavelengths.empty() || h.band_info.wavelengths.size() == h.bands));
      REQUIRE((h.band_info.bbl.empty() || h.band_info.bbl.size() == h.bands));
      REQUIRE(h.data_bytes() < (std::uint64_t{1} << 62));
    } catch (const Error&) {
      ++rejected;
    }
  }
  INFO("parsed " << parsed << ", rejected " << rejected);
  CHECK(parsed + rejected == iterations);
  CHECK(parsed > 100);    // the mutations do not only produce garbage
  CHECK(rejected > 100);  // nor only valid headers
}

TEST_CASE("Label rasters: integral values only, named pixel and field otherwise", "[envi][labels][errors]") {
  test::TempDir d("envi-labels");
  // float32 label rasters, 1 row x 4 pixels, 1 band
  auto labels_of = [&](const std::string& name, std::vector<float> vals, const std::string& extra = "") {
    write_file(d.str(name + ".hdr"), header(extra, 4, "bsq", 1, static_cast<int>(vals.size()), 1));
    write_file(d.str(name + ".img"), std::string(reinterpret_cast<const char*>(vals.data()), vals.size() * sizeof(float)));
    SceneSpec s;
    s.path = d.str(name + ".hdr");
    return s;
  };
  const LabelImage ok = read_labels(labels_of("ok", {0.0f, 3.0f, -2.0f, 2.0e9f}));
  CHECK(ok.labels == std::vector<std::int32_t>{0, 3, -2, 2000000000});
  // nodata comes back as its integer, not as an error
  const LabelImage nd = read_labels(labels_of("nd", {1.0f, 255.0f, 2.0f, 255.0f}, "data ignore value = 255\n"));
  CHECK(nd.labels == std::vector<std::int32_t>{1, 255, 2, 255});
  CHECK(nd.nodata == 255);  // which decode does not take as a class
  CHECK_FALSE(ok.nodata);
  // `classes = N`: ids 0 .. N - 1 (the nodata pixels are no id)
  const LabelImage cl = read_labels(labels_of("cl", {0.0f, 2.0f, 255.0f, 1.0f}, "classes = 3\ndata ignore value = 255\n"));
  CHECK(cl.labels == std::vector<std::int32_t>{0, 2, 255, 1});
  CHECK(cl.declared_classes == 3u);  // decode refuses a sample's id from 3 on (the ignore label's pixels are none)
  CHECK_FALSE(ok.declared_classes);
  for (const auto& [name, bad] : std::vector<std::pair<std::string, float>>{
           {"half", 1.5f}, {"tiny", 1e-30f}, {"big", 3.0e9f}, {"inf", INFINITY}, {"nan", NAN}, {"negbig", -4.0e9f}}) {
    INFO(name);
    const std::string msg = format_error([&] { (void)read_labels(labels_of(name, {1.0f, 2.0f, bad, 4.0f})); });
    CHECK_THAT(msg, Catch::Contains(name + ".hdr"));
    CHECK_THAT(msg, Catch::Contains("label value"));
    CHECK_THAT(msg, Catch::Contains("row 0, col 2"));
  }
}
