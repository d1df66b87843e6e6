//===- Cubin.h - what a cubin is and says about its kernels -----*- C++ -*-===//
//
// A cubin is an ELF file for EM_CUDA; cuModuleLoadData takes it without a
// length and trusts its headers, so a damaged or hand-made one crashes the
// driver. readCubin checks its structure first, bounded by its size
// (every header, section, segment, string, symbol and relocation within
// the file, sizes and offsets without overflow), and reads what it records
// about each kernel in its .nv.info.<kernel> section: the size of every
// parameter, the block it was compiled for (.maxntid / .reqntid), its
// static shared memory. checkCubin then compares a manifest's module with
// it (docs/Design/Kernel-ABI.md, "What the loader checks").
//
// The .nv.info format is NVIDIA's and undocumented: records of a format
// byte, an attribute byte and a 16-bit value or payload length, as read
// from the cubins ptxas writes for every liger kernel template.
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_RUNTIME_CUBIN_H
#define LIGER_RUNTIME_CUBIN_H

#include "liger/Runtime/KernelAbi.h"
#include "liger/Runtime/Status.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace liger::runtime {

namespace cubin {
/// The ELF machine of a cubin.
inline constexpr uint16_t kMachineCuda = 190;
/// The section type of .nv.info sections (SHT_LOPROC).
inline constexpr uint32_t kSectionNvInfo = 0x70000000;
/// The CUDA ELF ABIs: their OS ABI byte, ABI version byte, and where in
/// e_flags they keep the SM (e_flags >> shift & 0xff).
struct ElfAbi {
  uint8_t osAbi, abiVersion;
  int smShift;
};
inline constexpr ElfAbi kElfAbis[] = {{0x33, 7, 0}, {0x41, 8, 8}};
/// Where the parameters start in constant bank 0 (.nv.constant0.<kernel>)
/// on sm_80 to sm_90: what the writer of test cubins uses.
inline constexpr uint16_t kParamBase = 0x210;
/// The format of a .nv.info record: no value, a byte, a 16-bit value, or a
/// payload of the 16-bit length.
enum Format : uint8_t { kNoValue = 1, kByte = 2, kHalf = 3, kSized = 4 };
/// The .nv.info attributes the loader reads.
enum Attribute : uint8_t {
  kMaxThreads = 0x05,     ///< sized: x, y, z (u32) from .maxntid
  kParamCbank = 0x0a,     ///< sized: symbol (u32), offset, size (u16)
  kReqntid = 0x10,        ///< sized: x, y, z (u32) from .reqntid
  kKparamInfo = 0x17,     ///< sized: 0 (u32), ordinal, offset (u16), flags
  kCbankParamSize = 0x19, ///< half: the parameters' bytes
};
/// Attributes of a kernel whose payload lists offsets into its code (of
/// exits, ctaid reads, cache-modified loads, system atomics, cooperative
/// groups and warp-wide instructions, which the driver may patch): each
/// must lie within .text.<kernel>.
inline constexpr uint8_t kCodeOffsetLists[] = {0x1c, 0x1d, 0x25,
                                               0x27, 0x28, 0x31};
/// Attributes of the module-wide .nv.info whose payload starts with the
/// index of the function symbol they are about (its frame, stack sizes and
/// register count): each must be a symbol of the cubin.
inline constexpr uint8_t kSymbolAttributes[] = {0x11, 0x12, 0x23, 0x2f};
/// The size of a parameter in a kKparamInfo record's flags.
inline uint32_t kparamSize(uint32_t flags) { return flags >> 18 & 0x3fff; }
} // namespace cubin

/// What a cubin records about one kernel: a `.text.<name>` section and
/// the global function symbol of that name in it.
struct CubinKernel {
  std::string name;
  /// Whether the cubin has .nv.info.<name>; what follows is read from it.
  bool hasInfo = false;
  /// The size in bytes of each parameter, in order (kKparamInfo).
  std::vector<uint32_t> paramSizes;
  /// Their bytes in constant bank 0 (kCbankParamSize).
  uint32_t paramBytes = 0;
  /// The block it requires (.reqntid) and allows at most (.maxntid); zeros
  /// where the cubin does not record it.
  uint32_t requiredBlock[3] = {0, 0, 0};
  uint32_t maxBlock[3] = {0, 0, 0};
  /// Its static shared memory: the size of .nv.shared.<name>.
  uint64_t staticSharedBytes = 0;
};

/// A well-formed cubin and what it records about its kernels.
struct Cubin {
  /// The SM it was compiled for (90 for sm_90 and sm_90a: the cubin does
  /// not record the "a").
  int sm = 0;
  std::vector<CubinKernel> kernels;

  /// The kernel named `name`, or null.
  const CubinKernel *find(std::string_view name) const;
};

/// Reads the `size` bytes at `data` as a cubin, refusing what is not a
/// well-formed one ("<origin> is not a well-formed cubin: ..."). Reads
/// nothing outside the `size` bytes, and its work is bounded by them.
Status readCubin(const void *data, size_t size, const std::string &origin,
                 Cubin *cubin);

/// Compares `module` (verified: verifyManifest) with its cubin `cubin`
/// (read from `origin`): the SM of its arch; that every kernel, prepare
/// and finishing kernel it names is a function of the cubin with .nv.info;
/// that the arguments a launch passes (8 bytes per memref descriptor word,
/// 128 per tensor map) are the parameters the cubin's .nv.info lists; and
/// that the block is the one the cubin records (.reqntid, or .maxntid,
/// which liger's kernels carry as the block they were built for). The grid
/// and the dynamic shared memory a kernel needs are not in the cubin
/// (docs/Design/Kernel-ABI.md).
Status checkCubin(const ModuleSpec &module, const Cubin &cubin,
                  const std::string &origin);

} // namespace liger::runtime

#endif // LIGER_RUNTIME_CUBIN_H
