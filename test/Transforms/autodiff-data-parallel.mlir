// The gradients of a data parallel MLP (batch split over 4 devices,
// weights replicated): the propagation keeps the batch split through the
// forward and backward matmuls (it counts their multiply-adds per device:
// without that it gathered the batch and repeated every matmul on every
// device), and each weight's gradient, a Partial sum over the batch, is
// reduced once. The loss itself is a Partial sum of each device's rows,
// reduced with them (before the link model priced a small all_reduce by
// recursive doubling, a ring's six latencies made gathering the 1 MiB
// output look cheaper).
// RUN: dtensor-opt %s --dtensor-autodiff="function=loss wrt=1,2" --dtensor-spmd | FileCheck %s
// CHECK-LABEL: func.func @loss_grad(
// CHECK-NOT: "dtensor.all_gather"(%arg0)
// CHECK: %[[H:.*]] = linalg.matmul ins(%arg0, %arg1 : tensor<256x256xf32>, tensor<256x256xf32>)
// CHECK: %[[Y:.*]] = linalg.matmul ins(%{{.*}}, %arg2 : tensor<256x256xf32>, tensor<256x256xf32>)
// CHECK-NOT: "dtensor.all_gather"
// The loss's and the two gradients' all_reduces are one bucket
// (dtensor-bucket-collectives in dtensor-spmd, 25 MiB by default):
// flattened, concatenated, reduced once, split back.
// CHECK: tensor.concat dim(0) %{{.*}}, %{{.*}}, %{{.*}} : (tensor<1xf32>, tensor<65536xf32>, tensor<65536xf32>) -> tensor<131073xf32>
// CHECK: "dtensor.all_reduce"({{.*}}mesh_axes = array<i64: 0>, reduce = "sum"} : (tensor<131073xf32>)
// CHECK-NOT: "dtensor.all_reduce"
// CHECK-NOT: "dtensor.all_gather"
// CHECK: return
// RUN: dtensor-opt %s --dtensor-autodiff="function=loss wrt=1,2" --dtensor-spmd --dtensor-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=REPORT
// REPORT-LABEL: dtensor report: @loss_grad
// REPORT: 1 collective,
// A bucket of at most one gradient's bytes: three all_reduces again.
// RUN: dtensor-opt %s --dtensor-autodiff="function=loss wrt=1,2" --dtensor-spmd=bucket-bytes=262144 | FileCheck %s --check-prefix=SMALL
// SMALL-LABEL: func.func @loss_grad(
// SMALL: "dtensor.all_reduce"({{.*}}reduce = "sum"} : (tensor<f32>)
// SMALL-COUNT-2: "dtensor.all_reduce"({{.*}}reduce = "sum"} : (tensor<256x256xf32>)
// RUN: not dtensor-opt %s --dtensor-spmd=bucket-bytes=0 2>&1 | FileCheck %s --check-prefix=ZERO
// ZERO: error: 'builtin.module' op dtensor-bucket-collectives: bucket-bytes=0; a bucket needs a positive size in bytes
// The Adam step too: each parameter's update, which reads its reduced
// gradient, moves after the one merged all_reduce instead of splitting
// the bucket (before: one all_reduce per parameter); the loss joins it.
// RUN: dtensor-opt %s --dtensor-autodiff="function=loss wrt=1,2 optimizer=adam" --dtensor-spmd | FileCheck %s --check-prefix=STEP
// STEP-LABEL: func.func @loss_step(
// STEP: "dtensor.all_reduce"({{.*}}reduce = "sum"} : (tensor<131073xf32>)
// STEP-NOT: "dtensor.all_reduce"
// STEP: return
// RUN: dtensor-opt %s --dtensor-autodiff="function=loss wrt=1,2 optimizer=adam" -o %t.step.mlir
// RUN: dtensor-run -n 4 --entry loss_step %t.step.mlir | FileCheck %s --check-prefix=OK
// The bucketed gradients equal the single-device run on 4 ranks.
// RUN: dtensor-opt %s --dtensor-autodiff="function=loss wrt=1,2" -o %t.mlir
// RUN: dtensor-run -n 4 --entry loss_grad %t.mlir | FileCheck %s --check-prefix=OK
// OK: every rank's result equals the single-device run
"dtensor.mesh"() {sym_name = "dp", shape = array<i64: 4>, axis_names = ["dp"]} : () -> ()
func.func @loss(%x: tensor<1024x256xf32> {dtensor.layout = #dtensor.layout<@dp, "[S0, R]">},
                %w1: tensor<256x256xf32> {dtensor.layout = #dtensor.layout<@dp, "[R, R]">},
                %w2: tensor<256x256xf32> {dtensor.layout = #dtensor.layout<@dp, "[R, R]">}) -> tensor<f32> {
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
