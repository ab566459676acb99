// An FSDP (ZeRO-3) training step: the weights and Adam's state sharded
// over dp along dim 0, the batch split: each weight is all_gathered before
// its use, each gradient reduce_scattered back to its weight's shards, and
// the Adam update runs on the shards (no collective); the loss is each
// device's Partial sum, all_reduced as a scalar (not the 1 MiB output
// gathered).
// RUN: dtensor-opt %s --dtensor-autodiff="function=loss wrt=1,2 optimizer=adam lr=0.01" --dtensor-spmd | FileCheck %s
// CHECK-LABEL: func.func @loss_step(
// CHECK-DAG: "dtensor.all_gather"(%arg1) {gather_dim = 0 : i64, mesh = @dp, mesh_axes = array<i64: 0>} : (tensor<64x256xf32>) -> tensor<256x256xf32>
// CHECK-DAG: "dtensor.all_gather"(%arg2) {gather_dim = 0 : i64, mesh = @dp, mesh_axes = array<i64: 0>} : (tensor<64x256xf32>) -> tensor<256x256xf32>
// CHECK-COUNT-2: "dtensor.reduce_scatter"({{.*}}reduce = "sum", shard_dim = 0 : i64} : (tensor<256x256xf32>) -> tensor<64x256xf32>
// CHECK-NOT: "dtensor.all_gather"
// CHECK: "dtensor.all_reduce"({{.*}}) {{.*}} : (tensor<f32>) -> tensor<f32>
// CHECK-NOT: "dtensor.all_reduce"
// CHECK-NOT: "dtensor.all_gather"
// CHECK: math.sqrt
// CHECK: return
"dtensor.mesh"() {sym_name = "dp", shape = array<i64: 4>, axis_names = ["dp"]} : () -> ()
func.func @loss(%x: tensor<1024x256xf32> {dtensor.layout = #dtensor.layout<@dp, "[S0, R]">},
                %w1: tensor<256x256xf32> {dtensor.layout = #dtensor.layout<@dp, "[S0, R]">},
                %w2: tensor<256x256xf32> {dtensor.layout = #dtensor.layout<@dp, "[S0, R]">}) -> tensor<f32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1024x256xf32>
  %i = linalg.fill ins(%z : f32) outs(%e : tensor<1024x256xf32>) -> tensor<1024x256xf32>
  %h = linalg.matmul ins(%x, %w1 : tensor<1024x256xf32>, tensor<256x256xf32>) outs(%i : tensor<1024x256xf32>) -> tensor<1024x256xf32>
  %a = math.tanh %h : tensor<1024x256xf32>
  %y = linalg.matmul ins(%a, %w2 : tensor<1024x256xf32>, tensor<256x256xf32>) outs(%i : tensor<1024x256xf32>) -> tensor<1024x256xf32>
  %e2 = tensor.empty() : tensor<f32>
  %i2 = linalg.fill ins(%z : f32) outs(%e2 : tensor<f32>) -> tensor<f32>
  %l = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> ()>], iterator_types = ["reduction", "reduction"]} ins(%y : tensor<1024x256xf32>) outs(%i2 : tensor<f32>) {
  ^bb0(%v: f32, %acc: f32):
    %q = arith.mulf %v, %v : f32
    %s = arith.addf %acc, %q : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  return %l : tensor<f32>
}
