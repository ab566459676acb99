# lit configuration for the dtensor-mlir suite. The build writes
# lit.site.cfg.py (paths) next to the built tests and loads this file.
import os

import lit.formats

config.name = "dtensor-mlir"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".mlir", ".test"]
config.excludes = ["Unit", "Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py.in"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.dtensor_obj_root, "test")

# Our tools first, then LLVM's FileCheck, not, count, split-file.
config.environment["PATH"] = os.pathsep.join(
    [config.dtensor_tools_dir, config.llvm_tools_dir,
     config.environment.get("PATH", os.environ.get("PATH", ""))])
config.substitutions.append(("%dtensor_src", config.dtensor_src_root))
config.substitutions.append(("%dtensor_lib", os.path.join(config.dtensor_obj_root, "lib")))
config.substitutions.append(("%dtensor_bin", config.dtensor_tools_dir))
# C programs a test links with our libraries get the build's sanitizers.
config.substitutions.append(
    ("%cc_sanitize", "-fsanitize=address,undefined"
     if getattr(config, "dtensor_sanitize", "OFF") in ("ON", "TRUE", "1") else ""))

# CUDA's ptxas (the GPU target's cubins): at /usr/local/cuda/bin on our
# machines; tests that need it say REQUIRES: ptxas.
for cuda_bin in ["/usr/local/cuda/bin"]:
    if os.path.exists(os.path.join(cuda_bin, "ptxas")):
        config.available_features.add("ptxas")
        config.environment["PATH"] += os.pathsep + cuda_bin

# A CUDA driver that loads (a machine with a GPU): tests of what happens
# without one say UNSUPPORTED: cuda-driver.
try:
    import ctypes
    ctypes.CDLL("libcuda.so.1")
    config.available_features.add("cuda-driver")
except OSError:
    pass

# Graphviz's dot (dtensor-view-graph renders .svg with it).
import shutil
if shutil.which("dot"):
    config.available_features.add("graphviz")
