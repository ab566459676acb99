/* The file helpers of Support.h: what the project reads from and writes to
 * the file system is checked here (docs/security.md). */
#include "Support/Support.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int dtOpenRegular(const char *path, bool followLink, struct stat *outStat,
                  DtensorDiag *outDiag) {
  /* O_NONBLOCK: opening a FIFO must not wait for a writer. */
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC |
                          (followLink ? 0 : O_NOFOLLOW));
  if (fd < 0) {
    dtDiag(outDiag, -1, "%s: cannot read: %s", path,
           errno == ELOOP && !followLink ? "it is a symbolic link"
                                         : strerror(errno));
    return -1;
  }
  struct stat st;
  const char *why = NULL;
  if (fstat(fd, &st) != 0)
    why = strerror(errno);
  else if (S_ISDIR(st.st_mode))
    why = "is a directory";
  else if (S_ISFIFO(st.st_mode))
    why = "is a FIFO";
  else if (S_ISSOCK(st.st_mode))
    why = "is a socket";
  else if (!S_ISREG(st.st_mode))
    why = "is a device";
  if (why) {
    dtDiag(outDiag, -1,
           "%s: %s: only a regular file is read (a FIFO or a device would "
           "block or never end)",
           path, why);
    close(fd);
    return -1;
  }
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    dtDiag(outDiag, -1, "%s: cannot read: %s", path, strerror(errno));
    close(fd);
    return -1;
  }
  if (outStat)
    *outStat = st;
  return fd;
}

FILE *dtOpenRegularFile(const char *path, DtensorDiag *outDiag) {
  int fd = dtOpenRegular(path, true, NULL, outDiag);
  if (fd < 0)
    return NULL;
  FILE *f = fdopen(fd, "r");
  if (!f) {
    dtDiag(outDiag, -1, "%s: cannot read: %s", path, strerror(errno));
    close(fd);
  }
  return f;
}
