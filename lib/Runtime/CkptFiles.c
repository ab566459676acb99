/* The file-system steps of a checkpoint write: the atomic swap of the
 * staging directory into place, removal, the writers' lock and the clean-up
 * of staging directories left by writers that died. */
#define _GNU_SOURCE
#include "CkptInternal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <isa-l/crc.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

/* ---- the atomic swap ----------------------------------------------------- */

void dtCkptRemoveDir(const char *dir) {
  DIR *d = opendir(dir);
  if (!d)
    return;
  for (struct dirent *e; (e = readdir(d));) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
      continue;
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
    unlink(path);
  }
  closedir(d);
  rmdir(dir);
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
  struct stat st;
  if (stat(dir, &st) != 0) {
    if (rename(staged, dir) != 0)
      return dtCkptFail(err, errSize, "renaming %s to %s: %s", staged, dir,
                        strerror(errno));
    syncParent(dir);
    return true;
  }
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
