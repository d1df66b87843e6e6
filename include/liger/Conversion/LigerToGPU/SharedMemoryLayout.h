//===- SharedMemoryLayout.h - named regions of shared memory ----*- C++ -*-===//
//
// The dynamic shared memory of one kernel as named regions at fixed byte
// offsets. A template builds its layout once from its plan and
// configuration; the configuration's selection and verification read its
// size, and the emitters read every offset from it, so that no offset is
// written twice and the size cannot disagree with what the kernel uses.
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_CONVERSION_LIGERTOGPU_SHAREDMEMORYLAYOUT_H
#define LIGER_CONVERSION_LIGERTOGPU_SHAREDMEMORYLAYOUT_H

#include "mlir/Support/LLVM.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace llvm {
class raw_ostream;
} // namespace llvm

namespace mlir::liger {

/// One region: `bytes` bytes at `offset`, holding an array of `shape`
/// elements when the emitters view it as a memref (empty otherwise).
struct SharedMemoryRegion {
  std::string name;
  int64_t offset = 0;
  int64_t bytes = 0;
  SmallVector<int64_t> shape;
  /// The region whose bytes this one reuses once that region's contents
  /// are dead, or empty.
  std::string over;
};

class SharedMemoryLayout {
public:
  /// Places `bytes` bytes after every region so far, at the next multiple
  /// of `alignment`; returns the offset.
  int64_t append(StringRef name, int64_t bytes, int64_t alignment);
  /// An array of `shape` elements of `elementBytes` bytes, appended.
  int64_t appendArray(StringRef name, ArrayRef<int64_t> shape,
                      int64_t elementBytes, int64_t alignment);
  /// Places `bytes` bytes at region `over`'s offset: a region used once
  /// `over`'s contents are dead (an epilogue's staging over the drained
  /// operand buffers). It may extend past `over`; the size covers it.
  int64_t overlay(StringRef name, StringRef over, int64_t bytes,
                  ArrayRef<int64_t> shape = {});

  bool has(StringRef name) const { return find(name) != nullptr; }
  /// The region `name`, which the layout must hold.
  const SharedMemoryRegion &operator[](StringRef name) const;
  int64_t offset(StringRef name) const { return (*this)[name].offset; }
  /// The bytes the kernel needs: the end of the furthest region.
  int64_t size() const { return end; }
  ArrayRef<SharedMemoryRegion> regions() const { return all; }

  /// One line per region: `name offset bytes [over <region>]`, then the
  /// size.
  void print(llvm::raw_ostream &os) const;

private:
  const SharedMemoryRegion *find(StringRef name) const;
  SmallVector<SharedMemoryRegion> all;
  int64_t end = 0;
};

} // namespace mlir::liger

#endif // LIGER_CONVERSION_LIGERTOGPU_SHAREDMEMORYLAYOUT_H
