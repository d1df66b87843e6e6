//===- Npy.cpp - read and write NumPy .npy files --------------------------===//

#include "Npy.h"

#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <regex>
#include <sstream>

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

bool fail(std::string &error, const std::string &path,
          const std::string &message) {
  error = path + ": " + message;
  return false;
}
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
  size_t headerLen, headerStart;
  if (major == 1) {
    headerLen =
        static_cast<uint8_t>(bytes[8]) | (static_cast<uint8_t>(bytes[9]) << 8);
    headerStart = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12)
      return fail(error, path, "truncated header");
    headerLen = 0;
    for (int i = 0; i < 4; ++i)
      headerLen |= static_cast<size_t>(static_cast<uint8_t>(bytes[8 + i]))
                   << (8 * i);
    headerStart = 12;
  } else {
    return fail(error, path,
                "unsupported .npy version " + std::to_string(major));
  }
  if (bytes.size() < headerStart + headerLen)
    return fail(error, path, "truncated header");
  std::string header = bytes.substr(headerStart, headerLen);

  std::smatch m;
  if (!std::regex_search(header, m, std::regex("'descr'\\s*:\\s*'([^']*)'")))
    return fail(error, path, "header has no 'descr'");
  std::string descr = m[1];
  const DescrEntry *entry = nullptr;
  for (const DescrEntry &e : kDescrs)
    if (descr == e.descr)
      entry = &e;
  if (!entry)
    return fail(error, path,
                "unsupported dtype '" + descr +
                    "' (expected one of <u2 (bf16 bits), <f2, <f4, <f8, |b1, "
                    "<i4, <i8)");
  if (!std::regex_search(header, m,
                         std::regex("'fortran_order'\\s*:\\s*(True|False)")))
    return fail(error, path, "header has no 'fortran_order'");
  if (m[1] == "True")
    return fail(error, path,
                "Fortran-ordered arrays are not supported; save a C-ordered "
                "copy (numpy.ascontiguousarray)");
  if (!std::regex_search(header, m,
                         std::regex("'shape'\\s*:\\s*\\(([^)]*)\\)")))
    return fail(error, path, "header has no 'shape'");
  std::vector<int64_t> shape;
  std::string dims = m[1];
  std::regex number("[0-9]+");
  for (auto it = std::sregex_iterator(dims.begin(), dims.end(), number);
       it != std::sregex_iterator(); ++it) {
    std::string text = it->str();
    if (text.size() > 15)
      return fail(error, path, "dimension " + text + " is too large");
    shape.push_back(std::stoll(text));
  }

  tensor.dtype = entry->dtype;
  tensor.shape = shape;
  size_t elementSize = mlir::liger::cpu::getElementSize(entry->dtype);
  // Guard the size product against overflow before trusting it.
  size_t count = 1;
  for (int64_t d : shape) {
    if (d != 0 && count > std::numeric_limits<size_t>::max() / elementSize / d)
      return fail(error, path, "array is too large");
    count *= d;
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
