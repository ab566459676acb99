// RUN: dtensor-opt %s --split-input-file --dtensor-propagate --verify-diagnostics | FileCheck %s
// RUN: dtensor-opt %s --split-input-file --dtensor-spmd --dtensor-report --verify-diagnostics -o /dev/null 2>&1 | FileCheck %s --check-prefix=PLAN
// RUN: dtensor-opt %s --split-input-file --dtensor-spmd --verify-diagnostics | FileCheck %s --check-prefix=SPMD
// RUN: head -n 48 %s > %t.mlir && dtensor-run -n 2 %t.mlir | FileCheck %s --check-prefix=OK
// RUN: sed "s/array<i64: 2>/array<i64: 4>/" %t.mlir > %t4.mlir && dtensor-run -n 4 %t4.mlir | FileCheck %s --check-prefix=OK
// OK: every rank's result equals the single-device run
//
// Interleaved shards (S0i3: the dim is 3 equal groups, each split over the
// axis, a device holding its chunk of each) flow through ops: a fused QKV
// weight sharded by columns in 3 groups gives each device its heads of q,
// k and v. The matmul keeps the interleave on its output columns, an
// elementwise op keeps it, extracting one group (q, k or v) gives a plain
// shard of the slice (partition moves the slice to the same group of the
// local block), and expanding the groups into a dim of their own gives
// [R, R, S0]. One all_reduce (after the output projection), as Megatron.
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 2>, axis_names = ["tp"]} : () -> ()
// CHECK-LABEL: func.func @attn
// CHECK: linalg.matmul {{.*}}dtensor.layout = #dtensor.layout<@m, "[R, S0i3]">
// CHECK: linalg.exp {{.*}}dtensor.layout = #dtensor.layout<@m, "[R, S0i3]">
// CHECK: tensor.extract_slice {{.*}}dtensor.layout = #dtensor.layout<@m, "[R, S0]">, dtensor.operand_layouts = [#dtensor.layout<@m, "[R, S0i3]">]
// CHECK: tensor.expand_shape {{.*}}dtensor.layout = #dtensor.layout<@m, "[R, R, S0]">
// PLAN: @attn
// PLAN: 1 collective,
// PLAN-NEXT: dtensor.all_reduce
// SPMD-LABEL: func.func @attn
// SPMD: tensor.extract_slice %{{.*}}[0, 0] [4, 4] [1, 1] : tensor<4x12xf32> to tensor<4x4xf32>
// SPMD: tensor.extract_slice %{{.*}}[0, 4] [4, 4] [1, 1] : tensor<4x12xf32> to tensor<4x4xf32>
// SPMD: tensor.extract_slice %{{.*}}[0, 8] [4, 4] [1, 1] : tensor<4x12xf32> to tensor<4x4xf32>
func.func @attn(%x: tensor<4x8xf32> {dtensor.layout = #dtensor.layout<@m, "[R, R]">},
                %w: tensor<8x24xf32> {dtensor.layout = #dtensor.layout<@m, "[R, S(tp)i3]">},
                %wo: tensor<8x8xf32> {dtensor.layout = #dtensor.layout<@m, "[S(tp), R]">})
    -> (tensor<4x8xf32> {dtensor.layout = #dtensor.layout<@m, "[R, R]">}, tensor<4x3x8xf32>) {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x24xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<4x24xf32>) -> tensor<4x24xf32>
  %qkv = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x24xf32>) outs(%f : tensor<4x24xf32>) -> tensor<4x24xf32>
  %t = linalg.exp ins(%qkv : tensor<4x24xf32>) outs(%e : tensor<4x24xf32>) -> tensor<4x24xf32>
  %q = tensor.extract_slice %t[0, 0] [4, 8] [1, 1] : tensor<4x24xf32> to tensor<4x8xf32>
  %k = tensor.extract_slice %t[0, 8] [4, 8] [1, 1] : tensor<4x24xf32> to tensor<4x8xf32>
  %v = tensor.extract_slice %t[0, 16] [4, 8] [1, 1] : tensor<4x24xf32> to tensor<4x8xf32>
  %e1 = tensor.empty() : tensor<4x8xf32>
  %qk = linalg.mul ins(%q, %k : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e1 : tensor<4x8xf32>) -> tensor<4x8xf32>
  %h = linalg.add ins(%qk, %v : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e1 : tensor<4x8xf32>) -> tensor<4x8xf32>
  %f2 = linalg.fill ins(%z : f32) outs(%e1 : tensor<4x8xf32>) -> tensor<4x8xf32>
  %o = linalg.matmul ins(%h, %wo : tensor<4x8xf32>, tensor<8x8xf32>) outs(%f2 : tensor<4x8xf32>) -> tensor<4x8xf32>
  %g = tensor.expand_shape %t [[0], [1, 2]] output_shape [4, 3, 8] : tensor<4x24xf32> into tensor<4x3x8xf32>
  return %o, %g : tensor<4x8xf32>, tensor<4x3x8xf32>
}

// -----

// At most one dim of a value may be interleaved.
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 2, 2>, axis_names = ["a", "b"]} : () -> ()
// expected-error @+1 {{the layout of argument 0 has more than one interleaved dim (or more than 65535 groups); dtensor-propagate handles one}}
func.func @two(%x: tensor<6x6xf32> {dtensor.layout = #dtensor.layout<@m, "[S(a)i3, S(b)i3]">}) -> tensor<6x6xf32> {
  return %x : tensor<6x6xf32>
}
