/* The file helpers of Support.h: what the project reads from and writes to
 * the file system is checked here (docs/security.md). */
#include "Support/Support.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

FILE *dtOpenRegularFile(const char *path, DtensorDiag *outDiag) {
  /* O_NONBLOCK: opening a FIFO must not wait for a writer. */
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    dtDiag(outDiag, -1, "%s: cannot read: %s", path, strerror(errno));
    return NULL;
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
    return NULL;
  }
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    dtDiag(outDiag, -1, "%s: cannot read: %s", path, strerror(errno));
    close(fd);
    return NULL;
  }
  FILE *f = fdopen(fd, "r");
  if (!f) {
    dtDiag(outDiag, -1, "%s: cannot read: %s", path, strerror(errno));
    close(fd);
  }
  return f;
}
