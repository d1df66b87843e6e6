//===- Npy.cpp - read and write NumPy .npy files --------------------------===//

#include "Npy.h"

#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <string_view>

using mlir::liger::cpu::DType;
using mlir::liger::cpu::HostTensor;

namespace {
constexpr char kMagic[] = "\x93NUMPY";

struct DescrEntry {
  const char *descr;
  DType dtype;
};
// '<u2' is how bf16 travels: NumPy has no bfloat16.
constexpr DescrEntry kDescrs[] = {
    {"<u2", DType::bf16}, {"<f2", DType::f16}, {"<f4", DType::f32},
    {"<f8", DType::f64},  {"|b1", DType::i1},  {"<i4", DType::i32},
    {"<i8", DType::i64},
};

// The longest header read. NumPy writes a few dozen bytes for the arrays
// this reader takes (its own loader refuses headers over 10,000 bytes by
// default); the cap keeps a damaged length from costing more than this.
constexpr size_t kMaxHeaderBytes = 1 << 16;
// More dimensions than NumPy itself allows (64) is not an array.
constexpr size_t kMaxRank = 64;
// A dimension larger than this cannot describe data in a file.
constexpr int64_t kMaxDim = int64_t(1) << 48;

bool fail(std::string &error, const std::string &path,
          const std::string &message) {
  error = path + ": " + message;
  return false;
}

/// `text` quoted for a message: whole, or its first 16 characters and its
/// length when longer.
std::string quoted(const std::string &text) {
  if (text.size() <= 16)
    return "'" + text + "'";
  return "'" + text.substr(0, 16) + "...' (" + std::to_string(text.size()) +
         " characters)";
}

/// What a .npy header says about its array.
struct Header {
  std::string descr;
  bool fortranOrder = false;
  std::vector<int64_t> shape;
};

/// Parses the header: the Python literal of a dict with exactly the keys
/// 'descr' (a string), 'fortran_order' (True or False) and 'shape' (a tuple
/// of non-negative integers), in any order, then spaces and the newline
/// that pad it. Anything else is refused with what was expected where. It
/// reads each byte at most once and does not recurse, so its cost is
/// bounded by the header's length whatever the bytes are.
class HeaderParser {
public:
  explicit HeaderParser(std::string_view text) : text(text) {}

  bool parse(Header &header, std::string &why) {
    bool seenDescr = false, seenFortran = false, seenShape = false;
    skipSpace();
    if (!expect('{', "'{' opening the dict", why))
      return false;
    for (;;) {
      skipSpace();
      if (consume('}'))
        break;
      std::string key;
      if (!parseString(key, "a key or '}'", why))
        return false;
      skipSpace();
      if (!expect(':', "':' after '" + key + "'", why))
        return false;
      skipSpace();
      bool *seen = key == "descr"           ? &seenDescr
                   : key == "fortran_order" ? &seenFortran
                   : key == "shape"         ? &seenShape
                                            : nullptr;
      if (!seen)
        return error("unknown key '" + key +
                         "' (expected 'descr', 'fortran_order' and 'shape')",
                     why);
      if (*seen)
        return error("key '" + key + "' appears twice", why);
      *seen = true;
      bool ok = key == "descr" ? parseString(header.descr, "a string", why)
                : key == "fortran_order" ? parseBool(header.fortranOrder, why)
                                         : parseShape(header.shape, why);
      if (!ok)
        return false;
      skipSpace();
      if (consume('}'))
        break;
      if (!expect(',', "',' or '}' after the value of '" + key + "'", why))
        return false;
    }
    skipSpace();
    if (pos != text.size())
      return error("unexpected " + describeNext() + " after the dict", why);
    if (!seenDescr)
      return error("no 'descr'", why);
    if (!seenFortran)
      return error("no 'fortran_order'", why);
    if (!seenShape)
      return error("no 'shape'", why);
    return true;
  }

private:
  bool error(const std::string &message, std::string &why) {
    why = message;
    return false;
  }
  /// "expected X at byte N, found Y".
  bool expected(const std::string &what, std::string &why) {
    return error("expected " + what + " at byte " + std::to_string(pos) +
                     ", found " + describeNext(),
                 why);
  }
  std::string describeNext() const {
    if (pos >= text.size())
      return "the end of the header";
    unsigned char c = text[pos];
    if (c >= 0x20 && c < 0x7f)
      return std::string("'") + static_cast<char>(c) + "'";
    return "byte " + std::to_string(c);
  }
  void skipSpace() {
    while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\t' ||
                                 text[pos] == '\n' || text[pos] == '\r'))
      ++pos;
  }
  bool consume(char c) {
    if (pos < text.size() && text[pos] == c) {
      ++pos;
      return true;
    }
    return false;
  }
  bool expect(char c, const std::string &what, std::string &why) {
    return consume(c) || expected(what, why);
  }
  /// A quoted string without escapes ('...' or "...").
  bool parseString(std::string &value, const std::string &what,
                   std::string &why) {
    if (pos >= text.size() || (text[pos] != '\'' && text[pos] != '"'))
      return expected(what, why);
    char quote = text[pos++];
    size_t end = text.find(quote, pos);
    if (end == std::string_view::npos)
      return error("unterminated string starting at byte " +
                       std::to_string(pos - 1),
                   why);
    std::string_view body = text.substr(pos, end - pos);
    if (body.find('\\') != std::string_view::npos)
      return error("escape sequence in the string at byte " +
                       std::to_string(pos - 1) + " (not supported)",
                   why);
    value.assign(body);
    pos = end + 1;
    return true;
  }
  bool parseBool(bool &value, std::string &why) {
    for (auto [word, meaning] :
         {std::pair<std::string_view, bool>{"True", true}, {"False", false}})
      if (text.substr(pos, word.size()) == word) {
        pos += word.size();
        value = meaning;
        return true;
      }
    return expected("True or False", why);
  }
  /// A tuple of non-negative integers: "()", "(3,)", "(3, 8)", "(3, 8,)".
  bool parseShape(std::vector<int64_t> &shape, std::string &why) {
    if (!expect('(', "'(' opening the shape", why))
      return false;
    for (;;) {
      skipSpace();
      if (consume(')'))
        return true;
      if (pos >= text.size() || text[pos] < '0' || text[pos] > '9')
        return expected("a dimension or ')'", why);
      int64_t dim = 0;
      size_t start = pos;
      while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
        dim = dim * 10 + (text[pos++] - '0');
        if (dim > kMaxDim)
          return error("dimension at byte " + std::to_string(start) +
                           " is larger than 2^48",
                       why);
      }
      if (shape.size() == kMaxRank)
        return error("more than " + std::to_string(kMaxRank) + " dimensions",
                     why);
      shape.push_back(dim);
      skipSpace();
      if (consume(')'))
        return true;
      if (!expect(',', "',' or ')' in the shape", why))
        return false;
    }
  }

  std::string_view text;
  size_t pos = 0;
};
} // namespace

bool liger::npy::read(const std::string &path, HostTensor &tensor,
                      std::string &error) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return fail(error, path, "cannot open the file");
  std::string bytes((std::istreambuf_iterator<char>(in)),
                    std::istreambuf_iterator<char>());
  if (bytes.size() < 10 || bytes.compare(0, 6, kMagic, 6) != 0)
    return fail(error, path, "not a .npy file (bad magic string)");
  uint8_t major = static_cast<uint8_t>(bytes[6]);
  uint8_t minor = static_cast<uint8_t>(bytes[7]);
  if ((major != 1 && major != 2 && major != 3) || minor != 0)
    return fail(error, path,
                "unsupported .npy version " + std::to_string(major) + "." +
                    std::to_string(minor) + " (expected 1.0, 2.0 or 3.0)");
  // Version 1.0 stores the header length in 2 bytes, 2.0 and 3.0 in 4.
  size_t lengthBytes = major == 1 ? 2 : 4;
  size_t headerStart = 8 + lengthBytes;
  if (bytes.size() < headerStart)
    return fail(error, path, "truncated header");
  size_t headerLen = 0;
  for (size_t i = 0; i < lengthBytes; ++i)
    headerLen |= static_cast<size_t>(static_cast<uint8_t>(bytes[8 + i]))
                 << (8 * i);
  if (headerLen > kMaxHeaderBytes)
    return fail(error, path,
                "header of " + std::to_string(headerLen) +
                    " bytes is longer than the " +
                    std::to_string(kMaxHeaderBytes) + " this reader accepts");
  if (bytes.size() < headerStart + headerLen)
    return fail(error, path, "truncated header");
  Header header;
  std::string why;
  if (!HeaderParser(std::string_view(bytes).substr(headerStart, headerLen))
           .parse(header, why))
    return fail(error, path, "malformed header: " + why);

  const DescrEntry *entry = nullptr;
  for (const DescrEntry &e : kDescrs)
    if (header.descr == e.descr)
      entry = &e;
  if (!entry)
    return fail(error, path,
                "unsupported dtype " + quoted(header.descr) +
                    " (expected one of <u2 (bf16 bits), <f2, <f4, <f8, |b1, "
                    "<i4, <i8)");
  if (header.fortranOrder)
    return fail(error, path,
                "Fortran-ordered arrays are not supported; save a C-ordered "
                "copy (numpy.ascontiguousarray)");

  tensor.dtype = entry->dtype;
  tensor.shape = header.shape;
  size_t elementSize = mlir::liger::cpu::getElementSize(entry->dtype);
  // Guard the size product against overflow before trusting it.
  size_t count = 1;
  for (int64_t d : header.shape) {
    if (d != 0 && count > std::numeric_limits<size_t>::max() / elementSize /
                              static_cast<size_t>(d))
      return fail(error, path, "array is too large");
    count *= static_cast<size_t>(d);
  }
  size_t dataStart = headerStart + headerLen;
  size_t expected = count * elementSize;
  if (bytes.size() - dataStart != expected)
    return fail(error, path,
                "expected " + std::to_string(expected) + " bytes of data for " +
                    tensor.describe() + ", found " +
                    std::to_string(bytes.size() - dataStart));
  tensor.data.assign(bytes.begin() + dataStart, bytes.end());
  return true;
}

bool liger::npy::write(const std::string &path, const HostTensor &tensor,
                       std::string &error) {
  const char *descr = nullptr;
  for (const DescrEntry &e : kDescrs)
    if (e.dtype == tensor.dtype)
      descr = e.descr;
  std::ostringstream dict;
  dict << "{'descr': '" << descr << "', 'fortran_order': False, 'shape': (";
  for (int64_t d : tensor.shape)
    dict << d << ", ";
  dict << "), }";
  std::string header = dict.str();
  // Pad with spaces so that the data starts on a 64-byte boundary.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::ofstream out(path, std::ios::binary);
  if (!out)
    return fail(error, path, "cannot create the file");
  out.write(kMagic, 6);
  out.put(1);
  out.put(0);
  out.put(static_cast<char>(header.size() & 0xff));
  out.put(static_cast<char>(header.size() >> 8));
  out << header;
  out.write(reinterpret_cast<const char *>(tensor.data.data()),
            tensor.data.size());
  if (!out)
    return fail(error, path, "write failed");
  return true;
}
