// io/envi_header: the ENVI header grammar (parse and format) and header/data file discovery.
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <iterator>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include "core/error.hpp"
#include "io/envi.hpp"

namespace hsipipe::io {

namespace {

std::string_view trim(std::string_view s) {
  const char* ws = " \t\r\n\f\v";
  const auto b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  const auto e = s.find_last_not_of(ws);
  return s.substr(b, e - b + 1);
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& ch : out) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return out;
}

/// Lower-case, runs of blanks collapsed to one space: "Data  Type" -> "data type".
std::string normalise_key(std::string_view raw) {
  std::string out;
  bool space = false;
  for (char ch : trim(raw)) {
    if (ch == ' ' || ch == '\t') {
      space = true;
      continue;
    }
    if (space && !out.empty()) out.push_back(' ');
    space = false;
    out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(ch))));
  }
  return out;
}

/// Shortens a value for an error message.
std::string quote(std::string_view v) {
  std::string s(v.substr(0, 60));
  for (auto& ch : s)
    if (static_cast<unsigned char>(ch) < 0x20) ch = ' ';
  return "'" + s + (v.size() > 60 ? "...'" : "'");
}

/// Keys whose value changes how the data file's bytes are read (or which pixels and ids are valid)
bool decides_layout(std::string_view key) {
  static constexpr std::string_view keys[] = {"samples",     "lines",         "bands",           "data type",
                                              "interleave",  "byte order",    "header offset",   "data ignore value",
                                              "file type",   "classes"};
  return std::find(std::begin(keys), std::end(keys), key) != std::end(keys);
}

std::uint64_t parse_uint(std::string_view v, const std::string& file, const std::string& field,
                         std::uint64_t max = std::numeric_limits<std::uint32_t>::max()) {
  v = trim(v);
  if (!v.empty() && v.front() == '+') v.remove_prefix(1);
  std::uint64_t out = 0;
  const auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (v.empty() || ec != std::errc() || ptr != v.data() + v.size()) {
    throw FormatError(file, field, "expected a non-negative integer, found " + quote(v));
  }
  if (out > max) throw FormatError(file, field, "value " + std::string(v) + " is out of range (at most " + std::to_string(max) + ")");
  return out;
}

double parse_double(std::string_view v, const std::string& file, const std::string& field) {
  v = trim(v);
  if (!v.empty() && v.front() == '+') v.remove_prefix(1);
  double out = 0;
  const auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (v.empty() || ec != std::errc() || ptr != v.data() + v.size()) {
    throw FormatError(file, field, "expected a number, found " + quote(v));
  }
  return out;
}

/// Splits a `{a, b, c}` value into trimmed items. `{}` is an empty list.
std::vector<std::string_view> split_list(std::string_view v, const std::string& file, const std::string& field) {
  v = trim(v);
  if (v.size() < 2 || v.front() != '{' || v.back() != '}') {
    throw FormatError(file, field, "expected a list in braces {...}, found " + quote(v));
  }
  std::string_view inner = v.substr(1, v.size() - 2);
  std::vector<std::string_view> items;
  if (trim(inner).empty()) return items;
  std::size_t start = 0;
  while (true) {
    const auto comma = inner.find(',', start);
    const std::string_view item = trim(inner.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    if (item.empty()) {
      throw FormatError(file, field, "malformed list: empty entry " + std::to_string(items.size() + 1));
    }
    items.push_back(item);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return items;
}

std::vector<double> parse_number_list(std::string_view v, std::size_t bands, const std::string& file,
                                      const std::string& field) {
  const auto items = split_list(v, file, field);
  if (items.size() != bands) {
    throw FormatError(file, field, "list has " + std::to_string(items.size()) + " entries, expected one per band (" +
                                       std::to_string(bands) + ")");
  }
  std::vector<double> out;
  out.reserve(items.size());
  for (std::size_t i = 0; i < items.size(); ++i) {
    double d = 0;
    try {
      d = parse_double(items[i], file, field);
    } catch (const FormatError&) {
      throw FormatError(file, field, "entry " + std::to_string(i + 1) + " is not a number: " + quote(items[i]));
    }
    if (!std::isfinite(d)) throw FormatError(file, field, "entry " + std::to_string(i + 1) + " is not finite");
    out.push_back(d);
  }
  return out;
}

std::string unbrace(std::string_view v) {
  v = trim(v);
  if (v.size() >= 2 && v.front() == '{' && v.back() == '}') v = trim(v.substr(1, v.size() - 2));
  return std::string(v);
}

/// Two spellings of one value of a layout key: numbers compared as numbers (-9999 and -9999.0), words
/// case-insensitively (bsq and BSQ)
bool same_value(std::string_view a, std::string_view b) {
  if (a == b) return true;
  const auto num = [](std::string_view v) -> std::optional<double> {
    const std::string u = unbrace(v);
    double d = 0;
    const auto r = std::from_chars(u.data(), u.data() + u.size(), d);
    if (r.ec != std::errc() || r.ptr != u.data() + u.size()) return std::nullopt;
    return d;
  };
  if (const auto x = num(a), y = num(b); x && y) return *x == *y;
  return lower(unbrace(a)) == lower(unbrace(b));
}

std::string format_double(double d) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, d);
  return std::string(buf, r.ptr);
}

std::string format_list(const std::vector<double>& v) {
  std::string s = "{";
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) s += (i % 8 == 0) ? ",\n " : ", ";
    s += format_double(v[i]);
  }
  return s + "}";
}

bool is_regular(const std::string& p) {
  std::error_code ec;
  return std::filesystem::is_regular_file(p, ec);
}

bool ends_with_ci(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && lower(std::string_view(s).substr(s.size() - suffix.size())) == suffix;
}

}  // namespace

std::string_view interleave_name(Interleave i) noexcept {
  switch (i) {
    case Interleave::bsq: return "bsq";
    case Interleave::bil: return "bil";
    case Interleave::bip: return "bip";
  }
  return "?";
}

std::optional<Interleave> interleave_from_name(std::string_view s) {
  const std::string l = lower(trim(s));
  if (l == "bsq") return Interleave::bsq;
  if (l == "bil") return Interleave::bil;
  if (l == "bip") return Interleave::bip;
  return std::nullopt;
}

const std::string* EnviHeader::find(std::string_view key) const {
  for (auto it = fields.rbegin(); it != fields.rend(); ++it)
    if (it->first == key) return &it->second;
  return nullptr;
}

std::uint64_t EnviHeader::data_bytes() const {
  std::uint64_t n = dtype_size(dtype), out = 0;
  if (__builtin_mul_overflow(n, static_cast<std::uint64_t>(samples), &out) ||
      __builtin_mul_overflow(out, static_cast<std::uint64_t>(lines), &out) ||
      __builtin_mul_overflow(out, static_cast<std::uint64_t>(bands), &out)) {
    return std::numeric_limits<std::uint64_t>::max();
  }
  return out;
}

namespace {

// A list value: runs from the '{' at `open` to the next '}', possibly over several lines; no nesting.
// Returns the list text and moves `pos` (the next line) and `line_no` past it.
std::string_view read_list_value(std::string_view text, std::size_t open, const std::string& name, const std::string& key,
                                 std::size_t this_line, std::size_t& line_no, std::size_t& pos) {
  const std::size_t close = text.find('}', open + 1);
  const std::size_t nested = text.find('{', open + 1);
  if (close == std::string_view::npos) {
    throw FormatError(name, key, "malformed list: '{' on line " + std::to_string(this_line) + " is never closed by '}'");
  }
  if (nested < close) {
    throw FormatError(name, key, "malformed list: '{' inside a list (opened on line " + std::to_string(this_line) + ")");
  }
  for (std::size_t i = open; i < close; ++i)
    if (text[i] == '\n') ++line_no;
  std::size_t after = text.find('\n', close);
  if (after == std::string_view::npos) after = text.size();
  if (!trim(text.substr(close + 1, after - close - 1)).empty()) {
    throw FormatError(name, key, "malformed list: text after the closing '}' on line " + std::to_string(line_no));
  }
  pos = after + 1;
  return text.substr(open, close - open + 1);
}

// Records key = value; a key given again replaces the earlier value, except a key that decides how the
// bytes are read given twice with two values: which one describes the data is unknown, so neither is
// guessed (a repeated description or wavelength keeps its last value).
void set_field(EnviHeader& h, const std::string& key, std::string_view value, const std::string& name, std::size_t this_line) {
  for (auto& f : h.fields)
    if (f.first == key) {
      if (decides_layout(key) && !same_value(f.second, value))
        throw FormatError(name, key, "given twice with different values, " + quote(f.second) + " and " + quote(value) +
                                         " (line " + std::to_string(this_line) + ")");
      f.second = std::string(value);
      return;
    }
  h.fields.emplace_back(key, std::string(value));
}

// The magic line and then every `key = value` line (';' comments, blank lines, '{...}' lists) into h.fields.
void read_fields(EnviHeader& h, std::string_view text, const std::string& name) {
  // Magic: the first line is "ENVI" (a UTF-8 byte-order mark before it is tolerated).
  if (text.size() >= 3 && std::memcmp(text.data(), "\xEF\xBB\xBF", 3) == 0) text.remove_prefix(3);
  std::size_t pos = text.find('\n');
  const std::string_view first = trim(text.substr(0, pos));
  if (lower(first) != "envi") {
    throw FormatError(name, "ENVI", "not an ENVI header: the first line must be 'ENVI', found " + quote(first));
  }
  std::size_t line_no = 1;
  pos = pos == std::string_view::npos ? text.size() : pos + 1;
  while (pos < text.size()) {
    std::size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    const std::size_t this_line = ++line_no;
    const std::string_view line = trim(text.substr(pos, eol - pos));
    pos = eol + 1;
    if (line.empty() || line.front() == ';') continue;
    const auto eq = line.find('=');
    if (eq == std::string_view::npos) {
      throw FormatError(name, "line " + std::to_string(this_line), "expected 'key = value', found " + quote(line));
    }
    const std::string key = normalise_key(line.substr(0, eq));
    if (key.empty()) throw FormatError(name, "line " + std::to_string(this_line), "empty key before '='");
    std::string_view value = trim(line.substr(eq + 1));
    if (!value.empty() && value.front() == '{') {
      value = read_list_value(text, static_cast<std::size_t>(value.data() - text.data()), name, key, this_line, line_no, pos);
    } else if (value.find('}') != std::string_view::npos) {
      throw FormatError(name, key, "malformed list: '}' without '{'");
    }
    set_field(h, key, value, name, this_line);
  }
}

// The keys that say how the bytes are laid out: sizes, data type, interleave, byte order, header offset.
void parse_layout_fields(EnviHeader& h, const std::string& name) {
  auto required = [&](const char* key) -> const std::string& {
    const std::string* v = h.find(key);
    if (!v) throw FormatError(name, key, "missing required key");
    return *v;
  };
  const std::uint64_t dim_max = std::numeric_limits<std::int32_t>::max();
  h.samples = parse_uint(required("samples"), name, "samples", dim_max);
  h.lines = parse_uint(required("lines"), name, "lines", dim_max);
  h.bands = parse_uint(required("bands"), name, "bands", dim_max);
  const std::pair<const char*, std::size_t> dims[] = {{"samples", h.samples}, {"lines", h.lines}, {"bands", h.bands}};
  for (const auto& [k, v] : dims)
    if (v == 0) throw FormatError(name, k, "must be at least 1");

  const std::string& dt = required("data type");
  const auto code = parse_uint(dt, name, "data type", 1000);
  h.data_type = static_cast<int>(code);
  if (code == 6 || code == 9) {
    throw FormatError(name, "data type", "complex data type " + std::to_string(code) +
                                             " is not supported (hsipipe decodes real-valued samples only)");
  }
  const auto t = dtype_from_envi(h.data_type);
  if (!t) {
    throw FormatError(name, "data type",
                      "unknown data type code " + std::to_string(code) + " (expected 1, 2, 3, 4, 5, 12, 13, 14 or 15)");
  }
  h.dtype = *t;

  const std::string& il = required("interleave");
  const auto inter = interleave_from_name(il);
  if (!inter) throw FormatError(name, "interleave", "expected bsq, bil or bip, found " + quote(il));
  h.interleave = *inter;

  if (const std::string* bo = h.find("byte order")) {
    const auto b = parse_uint(*bo, name, "byte order", 1);
    h.byte_order = static_cast<int>(b);
    h.byte_order_given = true;
  }
  if (const std::string* off = h.find("header offset")) {
    h.header_offset = parse_uint(*off, name, "header offset", std::numeric_limits<std::uint32_t>::max());
  }
  if (h.data_bytes() == std::numeric_limits<std::uint64_t>::max() ||
      h.data_bytes() > (std::uint64_t{1} << 50)) {
    throw FormatError(name, "samples, lines, bands", "the data size samples * lines * bands * element size overflows");
  }
}

// The optional keys about values and bands: ignore value, classes, scale factor, wavelengths, fwhm, bbl.
void parse_band_fields(EnviHeader& h, const std::string& name) {
  if (const std::string* v = h.find("data ignore value")) {
    h.ignore_value = parse_double(unbrace(*v), name, "data ignore value");
  }
  if (const std::string* v = h.find("classes")) {  // a classification image: ids 0 .. classes - 1
    h.classes = parse_uint(*v, name, "classes", std::numeric_limits<std::int32_t>::max());
    if (*h.classes == 0) throw FormatError(name, "classes", "must be at least 1");
  }
  if (const std::string* v = h.find("reflectance scale factor")) {
    const double s = parse_double(unbrace(*v), name, "reflectance scale factor");
    if (!std::isfinite(s) || s == 0) throw FormatError(name, "reflectance scale factor", "must be a finite non-zero number");
    h.band_info.scale_factor = s;
  }
  if (const std::string* v = h.find("wavelength units")) h.band_info.wavelength_units = unbrace(*v);
  if (const std::string* v = h.find("wavelength")) h.band_info.wavelengths = parse_number_list(*v, h.bands, name, "wavelength");
  if (const std::string* v = h.find("fwhm")) h.band_info.fwhm = parse_number_list(*v, h.bands, name, "fwhm");
  if (const std::string* v = h.find("bbl")) {
    const auto vals = parse_number_list(*v, h.bands, name, "bbl");
    h.band_info.bbl.reserve(vals.size());
    for (std::size_t i = 0; i < vals.size(); ++i) {
      if (vals[i] != 0 && vals[i] != 1) {
        throw FormatError(name, "bbl", "entry " + std::to_string(i + 1) + " is " + format_double(vals[i]) + ", expected 0 or 1");
      }
      h.band_info.bbl.push_back(vals[i] != 0 ? 1 : 0);
    }
  }
}

}  // namespace

EnviHeader parse_envi_header(std::string_view text, const std::string& name) {
  EnviHeader h;
  read_fields(h, text, name);
  parse_layout_fields(h, name);
  parse_band_fields(h, name);
  return h;
}

std::string format_envi_header(const EnviHeader& h, const std::vector<std::pair<std::string, std::string>>& extra) {
  std::string s = "ENVI\n";
  auto line = [&](const std::string& k, const std::string& v) { s += k + " = " + v + "\n"; };
  for (const auto& [k, v] : extra)
    if (k == "description") line(k, v);
  line("samples", std::to_string(h.samples));
  line("lines", std::to_string(h.lines));
  line("bands", std::to_string(h.bands));
  line("header offset", std::to_string(h.header_offset));
  line("file type", "ENVI Standard");
  line("data type", std::to_string(dtype_to_envi(h.dtype)));
  line("interleave", std::string(interleave_name(h.interleave)));
  line("byte order", std::to_string(h.byte_order));
  if (h.ignore_value) line("data ignore value", format_double(*h.ignore_value));
  const BandInfo& bi = h.band_info;
  if (bi.scale_factor != 1.0) line("reflectance scale factor", format_double(bi.scale_factor));
  if (!bi.wavelength_units.empty()) line("wavelength units", bi.wavelength_units);
  if (!bi.wavelengths.empty()) line("wavelength", format_list(bi.wavelengths));
  if (!bi.fwhm.empty()) line("fwhm", format_list(bi.fwhm));
  if (!bi.bbl.empty()) line("bbl", format_list(std::vector<double>(bi.bbl.begin(), bi.bbl.end())));
  for (const auto& [k, v] : extra)
    if (k != "description") line(k, v);
  return s;
}

EnviFiles find_envi_files(const std::string& path) {
  EnviFiles f;
  if (ends_with_ci(path, ".hdr")) {
    f.header = path;
    const std::string base = path.substr(0, path.size() - 4);
    static const char* const exts[] = {"",     ".img", ".IMG", ".dat", ".DAT", ".bsq", ".BSQ",
                                       ".bil", ".BIL", ".bip", ".BIP", ".raw", ".RAW"};
    for (const char* e : exts) {
      if (is_regular(base + e)) {
        f.data = base + e;
        return f;
      }
    }
    for (const char* e : exts) {
      std::error_code ec;
      if (std::filesystem::is_directory(base + e, ec) && *e)
        throw IoError(path, "its data file " + base + e + " is a folder, not a file");
    }
    throw IoError(path, "no ENVI data file next to this header (tried " + base + " with no extension, .img, .dat, .bsq, .bil, .bip, .raw)");
  }
  f.data = path;
  const std::string stem = std::filesystem::path(path).replace_extension().string();
  for (const std::string& cand : {path + ".hdr", path + ".HDR", stem + ".hdr", stem + ".HDR"}) {
    if (cand != path && is_regular(cand)) {
      f.header = cand;
      return f;
    }
  }
  throw IoError(path, "no ENVI header next to this data file (tried " + path + ".hdr and " + stem + ".hdr)");
}

bool looks_like_envi(const std::string& path) {
  std::string header;
  try {
    // A header is recognised by its magic alone, so that open_envi() reports a missing data file.
    header = ends_with_ci(path, ".hdr") ? path : find_envi_files(path).header;
  } catch (const std::exception&) {
    return false;
  }
  errno = 0;
  std::ifstream in(header, std::ios::binary);
  // out of file descriptors (ulimit -n): that error, not "not ENVI" (GDAL's loader then failed, naming itself)
  if (!in.is_open() && (errno == EMFILE || errno == ENFILE)) throw IoError(header, "open", errno);
  char buf[8] = {};
  in.read(buf, sizeof buf);
  std::string_view head(buf, static_cast<std::size_t>(in.gcount()));
  if (head.size() >= 3 && std::memcmp(head.data(), "\xEF\xBB\xBF", 3) == 0) head.remove_prefix(3);
  return head.size() >= 4 && lower(head.substr(0, 4)) == "envi";
}

}  // namespace hsipipe::io
