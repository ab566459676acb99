// Loops in threads: dtensor-to-llvm{threads=true} makes the outermost
// parallel loop of each nest of at least 2^22 ops (iterations times the
// ops each runs) an OpenMP
// worksharing loop (the row sum's rows, the elementwise op's rows; not the
// 2048-element fill) and keeps the rest sequential; without the option
// there is no OpenMP. dtensor-run turns it on when a rank has more
// than one compute thread (--threads, or the cores shared among the ranks):
// the result equals the single-device run's. A bundle compiled with
// --threads links LLVM's OpenMP runtime and runs on dtensor-check (as many
// OpenMP threads as the runtime gives BLAS: DTENSOR_THREADS).
// RUN: dtensor-opt %s --dtensor-spmd --dtensor-to-llvm=threads=true | FileCheck %s --check-prefix=OMP
// RUN: dtensor-opt %s --dtensor-spmd --dtensor-to-llvm | FileCheck %s --check-prefix=SERIAL
// RUN: dtensor-run -n 1 --threads 2 --repeat 2 %s | FileCheck %s
// RUN: rm -rf %t && dtensor-compile %s --bundle --threads -o %t
// RUN: readelf -d %t/spmd.so | FileCheck %s --check-prefix=NEEDED
// RUN: env DTENSOR_THREADS=2 dtensor-check --repeat 2 %t | FileCheck %s
// NEEDED: libomp
// OMP-COUNT-2: omp.parallel
// OMP-NOT: omp.parallel
// SERIAL-NOT: omp.
// CHECK: rank 0: 2097152 result elements, equal to the single-device run
func.func @f(%x: tensor<2048x1024xf32>) -> tensor<2048x1024xf32> {
  %z = arith.constant 0.0 : f32
  %n = arith.constant 1024.0 : f32
  %e = tensor.empty() : tensor<2048xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<2048xf32>) -> tensor<2048xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<2048x1024xf32>) outs(%f : tensor<2048xf32>) {
  ^bb0(%a: f32, %o: f32):
    %t = arith.addf %a, %o : f32
    linalg.yield %t : f32
  } -> tensor<2048xf32>
  %e2 = tensor.empty() : tensor<2048x1024xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%x, %s : tensor<2048x1024xf32>, tensor<2048xf32>) outs(%e2 : tensor<2048x1024xf32>) {
  ^bb0(%a: f32, %m: f32, %o: f32):
    %mean = arith.divf %m, %n : f32
    %d = arith.subf %a, %mean : f32
    %t = math.tanh %d : f32
    linalg.yield %t : f32
  } -> tensor<2048x1024xf32>
  return %y : tensor<2048x1024xf32>
}
