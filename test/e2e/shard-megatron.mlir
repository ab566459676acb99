// RUN: dtensor-run -n 4 %s | FileCheck %s
// RUN: dtensor-opt %s --pass-pipeline="builtin.module(dtensor-import-shard, dtensor-spmd)" | FileCheck %s --check-prefix=IR
// CHECK: every rank's result equals the single-device run
// IR-COUNT-1: "dtensor.all_reduce"
// IR-NOT: "dtensor.all_gather"
// IR-NOT: shard.
// The Megatron MLP written for MLIR's shard dialect (as mlir-opt's
// sharding-propagation takes it): dtensor-run imports the grid and
// shardings (dtensor-import-shard) and runs it on 4 ranks.
shard.grid @grid(shape = 4)
func.func @megatron(%x: tensor<16x64xf32>, %w1: tensor<64x256xf32>, %w2: tensor<256x64xf32>) -> tensor<16x64xf32> {
  %rep = shard.sharding @grid split_axes = [[]] : !shard.sharding
  %cols = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %rows = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %xs = shard.shard %x to %rep annotate_for_users : tensor<16x64xf32>
  %w1s = shard.shard %w1 to %cols annotate_for_users : tensor<64x256xf32>
  %w2s = shard.shard %w2 to %rows annotate_for_users : tensor<256x64xf32>
  %z = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<16x256xf32>
  %i1 = linalg.fill ins(%z : f32) outs(%e1 : tensor<16x256xf32>) -> tensor<16x256xf32>
  %h = linalg.matmul ins(%xs, %w1s : tensor<16x64xf32>, tensor<64x256xf32>) outs(%i1 : tensor<16x256xf32>) -> tensor<16x256xf32>
  %e2 = tensor.empty() : tensor<16x64xf32>
  %i2 = linalg.fill ins(%z : f32) outs(%e2 : tensor<16x64xf32>) -> tensor<16x64xf32>
  %y = linalg.matmul ins(%h, %w2s : tensor<16x256xf32>, tensor<256x64xf32>) outs(%i2 : tensor<16x64xf32>) -> tensor<16x64xf32>
  %ys = shard.shard %y to %rep : tensor<16x64xf32>
  return %ys : tensor<16x64xf32>
}
