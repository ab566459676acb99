// RUN: dtensor-run -n 4 %s | FileCheck %s
// CHECK: every rank's result equals the single-device run
// A program as JAX exports it for GSPMD: mhlo.sharding strings on the
// arguments and the result (iota device lists, an explicit one, a
// replicated subgroup, metadata). dtensor-run imports them
// (dtensor-import-gspmd: one 2x2 mesh) and runs the partitioned program.
func.func @main(%x: tensor<8x16xf32> {mhlo.sharding = "{devices=[2,1,2]<=[4] last_tile_dim_replicate}"},
                %w1: tensor<16x32xf32> {mhlo.sharding = "{devices=[1,4]<=[4]}"},
                %w2: tensor<32x16xf32> {mhlo.sharding = "{devices=[4,1]0,1,2,3}"},
                %b: tensor<16xf32> {mhlo.sharding = "{replicated}"})
    -> (tensor<8x16xf32> {mhlo.sharding = "{devices=[2,2]<=[4] metadata={op_name=\"y\"}}"}) {
  %z = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<8x32xf32>
  %i1 = linalg.fill ins(%z : f32) outs(%e1 : tensor<8x32xf32>) -> tensor<8x32xf32>
  %h = linalg.matmul ins(%x, %w1 : tensor<8x16xf32>, tensor<16x32xf32>) outs(%i1 : tensor<8x32xf32>) -> tensor<8x32xf32>
  %e2 = tensor.empty() : tensor<8x16xf32>
  %i2 = linalg.fill ins(%z : f32) outs(%e2 : tensor<8x16xf32>) -> tensor<8x16xf32>
  %y = linalg.matmul ins(%h, %w2 : tensor<8x32xf32>, tensor<32x16xf32>) outs(%i2 : tensor<8x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}
