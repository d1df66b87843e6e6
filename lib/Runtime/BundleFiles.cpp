//===- BundleFiles.cpp - the files of a bundle, read as hostile -----------===//
//
// Every file is opened relative to the bundle directory's descriptor with
// O_NOFOLLOW (a symbolic link is refused, wherever it points), O_NONBLOCK
// (a FIFO does not block the open) and O_CLOEXEC, then fstat decides:
// only a regular file of at most the caller's limit is read, with a loop
// bounded by the size fstat gave.
//
//===----------------------------------------------------------------------===//

#include "BundleFiles.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace liger::runtime;

namespace {
/// "a FIFO", "a directory", ...: what a file that is not regular is.
const char *fileKind(mode_t mode) {
  if (S_ISLNK(mode))
    return "a symbolic link";
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISFIFO(mode))
    return "a FIFO";
  if (S_ISCHR(mode))
    return "a character device";
  if (S_ISBLK(mode))
    return "a block device";
  if (S_ISSOCK(mode))
    return "a socket";
  return "not a regular file";
}

/// A file descriptor closed when it goes out of scope.
class FileDescriptor {
public:
  explicit FileDescriptor(int fd) : fd(fd) {}
  ~FileDescriptor() {
    if (fd >= 0)
      ::close(fd);
  }
  int fd;
};
} // namespace

BundleDirectory::~BundleDirectory() {
  if (fd_ >= 0)
    ::close(fd_);
}

Status BundleDirectory::open(const std::string &path) {
  path_ = path;
  fd_ = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd_ < 0) {
    int error = errno;
    return LIGER_MAKE_STATUS(
        error == ENOENT ? StatusCode::kNotFound : StatusCode::kInvalidArgument,
        "cannot read bundle directory " + path + ": " + std::strerror(error));
  }
  return Status::ok();
}

Status BundleDirectory::read(const std::string &name, const char *what,
                             size_t maxBytes, std::string *bytes) const {
  std::string path = path_ + "/" + name;
  auto refuse = [&](const std::string &why) {
    return LIGER_MAKE_STATUS(StatusCode::kInvalidArgument,
                             path + " " + why +
                                 "; a bundle's files are regular files in "
                                 "its directory");
  };
  FileDescriptor file(::openat(fd_, name.c_str(),
                               O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (file.fd < 0) {
    // O_NOFOLLOW refuses a link (ELOOP), a nodev mount a device (EACCES):
    // say what the entry is, where it is no regular file.
    int error = errno;
    struct stat entry;
    if (error != ENOENT &&
        ::fstatat(fd_, name.c_str(), &entry, AT_SYMLINK_NOFOLLOW) == 0 &&
        !S_ISREG(entry.st_mode))
      return refuse(std::string("is ") + fileKind(entry.st_mode));
    return LIGER_MAKE_STATUS(
        error == ENOENT ? StatusCode::kNotFound : StatusCode::kInvalidArgument,
        "cannot read " + path + ": " + std::strerror(error));
  }
  struct stat info;
  if (::fstat(file.fd, &info) != 0) {
    int error = errno;
    return LIGER_MAKE_STATUS(StatusCode::kInternal, "cannot read " + path +
                                                        ": " +
                                                        std::strerror(error));
  }
  if (!S_ISREG(info.st_mode))
    return refuse(std::string("is ") + fileKind(info.st_mode));
  auto size = static_cast<uint64_t>(info.st_size);
  if (size > maxBytes)
    return LIGER_MAKE_STATUS(StatusCode::kInvalidArgument,
                             path + " is " + std::to_string(size) +
                                 " bytes; a " + what + " is at most " +
                                 std::to_string(maxBytes) +
                                 " bytes (the runtime reads no more)");
  bytes->resize(size);
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::read(file.fd, &(*bytes)[done], size - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      int error = errno;
      return LIGER_MAKE_STATUS(StatusCode::kInternal, "cannot read " + path +
                                                          ": " +
                                                          std::strerror(error));
    }
    if (n == 0)
      return LIGER_MAKE_STATUS(StatusCode::kInvalidArgument,
                               path + " shrank while it was read (" +
                                   std::to_string(done) + " of " +
                                   std::to_string(size) + " bytes)");
    done += static_cast<size_t>(n);
  }
  return Status::ok();
}
