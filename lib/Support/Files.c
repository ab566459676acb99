/* The file helpers of Support.h: what the project reads from and writes to
 * the file system is checked here (docs/security.md). */
#define _XOPEN_SOURCE 700
#include "Support/Support.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdlib.h>
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

mode_t dtCurrentUmask(void) {
  /* Linux >= 4.7 says it in /proc/self/status; umask() would change it
   * for every thread meanwhile. */
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  unsigned mask = 022;
  while (f && fgets(line, sizeof(line), f))
    if (sscanf(line, "Umask: %o", &mask) == 1)
      break;
  if (f)
    fclose(f);
  return (mode_t)mask;
}

bool dtLinkMayBeFollowed(const char *path, const struct stat *st,
                         DtensorDiag *outDiag) {
  if (!S_ISLNK(st->st_mode) || st->st_uid == geteuid() || st->st_uid == 0)
    return true;
  return dtDiag(outDiag, -1,
                "'%s' is a symbolic link of user %u: refusing to write "
                "through it or follow it (remove it, or use another path)",
                path, (unsigned)st->st_uid);
}

/* Writes through a fresh temporary file beside `target` that replaces it
 * at the end. */
static bool openTemporary(DtOutput *out, const char *target, mode_t mode,
                          DtensorDiag *outDiag) {
  if ((size_t)snprintf(out->tmp, sizeof(out->tmp), "%s.tmp-XXXXXX", target) >=
          sizeof(out->tmp) ||
      (size_t)snprintf(out->target, sizeof(out->target), "%s", target) >=
          sizeof(out->target)) {
    out->tmp[0] = 0;
    return dtDiag(outDiag, -1, "%s: path too long", out->path);
  }
  int fd = mkstemp(out->tmp);
  if (fd < 0) {
    out->tmp[0] = 0;
    return dtDiag(outDiag, -1, "cannot write '%s': %s", out->path,
                  strerror(errno));
  }
  fchmod(fd, mode);
  out->file = fdopen(fd, "w");
  if (!out->file) {
    close(fd);
    unlink(out->tmp);
    out->tmp[0] = 0;
    return dtDiag(outDiag, -1, "cannot write '%s': %s", out->path,
                  strerror(errno));
  }
  return true;
}

bool dtOutputOpen(DtOutput *out, const char *path, DtensorDiag *outDiag) {
  memset(out, 0, sizeof(*out));
  snprintf(out->path, sizeof(out->path), "%s", path);
  if (!strcmp(path, "-")) {
    out->file = stdout;
    return true;
  }
  struct stat st;
  if (lstat(path, &st) != 0)
    return openTemporary(out, path, 0666 & ~dtCurrentUmask(), outDiag);
  if (S_ISLNK(st.st_mode)) {
    if (!dtLinkMayBeFollowed(path, &st, outDiag))
      return false;
    char target[PATH_MAX];
    struct stat ts;
    if (realpath(path, target) &&
        (stat(target, &ts) != 0 ? errno == ENOENT : S_ISREG(ts.st_mode)))
      return openTemporary(out, target,
                           stat(target, &ts) == 0 ? (ts.st_mode & 07777)
                                                  : 0666 & ~dtCurrentUmask(),
                           outDiag);
  } else if (S_ISREG(st.st_mode)) {
    if (openTemporary(out, path, st.st_mode & 07777, NULL))
      return true;
    /* A directory this user cannot write into (the file itself it may):
     * written in place, never through a link. */
    int fd = open(path, O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC);
    out->file = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!out->file) {
      if (fd >= 0)
        close(fd);
      return dtDiag(outDiag, -1, "cannot write '%s': %s", path,
                    strerror(errno));
    }
    return true;
  }
  /* A device or a FIFO (/dev/null, /dev/stdout): written directly. */
  out->file = fopen(path, "w");
  if (!out->file)
    return dtDiag(outDiag, -1, "cannot write '%s': %s", path, strerror(errno));
  return true;
}

bool dtOutputClose(DtOutput *out, bool keep, DtensorDiag *outDiag) {
  if (!out->file)
    return keep ? dtDiag(outDiag, -1, "'%s' was not opened", out->path) : true;
  errno = 0;
  bool ok = fflush(out->file) == 0 && !ferror(out->file);
  int e = errno;
  bool toStdout = out->file == stdout;
  if (!toStdout && fclose(out->file) != 0 && ok) {
    ok = false;
    e = errno;
  }
  out->file = NULL;
  /* rename replaces whatever is at the path now (a link planted since is
   * replaced, not followed). */
  if (ok && keep && out->tmp[0] && rename(out->tmp, out->target) != 0) {
    ok = false;
    e = errno;
  }
  if (out->tmp[0] && !(ok && keep))
    unlink(out->tmp);
  out->tmp[0] = 0;
  if (ok || !keep)
    return true;
  return dtDiag(outDiag, -1, "cannot write '%s': %s",
                toStdout ? "<stdout>" : out->path,
                e ? strerror(e) : "write error");
}

/* Whether `st` belongs to this user or root and nobody else may write it. */
static bool ownedAndClosed(const struct stat *st) {
  return (st->st_uid == geteuid() || st->st_uid == 0) &&
         (st->st_mode & (S_IWGRP | S_IWOTH)) == 0;
}

bool dtCheckTrusted(const char *path, const struct stat *st,
                    DtensorDiag *outDiag) {
  if (ownedAndClosed(st))
    return true;
  return dtDiag(outDiag, -1,
                "%s belongs to user %u with mode %04o: refusing to use it "
                "(it must be this user's (%u) or root's and writable by no "
                "one else, as ssh's StrictModes wants)",
                path, (unsigned)st->st_uid, (unsigned)(st->st_mode & 07777),
                (unsigned)geteuid());
}

bool dtCheckTrustedDir(const char *path, DtensorDiag *outDiag) {
  struct stat st;
  if (lstat(path, &st) != 0)
    return dtDiag(outDiag, -1, "%s: %s", path, strerror(errno));
  if (S_ISLNK(st.st_mode)) {
    if (!dtLinkMayBeFollowed(path, &st, outDiag))
      return false;
    if (stat(path, &st) != 0)
      return dtDiag(outDiag, -1, "%s: %s", path, strerror(errno));
  }
  if (!S_ISDIR(st.st_mode))
    return dtDiag(outDiag, -1, "%s is not a directory", path);
  return dtCheckTrusted(path, &st, outDiag);
}

bool dtMakeTempDir(const char *prefix, char *out, size_t size) {
  const char *tmp = getenv("TMPDIR");
  int n =
      snprintf(out, size, "%s/%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", prefix);
  if (n < 0 || (size_t)n >= size || !mkdtemp(out)) {
    if (size)
      out[0] = 0;
    return false;
  }
  return true;
}

static int removeEntry(const char *path, const struct stat *st, int type,
                       struct FTW *ftw) {
  (void)st;
  (void)ftw;
  if (type == FTW_DP)
    rmdir(path);
  else
    unlink(path);
  return 0;
}

void dtRemoveTree(const char *dir) {
  /* Depth first, links as links, within the directory's file system. */
  nftw(dir, removeEntry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}
