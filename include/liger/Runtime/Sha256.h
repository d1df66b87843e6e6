//===- Sha256.h - SHA-256, for the digests of a bundle's cubins -*- C++ -*-===//
//
// The bundle writer records the SHA-256 digest of each cubin in the
// manifest (cubin_sha256) and Bundle::open checks it before the cubin goes
// near the driver: a copy cut short or a flipped bit is refused with a
// message instead of crashing cuModuleLoadData, which takes no length.
// SHA-256 (FIPS 180-4) rather than a CRC: it is the digest users already
// compute (sha256sum) to compare a bundle with the one they built, and its
// cost is paid once per open (about 10 ms per MiB on a build machine's
// core; a Llama layer's 170 KiB cubin, 2 ms). No dependency.
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_RUNTIME_SHA256_H
#define LIGER_RUNTIME_SHA256_H

#include <cstddef>
#include <string>

namespace liger::runtime {

/// The SHA-256 digest of the `size` bytes at `data`, as 64 lowercase
/// hexadecimal digits (what sha256sum prints).
std::string sha256Hex(const void *data, size_t size);

} // namespace liger::runtime

#endif // LIGER_RUNTIME_SHA256_H
