//===- BundleFiles.h - the files of a bundle, read as hostile ---*- C++ -*-===//
//
// How Bundle::open reads a bundle's files: only regular files, named in the
// bundle directory itself (the manifest's file names have no directory:
// verifyManifest), opened without following a symbolic link and without
// blocking on a FIFO, and never more than a documented number of bytes
// (kMaxManifestBytes, kMaxCubinBytes in Bundle.h). The directory itself
// may be a symbolic link: the caller chose that path.
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_LIB_RUNTIME_BUNDLEFILES_H
#define LIGER_LIB_RUNTIME_BUNDLEFILES_H

#include "liger/Runtime/Status.h"

#include <cstddef>
#include <string>

namespace liger::runtime {

/// A bundle directory, open for reading its files (closed on destruction).
class BundleDirectory {
public:
  BundleDirectory() = default;
  BundleDirectory(const BundleDirectory &) = delete;
  BundleDirectory &operator=(const BundleDirectory &) = delete;
  ~BundleDirectory();

  /// Opens the directory `path`.
  Status open(const std::string &path);

  /// Reads the file `name` of the directory (a name without '/') into
  /// `bytes`: refused when it is a symbolic link, not a regular file, or
  /// larger than `maxBytes` ("a <what> is at most N bytes"), before any
  /// byte of it is read.
  Status read(const std::string &name, const char *what, size_t maxBytes,
              std::string *bytes) const;

private:
  int fd_ = -1;
  std::string path_;
};

} // namespace liger::runtime

#endif // LIGER_LIB_RUNTIME_BUNDLEFILES_H
