//===- SharedMemoryLayout.cpp - named regions of shared memory ------------===//

#include "liger/Conversion/LigerToGPU/SharedMemoryLayout.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::liger;

int64_t SharedMemoryLayout::append(StringRef name, int64_t bytes,
                                   int64_t alignment) {
  assert(!has(name) && "a region is placed once");
  int64_t offset = static_cast<int64_t>(
      llvm::alignTo(static_cast<uint64_t>(end), alignment));
  all.push_back({name.str(), offset, bytes, {}, {}});
  end = offset + bytes;
  return offset;
}

int64_t SharedMemoryLayout::appendArray(StringRef name, ArrayRef<int64_t> shape,
                                        int64_t elementBytes,
                                        int64_t alignment) {
  int64_t bytes = elementBytes;
  for (int64_t d : shape)
    bytes *= d;
  int64_t offset = append(name, bytes, alignment);
  all.back().shape.assign(shape.begin(), shape.end());
  return offset;
}

int64_t SharedMemoryLayout::overlay(StringRef name, StringRef over,
                                    int64_t bytes, ArrayRef<int64_t> shape) {
  assert(!has(name) && "a region is placed once");
  int64_t offset = (*this)[over].offset;
  all.push_back({name.str(), offset, bytes,
                 SmallVector<int64_t>(shape.begin(), shape.end()), over.str()});
  end = std::max(end, offset + bytes);
  return offset;
}

const SharedMemoryRegion *SharedMemoryLayout::find(StringRef name) const {
  const SharedMemoryRegion *it = llvm::find_if(
      all, [&](const SharedMemoryRegion &r) { return r.name == name; });
  return it == all.end() ? nullptr : it;
}

const SharedMemoryRegion &SharedMemoryLayout::operator[](StringRef name) const {
  const SharedMemoryRegion *region = find(name);
  if (!region)
    llvm::report_fatal_error(llvm::Twine("no shared-memory region '") + name +
                             "'");
  return *region;
}

void SharedMemoryLayout::print(llvm::raw_ostream &os) const {
  for (const SharedMemoryRegion &r : all) {
    os << r.name << " " << r.offset << " " << r.bytes;
    if (!r.over.empty())
      os << " over " << r.over;
    os << "\n";
  }
  os << "size " << end << "\n";
}
