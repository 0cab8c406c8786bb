#include "start_afresh.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

namespace gt::services {
namespace {

// Marks every descriptor above stderr close-on-exec (libzmq's and civetweb's
// mostly are already; Gloo's and the rendezvous store's may not be).
void CloseOnExecAboveStderr() {
  DIR* dir = ::opendir("/proc/self/fd");
  if (!dir) return;
  std::vector<int> fds;
  for (dirent* entry = ::readdir(dir); entry; entry = ::readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end != entry->d_name && *end == '\0' && fd > 2 && fd != ::dirfd(dir)) fds.push_back(static_cast<int>(fd));
  }
  ::closedir(dir);
  for (int fd : fds) {
    const int flags = ::fcntl(fd, F_GETFD);
    if (flags >= 0) ::fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
  }
}

}  // namespace

Status StartAfresh(char** argv) {
  std::cout.flush();
  std::cerr.flush();
  CloseOnExecAboveStderr();
  ::execv("/proc/self/exe", argv);
  return Unavailable(std::string("cannot start afresh (execv of /proc/self/exe): ") + std::strerror(errno));
}

}  // namespace gt::services
