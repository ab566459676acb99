// RUN: not dtensor-run -n 1 %s 2>&1 | FileCheck %s
// A compiled program whose intermediate cannot fit in memory (4 TB: a
// broadcast used twice, so fusion keeps it): the rank says so, with the
// size, and the run fails instead of writing through a null pointer.
// CHECK: dtensor runtime: rank 0: out of memory: a buffer of {{40000000000[0-9]+}} bytes (3725.29 GiB) of the compiled program could not be allocated
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 1>, axis_names = ["x"]} : () -> ()
func.func @huge(%x: tensor<100xf32>) -> (tensor<100xf32>, tensor<100xf32>) {
  %e = tensor.empty() : tensor<100000x100000x100xf32>
  %b = linalg.generic {indexing_maps = [affine_map<(i, j, k) -> (k)>, affine_map<(i, j, k) -> (i, j, k)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%x : tensor<100xf32>) outs(%e : tensor<100000x100000x100xf32>) {
  ^bb0(%v: f32, %o: f32):
    linalg.yield %v : f32
  } -> tensor<100000x100000x100xf32>
  %z = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<100xf32>
  %s0 = linalg.fill ins(%z : f32) outs(%e1 : tensor<100xf32>) -> tensor<100xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(i, j, k) -> (i, j, k)>, affine_map<(i, j, k) -> (k)>], iterator_types = ["reduction", "reduction", "parallel"]} ins(%b : tensor<100000x100000x100xf32>) outs(%s0 : tensor<100xf32>) {
  ^bb0(%v: f32, %a: f32):
    %r = arith.addf %a, %v : f32
    linalg.yield %r : f32
  } -> tensor<100xf32>
  %m = linalg.generic {indexing_maps = [affine_map<(i, j, k) -> (i, j, k)>, affine_map<(i, j, k) -> (k)>], iterator_types = ["reduction", "reduction", "parallel"]} ins(%b : tensor<100000x100000x100xf32>) outs(%s0 : tensor<100xf32>) {
  ^bb0(%v: f32, %a: f32):
    %r = arith.maximumf %a, %v : f32
    linalg.yield %r : f32
  } -> tensor<100xf32>
  return %s, %m : tensor<100xf32>, tensor<100xf32>
}
