/* Measured costs of collectives (dtensor-c/Planner.h, docs/planner.md): per
 * (pattern, set of mesh axes), a latency and a bandwidth fitted to timings,
 * and the text file that holds them:
 *
 *     # a comment line
 *     dtensor-calibration 1
 *     mesh 2x2
 *     all_gather 0 12.5 3.2      <- collective, axes, latency µs, GB/s
 *     all_reduce 0,1 20.1 2.9
 *     contract 1.8 21.5          <- a contraction: µs per call, G MAC/s
 */
#include "PlannerInternal.h"

#include "Support/Support.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { NUM_PATTERNS = DTENSOR_COMM_REDUCE_SCATTER + 1 };

typedef struct Fit {
  bool set;
  double latencyUs, bandwidthGBps;
} Fit;

struct DtensorCalibration {
  int meshRank;
  int64_t meshShape[DTENSOR_MAX_MESH_RANK];
  Fit fits[NUM_PATTERNS][1u << DTENSOR_MAX_MESH_RANK]; /* by axes mask */
  Fit contract; /* latency: µs per call; bandwidth: G multiply-adds/s */
};

static bool measurable(DtensorCommPattern p) {
  return p == DTENSOR_COMM_ALL_GATHER || p == DTENSOR_COMM_ALL_TO_ALL ||
         p == DTENSOR_COMM_ALL_REDUCE || p == DTENSOR_COMM_REDUCE_SCATTER;
}

DtensorCalibration *dtensorCalibrationCreate(int meshRank,
                                             const int64_t *meshShape) {
  if (meshRank < 1 || meshRank > DTENSOR_MAX_MESH_RANK)
    return NULL;
  for (int a = 0; a < meshRank; ++a)
    if (meshShape[a] < 1)
      return NULL;
  DtensorCalibration *cal = calloc(1, sizeof(*cal));
  if (!cal)
    return NULL;
  cal->meshRank = meshRank;
  memcpy(cal->meshShape, meshShape, sizeof(int64_t) * (size_t)meshRank);
  return cal;
}

void dtensorCalibrationDestroy(DtensorCalibration *cal) { free(cal); }

/* The axes as a set; 0 when one is out of range or repeated. */
static unsigned axesMask(const DtensorCalibration *cal, int numAxes,
                         const int *axes) {
  unsigned mask = 0;
  for (int i = 0; i < numAxes; ++i) {
    if (axes[i] < 0 || axes[i] >= cal->meshRank || (mask >> axes[i] & 1))
      return 0;
    mask |= 1u << axes[i];
  }
  return mask;
}

bool dtensorCalibrationSet(DtensorCalibration *cal, DtensorCommPattern pattern,
                           int numAxes, const int *axes, double latencyUs,
                           double bandwidthGBps, DtensorDiag *outDiag) {
  if (!measurable(pattern))
    return dtDiag(outDiag, -1,
                  "'%s' is not calibrated (all_gather, all_to_all, "
                  "all_reduce, reduce_scatter)",
                  dtensorCommPatternGetName(pattern));
  unsigned mask = axesMask(cal, numAxes, axes);
  if (!mask)
    return dtDiag(outDiag, -1,
                  "the axes of a calibrated group must be distinct mesh "
                  "axes from 0 to %d",
                  cal->meshRank - 1);
  if (!(latencyUs >= 0) || !(bandwidthGBps > 0) || !isfinite(latencyUs) ||
      !isfinite(bandwidthGBps))
    return dtDiag(outDiag, -1,
                  "a latency must be a finite number >= 0 µs and a "
                  "bandwidth a finite number > 0 GB/s (got %g and %g)",
                  latencyUs, bandwidthGBps);
  Fit *f = &cal->fits[pattern][mask];
  f->set = true;
  f->latencyUs = latencyUs;
  f->bandwidthGBps = bandwidthGBps;
  return true;
}

bool dtensorCalibrationGet(const DtensorCalibration *cal,
                           DtensorCommPattern pattern, int numAxes,
                           const int *axes, double *outLatencyUs,
                           double *outBandwidthGBps) {
  if (!cal || !measurable(pattern))
    return false;
  unsigned mask = axesMask(cal, numAxes, axes);
  const Fit *f = &cal->fits[pattern][mask];
  if (!mask || !f->set)
    return false;
  *outLatencyUs = f->latencyUs;
  *outBandwidthGBps = f->bandwidthGBps;
  return true;
}

bool dtensorCalibrationSetContract(DtensorCalibration *cal, double overheadUs,
                                   double gmacs, DtensorDiag *outDiag) {
  if (!(overheadUs >= 0) || !(gmacs > 0) || !isfinite(overheadUs) ||
      !isfinite(gmacs))
    return dtDiag(outDiag, -1,
                  "a contraction's overhead must be a finite number >= 0 µs "
                  "and its rate a finite number > 0 G multiply-adds per "
                  "second (got %g and %g)",
                  overheadUs, gmacs);
  cal->contract = (Fit){true, overheadUs, gmacs};
  return true;
}

bool dtensorCalibrationGetContract(const DtensorCalibration *cal,
                                   double *outOverheadUs, double *outGmacs) {
  if (!cal || !cal->contract.set)
    return false;
  *outOverheadUs = cal->contract.latencyUs;
  *outGmacs = cal->contract.bandwidthGBps;
  return true;
}

/* Least squares of us = latency + x * slope, each sample weighted 1 or
 * (relative) 1 / us^2, latency at least 0; the rate 1 / (slope * 1e3) per
 * second in G units of x, capped at 1e6. */
static bool fitLine(const int64_t *x, const double *us, int count,
                    bool relative, double *outLatencyUs, double *outRate) {
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (int i = 0; i < count; ++i) {
    if (relative && !(us[i] > 0))
      return false;
    double w = relative ? 1.0 / (us[i] * us[i]) : 1.0, xi = (double)x[i];
    sw += w;
    sx += w * xi;
    sy += w * us[i];
    sxx += w * xi * xi;
    sxy += w * xi * us[i];
  }
  double det = sw * sxx - sx * sx;
  if (count < 2 || !(det > 1e-9 * sxx * sw))
    return false;
  double slope = (sw * sxy - sx * sy) / det; /* µs per unit of x */
  double latency = (sy - slope * sx) / sw;
  if (latency < 0) { /* refit through the origin */
    latency = 0;
    slope = sxx > 0 ? sxy / sxx : 0;
  }
  const double maxRate = 1e6;
  *outLatencyUs = latency;
  *outRate = slope > 1.0 / (maxRate * 1e3) ? 1.0 / (slope * 1e3) : maxRate;
  return true;
}

bool dtensorCalibrationFit(const int64_t *bytes, const double *us, int count,
                           double *outLatencyUs, double *outBandwidthGBps) {
  return fitLine(bytes, us, count, false, outLatencyUs, outBandwidthGBps);
}

bool dtensorCalibrationFitContract(const int64_t *macs, const double *us,
                                   int count, double *outOverheadUs,
                                   double *outGmacs) {
  return fitLine(macs, us, count, true, outOverheadUs, outGmacs);
}

/* ---- the file ------------------------------------------------------------ */

static bool patternParse(const char *name, DtensorCommPattern *out) {
  for (int p = 0; p < NUM_PATTERNS; ++p)
    if (measurable((DtensorCommPattern)p) &&
        !strcmp(name, dtensorCommPatternGetName((DtensorCommPattern)p))) {
      *out = (DtensorCommPattern)p;
      return true;
    }
  return false;
}

/* "0,1" into axes; false if it is not a list of numbers. */
static bool axesParse(const char *text, int *numAxes, int *axes) {
  *numAxes = 0;
  const char *p = text;
  while (*p) {
    char *end;
    long a = strtol(p, &end, 10);
    if (end == p || a < 0 || a >= DTENSOR_MAX_MESH_RANK ||
        *numAxes == DTENSOR_MAX_MESH_RANK)
      return false;
    axes[(*numAxes)++] = (int)a;
    p = end;
    if (*p == ',')
      ++p;
    else if (*p)
      return false;
  }
  return *numAxes > 0;
}

/* "contract OVERHEAD_US GMACS". */
static bool readContract(DtensorCalibration *cal, const char *line,
                         DtensorDiag *outDiag) {
  char name[32], extra[2];
  double overhead, gmacs;
  if (sscanf(line, "%31s %lf %lf %1s", name, &overhead, &gmacs, extra) != 3)
    return dtDiag(outDiag, -1,
                  "expected 'contract OVERHEAD_US GMACS' (e.g. 'contract 1.8 "
                  "21.5')");
  return dtensorCalibrationSetContract(cal, overhead, gmacs, outDiag);
}

/* One line after the header: "collective axes latency bandwidth", or the
 * contraction rate. */
static bool readFit(DtensorCalibration *cal, const char *line,
                    DtensorDiag *outDiag) {
  char name[32], axesText[64], extra[2];
  double latency, bandwidth;
  if (!strncmp(line, "contract", 8) && (line[8] == ' ' || line[8] == '\t'))
    return readContract(cal, line, outDiag);
  int fields = sscanf(line, "%31s %63s %lf %lf %1s", name, axesText, &latency,
                      &bandwidth, extra);
  DtensorCommPattern pattern;
  int numAxes, axes[DTENSOR_MAX_MESH_RANK];
  if (fields != 4)
    return dtDiag(outDiag, -1,
                  "expected 'COLLECTIVE AXES LATENCY_US BANDWIDTH_GBPS' "
                  "(e.g. 'all_gather 0,1 12.5 3.2')");
  if (!patternParse(name, &pattern))
    return dtDiag(outDiag, -1,
                  "unknown collective '%s' (valid: all_gather, all_to_all, "
                  "all_reduce, reduce_scatter; or 'contract')",
                  name);
  if (!axesParse(axesText, &numAxes, axes))
    return dtDiag(outDiag, -1, "axes '%s' are not a list like 0 or 0,1",
                  axesText);
  return dtensorCalibrationSet(cal, pattern, numAxes, axes, latency, bandwidth,
                               outDiag);
}

/* The header lines: the format's name and version, then the mesh. */
static bool readHeader(char *line, int lineNo, DtensorCalibration **cal,
                       DtensorDiag *outDiag) {
  char word[32], value[256], extra[2];
  if (sscanf(line, "%31s %255s %1s", word, value, extra) != 2)
    word[0] = '\0';
  if (lineNo == 1 &&
      (strcmp(word, "dtensor-calibration") || strcmp(value, "1")))
    return dtDiag(outDiag, -1,
                  "not a dtensor calibration file (its first line must be "
                  "'dtensor-calibration 1')");
  if (lineNo == 2) {
    /* The mesh as dtensor-plan and dtensor-run --mesh write it. */
    DtensorMesh *mesh =
        strcmp(word, "mesh") ? NULL : dtensorMeshParse(value, NULL);
    if (!mesh)
      return dtDiag(outDiag, -1, "expected 'mesh SHAPE' (e.g. 'mesh 2x2')");
    int64_t shape[DTENSOR_MAX_MESH_RANK];
    int rank = dtensorMeshGetRank(mesh);
    for (int a = 0; a < rank; ++a)
      shape[a] = dtensorMeshGetAxisSize(mesh, a);
    dtensorMeshDestroy(mesh);
    *cal = dtensorCalibrationCreate(rank, shape);
    if (!*cal)
      return dtDiag(outDiag, -1, "out of memory");
  }
  return true;
}

DtensorCalibration *dtensorCalibrationRead(const char *path,
                                           DtensorDiag *outDiag) {
  FILE *f = dtOpenRegularFile(path, outDiag);
  if (!f)
    return NULL;
  DtensorCalibration *cal = NULL;
  /* Lines of any length: a long comment is still a comment. */
  char *line = NULL;
  size_t capacity = 0;
  int lineNo = 0, kept = 0;
  bool ok = true;
  DtensorDiag d;
  while (ok && getline(&line, &capacity, f) >= 0) {
    ++lineNo;
    char *p = line + strspn(line, " \t");
    if (*p == '#' || *p == '\n' || *p == '\0')
      continue;
    p[strcspn(p, "\n")] = '\0';
    ++kept;
    ok = kept <= 2 ? readHeader(p, kept, &cal, &d) : readFit(cal, p, &d);
  }
  if (ok && ferror(f)) {
    ok = false;
    snprintf(d.message, sizeof(d.message), "read error");
  }
  free(line);
  fclose(f);
  if (ok && kept < 2) {
    ok = false;
    snprintf(d.message, sizeof(d.message),
             "no 'dtensor-calibration 1' and 'mesh SHAPE' lines");
  }
  if (!ok) {
    dtDiag(outDiag, -1, "%s:%d: %s", path, lineNo, d.message);
    dtensorCalibrationDestroy(cal);
    return NULL;
  }
  return cal;
}

static void shapeText(int rank, const int64_t *shape, char *out, size_t n) {
  DtBuf b = dtBufInit(out, n);
  for (int a = 0; a < rank; ++a)
    dtBufPrintf(&b, "%s%lld", a ? "x" : "", (long long)shape[a]);
}

bool dtensorCalibrationWrite(const DtensorCalibration *cal, const char *path,
                             const char *comment, DtensorDiag *outDiag) {
  DtOutput out;
  if (!dtOutputOpen(&out, path, outDiag))
    return false;
  FILE *f = out.file;
  char shape[160];
  shapeText(cal->meshRank, cal->meshShape, shape, sizeof(shape));
  if (comment)
    fprintf(f, "# %s\n", comment);
  fprintf(f, "dtensor-calibration 1\nmesh %s\n", shape);
  fprintf(f, "# collective axes latency_us bandwidth_GBps\n");
  for (int p = 0; p < NUM_PATTERNS; ++p)
    for (unsigned m = 1; m < (1u << cal->meshRank); ++m) {
      const Fit *fit = &cal->fits[p][m];
      if (!fit->set)
        continue;
      fprintf(f, "%s ", dtensorCommPatternGetName((DtensorCommPattern)p));
      for (int a = 0, first = 1; a < cal->meshRank; ++a)
        if (m >> a & 1) {
          fprintf(f, "%s%d", first ? "" : ",", a);
          first = 0;
        }
      fprintf(f, " %.6g %.6g\n", fit->latencyUs, fit->bandwidthGBps);
    }
  if (cal->contract.set)
    fprintf(f,
            "# a contraction: overhead_us per call, G multiply-adds per "
            "second per device\ncontract %.6g %.6g\n",
            cal->contract.latencyUs, cal->contract.bandwidthGBps);
  return dtOutputClose(&out, true, outDiag);
}

bool dtensorCalibrationCheckMesh(const DtensorCalibration *cal,
                                 const DtensorMesh *mesh,
                                 DtensorDiag *outDiag) {
  int rank = dtensorMeshGetRank(mesh);
  bool same = rank == cal->meshRank;
  int64_t shape[DTENSOR_MAX_MESH_RANK];
  for (int a = 0; a < rank; ++a) {
    shape[a] = dtensorMeshGetAxisSize(mesh, a);
    same = same && shape[a] == cal->meshShape[a];
  }
  if (same)
    return true;
  char have[160], want[160];
  shapeText(cal->meshRank, cal->meshShape, have, sizeof(have));
  shapeText(rank, shape, want, sizeof(want));
  return dtDiag(outDiag, -1,
                "the calibration was measured on a mesh of shape %s, not %s "
                "(measure this one: dtensor-run --calibrate -n N --mesh %s)",
                have, want, want);
}
