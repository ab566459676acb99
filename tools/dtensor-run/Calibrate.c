/* dtensor-run --calibrate FILE -n N [--mesh SHAPE]: times the collectives
 * of this machine on every group of the mesh's axes (the library's
 * dtensorCalibrationMeasure, N forked ranks on shm) and writes the fitted
 * cost file dtensor-propagate, dtensor-spmd and dtensor-plan read with
 * their calibration option (docs/planner.md). */
#include "Run.h"

#include "dtensor-c/Runner.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct Job {
  const DtensorMesh *mesh;
  const char *path, *meshText;
  int n;
} Job;

/* Rank 0 writes the file and prints what it measured. */
static int writeResult(const Job *job, const DtensorCalibration *cal) {
  char host[128] = "?", comment[400], stamp[32] = "?";
  gethostname(host, sizeof(host) - 1);
  time_t t = time(NULL);
  struct tm tm;
  if (gmtime_r(&t, &tm))
    strftime(stamp, sizeof(stamp), "%Y-%m-%d %H:%M UTC", &tm);
  snprintf(comment, sizeof(comment),
           "measured by dtensor-run --calibrate -n %d --mesh %s on %s, "
           "backend shm, %s",
           job->n, job->meshText, host, stamp);
  DtensorDiag diag;
  if (!dtensorCalibrationWrite(cal, job->path, comment, &diag)) {
    fprintf(stderr, "dtensor-run: --calibrate: %s\n", diag.message);
    return 1;
  }
  printf("dtensor-run: wrote %s (%s)\n", job->path, comment);
  FILE *f = fopen(job->path, "r");
  for (char line[256]; f && fgets(line, sizeof(line), f);)
    if (line[0] != '#' && strncmp(line, "dtensor-calibration", 19))
      printf("  %s", line);
  if (f)
    fclose(f);
  return 0;
}

static int calibrateRank(int rank, void *arg) {
  const Job *job = arg;
  DtensorCalibration *cal = NULL;
  DtensorDiag diag;
  if (!dtensorCalibrationMeasure(job->mesh, 1000, &cal, &diag)) {
    fprintf(stderr, "dtensor-run: rank %d: --calibrate: %s\n", rank,
            diag.message);
    return 1;
  }
  int status = rank == 0 ? writeResult(job, cal) : 0;
  dtensorCalibrationDestroy(cal);
  return status;
}

int dtRunCalibrate(const char *path, int n, const char *meshText,
                   const char *timeout) {
  char defaultMesh[16];
  snprintf(defaultMesh, sizeof(defaultMesh), "%d", n);
  if (!meshText)
    meshText = defaultMesh;
  DtensorDiag diag;
  DtensorMesh *mesh = dtensorMeshParse(meshText, &diag);
  if (!mesh) {
    fprintf(stderr, "dtensor-run: --mesh '%s': %s\n", meshText, diag.message);
    return 2;
  }
  if (dtensorMeshGetNumDevices(mesh) != n) {
    fprintf(stderr,
            "dtensor-run: --mesh '%s' has %lld devices; calibrate it with "
            "-n %lld\n",
            meshText, (long long)dtensorMeshGetNumDevices(mesh),
            (long long)dtensorMeshGetNumDevices(mesh));
    dtensorMeshDestroy(mesh);
    return 2;
  }
  Job job = {mesh, path, meshText, n};
  printf("dtensor-run: timing the collectives of mesh %s on %d ranks "
         "(shm)...\n",
         meshText, n);
  fflush(stdout);
  int status = dtRunLaunch(n, "shm", timeout, NULL, calibrateRank, &job);
  dtensorMeshDestroy(mesh);
  return status;
}
