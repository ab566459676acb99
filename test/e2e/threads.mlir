// Loops in threads: dtensor-to-llvm{threads=true} makes the outermost
// parallel loop of each nest an OpenMP worksharing loop (the fill's, the
// row sum's rows, the elementwise op's rows) and keeps the rest sequential;
// without the option there is no OpenMP. dtensor-run turns it on when a rank has more
// than one compute thread (--threads, or the cores shared among the ranks):
// the result equals the single-device run's.
// RUN: dtensor-opt %s --dtensor-spmd --dtensor-to-llvm=threads=true | FileCheck %s --check-prefix=OMP
// RUN: dtensor-opt %s --dtensor-spmd --dtensor-to-llvm | FileCheck %s --check-prefix=SERIAL
// RUN: dtensor-run -n 1 --threads 2 --repeat 2 %s | FileCheck %s
// OMP-COUNT-3: omp.parallel
// OMP-NOT: omp.parallel
// SERIAL-NOT: omp.
// CHECK: rank 0: 65536 result elements, equal to the single-device run
func.func @f(%x: tensor<256x256xf32>) -> tensor<256x256xf32> {
  %z = arith.constant 0.0 : f32
  %n = arith.constant 256.0 : f32
  %e = tensor.empty() : tensor<256xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<256xf32>) -> tensor<256xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<256x256xf32>) outs(%f : tensor<256xf32>) {
  ^bb0(%a: f32, %o: f32):
    %t = arith.addf %a, %o : f32
    linalg.yield %t : f32
  } -> tensor<256xf32>
  %e2 = tensor.empty() : tensor<256x256xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%x, %s : tensor<256x256xf32>, tensor<256xf32>) outs(%e2 : tensor<256x256xf32>) {
  ^bb0(%a: f32, %m: f32, %o: f32):
    %mean = arith.divf %m, %n : f32
    %d = arith.subf %a, %mean : f32
    %t = math.tanh %d : f32
    linalg.yield %t : f32
  } -> tensor<256x256xf32>
  return %y : tensor<256x256xf32>
}
