"""ctypes declarations of the C APIs the package uses: libdtensor (layout
algebra, planner, compiler, differential runner) and libdtensor_rt
(checkpoints). Every foreign
function gets its argtypes and restype here, and nowhere else."""

import ctypes
import os
import shutil
import sys
from ctypes import (CFUNCTYPE, POINTER, Structure, c_bool, c_char, c_char_p,
                    c_double, c_int, c_int8, c_int64, c_size_t, c_void_p)

MAX_MESH_RANK = 8
MAX_MESH_DEVICES = 1 << 20  # DTENSOR_MAX_MESH_DEVICES
MAX_TENSOR_RANK = 16
DIAG_MESSAGE_SIZE = 512
MAX_PLAN_STEPS = 64


def _checkout_dir(sub):
    """build/<sub> of the source tree this package sits in (a checkout),
    or None."""
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.normpath(os.path.join(here, "..", "..", "build", sub))
    return path if os.path.isdir(path) else None


def _prefix_dirs(sub):
    """<prefix>/<sub> of the places an install may be: DTENSOR_PREFIX, this
    interpreter's prefix, /usr/local."""
    prefixes = [os.environ.get("DTENSOR_PREFIX"), sys.prefix, "/usr/local"]
    return [os.path.join(p, sub) for p in prefixes if p]


def bin_dir():
    """Where the tools are: DTENSOR_BIN_DIR, the checkout's build/bin, the
    directory of dtensor-run on PATH, or an install prefix's bin."""
    if os.environ.get("DTENSOR_BIN_DIR"):
        return os.environ["DTENSOR_BIN_DIR"]
    found = _checkout_dir("bin")
    if found:
        return found
    run = shutil.which("dtensor-run")
    if run:
        return os.path.dirname(run)
    for d in _prefix_dirs("bin"):
        if os.path.exists(os.path.join(d, "dtensor-run")):
            return d
    return _prefix_dirs("bin")[-1]


def _load(name):
    """The library `name`: from DTENSOR_LIB_DIR, the checkout's build/lib,
    the dynamic loader's search path (LD_LIBRARY_PATH, an installed
    /usr/local), or an install prefix's lib."""
    tried = []
    explicit = os.environ.get("DTENSOR_LIB_DIR")
    candidates = ([os.path.join(explicit, name)] if explicit else
                  [os.path.join(d, name) for d in
                   filter(None, [_checkout_dir("lib")])] + [name] +
                  [os.path.join(d, name) for d in _prefix_dirs("lib")])
    for path in candidates:
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            tried.append(f"{path}: {e}")
    raise ImportError(
        f"dtensor: cannot load {name} (tried {'; '.join(tried)}); build the "
        "project (bash scripts/setup.sh), install it (cmake --install), or "
        "set DTENSOR_LIB_DIR")


lib = _load("libdtensor.so")
rt = _load("libdtensor_rt.so")


# ---- structures (mirrors of include/dtensor-c/*.h) --------------------------

class Diag(Structure):
    _fields_ = [("column", c_int), ("message", c_char * DIAG_MESSAGE_SIZE)]


class ShardingSpec(Structure):
    _fields_ = [("rank", c_int),
                ("numAxes", c_int * MAX_TENSOR_RANK),
                ("axes", (c_int * MAX_MESH_RANK) * MAX_TENSOR_RANK),
                ("interleave", c_int64 * MAX_TENSOR_RANK),
                ("partial", c_int * MAX_MESH_RANK)]


class Layout(Structure):
    _fields_ = [("mesh", c_void_p),
                ("spec", ShardingSpec),
                ("rank", c_int),
                ("shape", c_int64 * MAX_TENSOR_RANK),
                ("elementType", c_int)]


class Range(Structure):
    _fields_ = [("begin", c_int64), ("end", c_int64)]


class CommSpec(Structure):
    _fields_ = [("pattern", c_int), ("numAxes", c_int),
                ("axes", c_int * MAX_MESH_RANK), ("gatherDim", c_int),
                ("shardDim", c_int), ("reduce", c_int)]


class CommCost(Structure):
    _fields_ = [("forwardUs", c_double), ("backwardUs", c_double),
                ("bytesPerDevice", c_int64)]


class PlanStep(Structure):
    _fields_ = [("comm", CommSpec), ("after", ShardingSpec), ("cost", CommCost),
                ("viewDim", c_int), ("viewGroups", c_int64)]


class Plan(Structure):
    _fields_ = [("source", ShardingSpec), ("numSteps", c_int),
                ("forwardUs", c_double), ("backwardUs", c_double),
                ("statesVisited", c_int64),
                ("steps", PlanStep * MAX_PLAN_STEPS)]


class PlanOptions(Structure):
    _fields_ = [("strategy", c_int), ("objective", c_int),
                ("copyBandwidthGBps", c_double), ("calibration", c_void_p)]


class StringRef(Structure):
    _fields_ = [("data", c_char_p), ("length", c_size_t)]


class Handle(Structure):
    """An MLIR C API handle (MlirContext, MlirOperation, ...): one pointer."""
    _fields_ = [("ptr", c_void_p)]


class RtTensor(Structure):
    _fields_ = [("name", c_char_p), ("dtype", c_int), ("rank", c_int),
                ("shape", POINTER(c_int64)), ("mesh", c_char_p),
                ("spec", c_char_p), ("block", c_void_p)]


class RunTensor(Structure):
    _fields_ = [("name", c_char * 128), ("rank", c_int),
                ("shape", c_int64 * MAX_TENSOR_RANK), ("dtype", c_int),
                ("spec", ShardingSpec)]


class LaunchOptions(Structure):
    _fields_ = [("numRanks", c_int), ("backend", c_char_p),
                ("timeoutSeconds", c_double), ("stop", c_void_p),
                ("numNodes", c_int), ("nodeRank", c_int),
                ("masterAddr", c_char_p), ("masterPort", c_int)]


class Tolerance(Structure):
    _fields_ = [("rtol", c_double), ("atol", c_double)]


class RankOptions(Structure):
    _fields_ = [("loadDir", c_char_p), ("saveDir", c_char_p),
                ("repeat", c_int), ("tolerance", POINTER(Tolerance)),
                ("unchecked", c_bool), ("profile", c_char_p)]


class RankReport(Structure):
    _fields_ = [("compared", c_int64), ("different", c_int64),
                ("maxAbsError", c_double), ("steps", c_int),
                ("minStepSeconds", c_double), ("medianStepSeconds", c_double),
                ("medianCommSeconds", c_double),
                ("peakBufferBytes", c_int64)]


# Callbacks get the C API's small structs split as the x86-64 and AArch64
# ABIs pass them: MlirDiagnostic {void *} as one pointer, MlirStringRef
# {data, length} as two words; MlirLogicalResult {int8} is returned as an
# int8 (ctypes callbacks cannot return structs).
DiagnosticHandler = CFUNCTYPE(c_int8, c_void_p, c_void_p)
StringCallback = CFUNCTYPE(None, c_void_p, c_size_t, c_void_p)


def _declare(library, name, restype, *argtypes):
    fn = getattr(library, name)
    fn.restype = restype
    fn.argtypes = list(argtypes)
    return fn


# ---- the layout algebra -------------------------------------------------------
meshParse = _declare(lib, "dtensorMeshParse", c_void_p, c_char_p, POINTER(Diag))
meshDestroy = _declare(lib, "dtensorMeshDestroy", None, c_void_p)
meshGetRank = _declare(lib, "dtensorMeshGetRank", c_int, c_void_p)
meshGetAxisSize = _declare(lib, "dtensorMeshGetAxisSize", c_int64, c_void_p,
                           c_int)
meshGetAxisName = _declare(lib, "dtensorMeshGetAxisName", c_char_p, c_void_p,
                           c_int)
meshGetNumDevices = _declare(lib, "dtensorMeshGetNumDevices", c_int64,
                             c_void_p)
meshPrint = _declare(lib, "dtensorMeshPrint", c_size_t, c_void_p, c_char_p,
                     c_size_t)
specParse = _declare(lib, "dtensorShardingSpecParse", c_bool, c_char_p,
                     c_void_p, POINTER(ShardingSpec), POINTER(Diag))
specPrint = _declare(lib, "dtensorShardingSpecPrint", c_size_t,
                     POINTER(ShardingSpec), c_char_p, c_size_t)
elementTypeParse = _declare(lib, "dtensorElementTypeParse", c_bool, c_char_p,
                            POINTER(c_int))
layoutInit = _declare(lib, "dtensorLayoutInit", c_bool, c_void_p,
                      POINTER(ShardingSpec), c_int, POINTER(c_int64), c_int,
                      POINTER(Layout), POINTER(Diag))
layoutGetLocalShape = _declare(lib, "dtensorLayoutGetLocalShape", None,
                               POINTER(Layout), c_int64, POINTER(c_int64))
layoutGetMaxLocalShape = _declare(lib, "dtensorLayoutGetMaxLocalShape", None,
                                  POINTER(Layout), POINTER(c_int64))
layoutIsEven = _declare(lib, "dtensorLayoutIsEven", c_bool, POINTER(Layout))
layoutGetLocalRanges = _declare(lib, "dtensorLayoutGetLocalRanges", c_int,
                                POINTER(Layout), c_int64, c_int,
                                POINTER(Range))
layoutGetOwners = _declare(lib, "dtensorLayoutGetOwners", c_int64,
                           POINTER(Layout), POINTER(c_int64),
                           POINTER(c_int64), c_int64)
layoutDescribe = _declare(lib, "dtensorLayoutDescribe", c_size_t,
                          POINTER(Layout), c_char_p, c_size_t)

# ---- the planner ----------------------------------------------------------------
planOptionsInit = _declare(lib, "dtensorPlanOptionsInit", None,
                           POINTER(PlanOptions))
planCompute = _declare(lib, "dtensorPlanCompute", c_bool, POINTER(Layout),
                       POINTER(ShardingSpec), POINTER(PlanOptions),
                       POINTER(Plan), POINTER(Diag))
planPrint = _declare(lib, "dtensorPlanPrint", c_size_t, POINTER(Plan),
                     c_void_p, c_char_p, c_size_t)
commSpecPrint = _declare(lib, "dtensorCommSpecPrint", c_size_t,
                         POINTER(CommSpec), c_char_p, c_size_t)
planExecute = _declare(lib, "dtensorPlanExecute", c_bool, POINTER(Layout),
                       POINTER(Plan), c_void_p, c_void_p, POINTER(Diag))

# CommSpec patterns (DtensorCommPattern) and reduce kinds (DtensorReduceKind)
COMM_PATTERNS = ("identity", "all_gather", "all_to_all", "local_split",
                 "all_reduce", "reduce_scatter", "local_partial")
REDUCE_KINDS = ("none", "sum", "max", "min", "avg", "prod")

# ---- the compiler (MLIR handles by value) ----------------------------------------
contextCreate = _declare(lib, "dtensorContextCreate", Handle)
contextDestroy = _declare(lib, "mlirContextDestroy", None, Handle)
registerUpstreamPasses = _declare(lib, "dtensorRegisterUpstreamPasses", None)
attachDiagnosticHandler = _declare(lib, "mlirContextAttachDiagnosticHandler",
                                   c_int64, Handle, DiagnosticHandler,
                                   c_void_p, c_void_p)
diagnosticFormat = _declare(lib, "dtensorDiagnosticFormat", c_size_t, Handle,
                            c_char_p, c_size_t)
sourceParse = _declare(lib, "dtensorSourceParse", Handle, Handle, StringRef,
                       StringRef)
operationDestroy = _declare(lib, "mlirOperationDestroy", None, Handle)
operationPrint = _declare(lib, "mlirOperationPrint", None, Handle,
                          StringCallback, c_void_p)
passManagerCreate = _declare(lib, "mlirPassManagerCreate", Handle, Handle)
passManagerDestroy = _declare(lib, "mlirPassManagerDestroy", None, Handle)
passManagerGetAsOpPassManager = _declare(
    lib, "mlirPassManagerGetAsOpPassManager", Handle, Handle)
passManagerAddPipeline = _declare(lib, "dtensorPassManagerAddPipeline",
                                  c_int8, Handle, StringRef, POINTER(Diag))
passManagerRunOnOp = _declare(lib, "mlirPassManagerRunOnOp", c_int8, Handle,
                              Handle)
autoShard = _declare(lib, "dtensorAutoShard", c_int8, Handle, StringRef,
                     c_int64, POINTER(Diag))

# ---- the differential runner (dtensor-c/Runner.h) ------------------------------------
runnerCreate = _declare(lib, "dtensorRunnerCreate", c_void_p, Handle,
                        c_char_p, POINTER(Diag))
runnerDestroy = _declare(lib, "dtensorRunnerDestroy", None, c_void_p)
runnerCreateForTarget = _declare(lib, "dtensorRunnerCreateForTarget",
                                 c_void_p, Handle, c_char_p, c_char_p,
                                 c_char_p, POINTER(Diag))
runnerGetMesh = _declare(lib, "dtensorRunnerGetMesh", c_void_p, c_void_p)
runnerGetNumArguments = _declare(lib, "dtensorRunnerGetNumArguments", c_int,
                                 c_void_p)
runnerGetArgument = _declare(lib, "dtensorRunnerGetArgument",
                             POINTER(RunTensor), c_void_p, c_int)
runnerGetNumResults = _declare(lib, "dtensorRunnerGetNumResults", c_int,
                               c_void_p)
runnerGetResult = _declare(lib, "dtensorRunnerGetResult", POINTER(RunTensor),
                           c_void_p, c_int)
runnerLoadArguments = _declare(lib, "dtensorRunnerLoadArguments", c_bool,
                               c_void_p, c_char_p, POINTER(Diag))
runnerComputeReference = _declare(lib, "dtensorRunnerComputeReference",
                                  c_bool, c_void_p, POINTER(Diag))
runnerLaunch = _declare(lib, "dtensorRunnerLaunch", c_bool, c_void_p,
                        POINTER(LaunchOptions), POINTER(RankOptions),
                        POINTER(RankReport), POINTER(c_int), POINTER(Diag))

runSessionStart = _declare(lib, "dtensorRunSessionStart", c_void_p, c_void_p,
                           POINTER(LaunchOptions), c_double, POINTER(Diag))
runSessionArgument = _declare(lib, "dtensorRunSessionArgument", c_void_p,
                              c_void_p, c_int)
runSessionCarried = _declare(lib, "dtensorRunSessionCarried", c_int, c_void_p,
                             c_int)
runSessionStep = _declare(lib, "dtensorRunSessionStep", c_bool, c_void_p,
                          c_void_p, POINTER(c_double), POINTER(Diag))
runSessionResult = _declare(lib, "dtensorRunSessionResult", c_void_p,
                            c_void_p, c_int)
runSessionFetch = _declare(lib, "dtensorRunSessionFetch", c_void_p, c_void_p,
                           c_int, POINTER(Diag))
runSessionClose = _declare(lib, "dtensorRunSessionClose", c_bool, c_void_p,
                           POINTER(Diag))
runSessionProfile = _declare(lib, "dtensorRunSessionProfile", c_bool,
                             c_void_p, c_char_p, c_void_p, POINTER(Diag))

# ---- collectives on this rank's block (what compiled programs call) ------------------
# The kinds, in the ABI's order (DTRT_MLIR_COLLECTIVE_LIST), and the
# reductions (DTRT_REDUCE_LIST: the compiler's kinds without "none").
MLIR_COLLECTIVES = ("all_gather", "all_reduce", "reduce_scatter",
                    "all_to_all", "local_split", "broadcast")
RT_REDUCE_KINDS = ("sum", "max", "min", "avg", "prod")
processContext = _declare(rt, "dtrtProcessContext", c_void_p)
rtRank = _declare(rt, "dtrtRank", c_int, c_void_p)
rtWorldSize = _declare(rt, "dtrtWorldSize", c_int, c_void_p)
collective = _declare(rt, "dtrt_mlir_collective", None, c_int64, c_int64,
                      c_int64, c_int64, c_int64, c_int64, c_int64, c_void_p,
                      c_int64, c_void_p, c_int64, c_void_p, c_int64, c_void_p)


def memref_descriptor(array):
    """MLIR's ranked memref descriptor of a C-contiguous numpy array
    (allocated, aligned, offset, sizes, strides), as compiled programs pass
    it; keep the array alive while it is used."""
    rank = array.ndim
    fields = [("allocated", c_void_p), ("aligned", c_void_p),
              ("offset", c_int64)]
    if rank:
        fields += [("sizes", c_int64 * rank), ("strides", c_int64 * rank)]
    desc = type(f"MemRef{rank}", (Structure,), {"_fields_": fields})()
    desc.allocated = desc.aligned = array.ctypes.data
    if rank:
        desc.sizes[:] = array.shape
        desc.strides[:] = [s // array.itemsize for s in array.strides]
    return desc


# ---- element types (libdtensor_rt's one list) ---------------------------------------
dtypeName = _declare(rt, "dtrtDtypeName", c_char_p, c_int)
convert = _declare(rt, "dtrtConvert", None, c_void_p, c_int, c_void_p, c_int,
                   c_size_t)
dtypeParse = _declare(rt, "dtrtDtypeParse", c_int, c_char_p, POINTER(c_int))

# ---- checkpoints (libdtensor_rt, offline) ------------------------------------------
ckptOpen = _declare(rt, "dtrtCheckpointOpen", c_int, c_char_p,
                    POINTER(c_void_p), c_char_p, c_size_t)
ckptClose = _declare(rt, "dtrtCheckpointClose", None, c_void_p)
ckptNumTensors = _declare(rt, "dtrtCheckpointNumTensors", c_int, c_void_p)
ckptGetTensor = _declare(rt, "dtrtCheckpointGetTensor", None, c_void_p, c_int,
                         POINTER(RtTensor), POINTER(c_int), POINTER(c_int64))
ckptVerify = _declare(rt, "dtrtCheckpointVerify", c_int, c_char_p, c_char_p,
                      c_size_t)
ckptReadTensor = _declare(rt, "dtrtCheckpointReadTensor", c_int, c_char_p,
                          c_char_p, c_void_p, c_size_t, c_char_p, c_size_t)
ckptWriteTensors = _declare(rt, "dtrtCheckpointWriteTensors", c_int, c_char_p,
                            c_int, POINTER(RtTensor), c_char_p, c_size_t)
ckptConvert = _declare(rt, "dtrtCheckpointConvert", c_int, c_char_p, c_char_p,
                       c_char_p, c_int, POINTER(c_char_p), POINTER(c_char_p),
                       c_char_p, c_char_p, c_size_t)
