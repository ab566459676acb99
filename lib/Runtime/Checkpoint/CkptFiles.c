/* The file-system steps of a checkpoint write: the atomic swap of the
 * staging directory into place, removal, the writers' lock and the clean-up
 * of staging directories left by writers that died. */
#define _GNU_SOURCE
#include "CkptInternal.h"
#include "Support/Support.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <isa-l/crc.h>
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

/* ---- the target, staging and removal ------------------------------------ */

bool dtCkptResolveTarget(const char *dir, char *out, size_t size, char *err,
                         size_t errSize) {
  char path[PATH_MAX];
  size_t n = strlen(dir);
  while (n > 1 && dir[n - 1] == '/')
    --n;
  if (n == 0 || n >= sizeof(path))
    return dtCkptFail(err, errSize, "checkpoint path '%s' is empty or too long",
                      dir);
  snprintf(path, sizeof(path), "%.*s", (int)n, dir);
  struct stat st;
  char resolved[PATH_MAX];
  if (lstat(path, &st) == 0) {
    /* Another user's link to one of our checkpoints would have the save
     * replace it. */
    DtensorDiag diag;
    if (!dtLinkMayBeFollowed(path, &st, &diag))
      return dtCkptFail(err, errSize, "%s", diag.message);
    /* It exists (a link is resolved here, once): the directory it is. */
    if (!realpath(path, resolved))
      return dtCkptFail(err, errSize, "resolving %s: %s", path,
                        strerror(errno));
    if (stat(resolved, &st) != 0 || !S_ISDIR(st.st_mode))
      return dtCkptFail(err, errSize,
                        "%s%s%s is not a directory; refusing to replace it",
                        path, S_ISLNK(st.st_mode) ? " -> " : "",
                        S_ISLNK(st.st_mode) ? resolved : "");
    if (strlen(resolved) >= size)
      return dtCkptFail(err, errSize, "%s: path too long", resolved);
    snprintf(out, size, "%s", resolved);
    return true;
  }
  /* It does not exist: its parent, resolved, and its own name. */
  const char *slash = strrchr(path, '/');
  const char *base = slash ? slash + 1 : path;
  char parent[PATH_MAX];
  snprintf(parent, sizeof(parent), "%.*s",
           slash ? (int)(slash == path ? 1 : slash - path) : 1,
           slash ? path : ".");
  if (!strcmp(base, ".") || !strcmp(base, ".."))
    return dtCkptFail(err, errSize, "checkpoint path '%s' names no directory",
                      dir);
  if (!realpath(parent, resolved))
    return dtCkptFail(err, errSize, "%s: cannot write into %s: %s", path,
                      parent, strerror(errno));
  if (strlen(resolved) + strlen(base) + 2 > size)
    return dtCkptFail(err, errSize, "%s: path too long", path);
  snprintf(out, size, "%s%s%s", resolved, strcmp(resolved, "/") ? "/" : "",
           base);
  return true;
}

bool dtCkptMakeStaging(const char *dir, char *out, size_t size, char *err,
                       size_t errSize) {
  if ((size_t)snprintf(out, size, "%s.tmp-XXXXXX", dir) >= size)
    return dtCkptFail(err, errSize, "%s: path too long", dir);
  /* Fresh, private and unpredictable: nothing another user planted there
   * can be followed or removed. */
  if (!mkdtemp(out))
    return dtCkptFail(err, errSize,
                      "creating a staging directory beside %s: %s", dir,
                      strerror(errno));
  return true;
}

void dtCkptRemoveDir(const char *dir) {
  /* Never through a link, and only a directory of this user: a staging
   * name another user made could point anywhere. */
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return;
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_uid != geteuid()) {
    close(fd);
    return;
  }
  DIR *d = fdopendir(fd);
  if (!d) {
    close(fd);
    return;
  }
  for (struct dirent *e; (e = readdir(d));)
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
      unlinkat(fd, e->d_name, 0); /* a link itself, never what it names */
  closedir(d);
  rmdir(dir); /* fails on a link (ENOTDIR) */
}

static void syncParent(const char *dir) {
  char parent[4096];
  snprintf(parent, sizeof(parent), "%s", dir);
  char *slash = strrchr(parent, '/');
  if (slash == parent)
    slash[1] = 0;
  else if (slash)
    *slash = 0;
  else
    snprintf(parent, sizeof(parent), ".");
  int fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    fsync(fd);
    close(fd);
  }
}

bool dtCkptCommit(const char *staged, const char *dir, char *err,
                  size_t errSize) {
  /* The staging directory was private; the checkpoint gets the mode a
   * plain mkdir would have given it. */
  if (chmod(staged, 0755 & ~dtCurrentUmask()) != 0)
    return dtCkptFail(err, errSize, "chmod %s: %s", staged, strerror(errno));
  struct stat st;
  if (lstat(dir, &st) != 0) {
    if (rename(staged, dir) != 0)
      return dtCkptFail(err, errSize, "renaming %s to %s: %s", staged, dir,
                        strerror(errno));
    syncParent(dir);
    return true;
  }
  /* Resolved before (dtCkptResolveTarget): a link here now was put there
   * since, and is not swapped out (its target would then be removed). */
  if (!S_ISDIR(st.st_mode))
    return dtCkptFail(err, errSize,
                      "%s changed into something that is not a directory "
                      "during the save; refusing to replace it",
                      dir);
  if (renameat2(AT_FDCWD, staged, AT_FDCWD, dir, RENAME_EXCHANGE) != 0)
    return dtCkptFail(err, errSize, "swapping %s into %s: %s", staged, dir,
                      strerror(errno));
  syncParent(dir);
  dtCkptRemoveDir(staged); /* the previous checkpoint, now at `staged` */
  return true;
}

int dtCkptLock(const char *dir, char *err, size_t errSize) {
  char path[4096];
  snprintf(path, sizeof(path), "%s.lock", dir);
  /* 0600 and ours: another user who could open it could also hold the
   * lock and stop every save. */
  int fd =
      open(path, O_RDWR | O_CREAT | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC, 0600);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    dtCkptFail(err, errSize, "locking %s for writing: %s", path,
               fd < 0 ? strerror(errno) : "not a regular file");
  } else if (st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
    dtCkptFail(err, errSize,
               "locking %s for writing: it belongs to user %u with "
               "mode %04o, not to this user (%u) with mode 0600; remove it",
               path, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777),
               (unsigned)geteuid());
  } else if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
    return fd;
  } else if (errno == EWOULDBLOCK) {
    dtCkptFail(err, errSize,
               "another save into %s is under way (%s is locked); "
               "this one stops, and what is there stays as it is",
               dir, path);
  } else {
    dtCkptFail(err, errSize, "locking %s for writing: %s", path,
               strerror(errno));
  }
  if (fd >= 0)
    close(fd);
  return -1;
}

void dtCkptUnlock(int fd) {
  if (fd >= 0)
    close(fd); /* closing releases the flock */
}

void dtCkptRemoveStaleStaging(const char *dir) {
  char parent[4096], prefix[4096];
  const char *slash = strrchr(dir, '/');
  if (slash) {
    snprintf(parent, sizeof(parent), "%.*s", (int)(slash - dir), dir);
    if (!parent[0])
      snprintf(parent, sizeof(parent), "/");
  } else {
    snprintf(parent, sizeof(parent), ".");
  }
  snprintf(prefix, sizeof(prefix), "%s.tmp-", slash ? slash + 1 : dir);
  DIR *d = opendir(parent);
  for (struct dirent *e; d && (e = readdir(d));)
    if (!strncmp(e->d_name, prefix, strlen(prefix))) {
      char path[8192];
      snprintf(path, sizeof(path), "%s/%s", parent, e->d_name);
      dtCkptRemoveDir(path);
    }
  if (d)
    closedir(d);
}
