// RUN: dtensor-opt %s --dtensor-gpu-loop-order | FileCheck %s
//
// dtensor-gpu-loop-order reverses each scf.parallel's dims (bounds, steps
// and induction variables), so that the innermost, contiguous dim comes
// first: tiling gives it the first tile size and gpu-map-parallel-loops
// threadIdx.x (coalesced accesses). The body still reads the same element.
// CHECK-LABEL: func.func @f(
// CHECK: scf.parallel (%[[J:.*]], %[[I:.*]]) = (%c0, %c0) to (%c128, %c64) step (%c1, %c1)
// CHECK: memref.load %arg0[%[[I]], %[[J]]]
// CHECK: memref.store %{{.*}}, %arg1[%[[I]], %[[J]]]
// One dim: unchanged.
// CHECK: scf.parallel (%[[K:.*]]) = (%c0) to (%c64) step (%c1)
// CHECK: memref.load %arg2[%[[K]]]
func.func @f(%a: memref<64x128xf32>, %b: memref<64x128xf32>, %v: memref<64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %c128 = arith.constant 128 : index
  scf.parallel (%i, %j) = (%c0, %c0) to (%c64, %c128) step (%c1, %c1) {
    %x = memref.load %a[%i, %j] : memref<64x128xf32>
    memref.store %x, %b[%i, %j] : memref<64x128xf32>
    scf.reduce
  }
  scf.parallel (%k) = (%c0) to (%c64) step (%c1) {
    %y = memref.load %v[%k] : memref<64xf32>
    memref.store %y, %v[%k] : memref<64xf32>
    scf.reduce
  }
  return
}
