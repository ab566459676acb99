// dtensor-schedule-collectives orders each block so that what a
// collective's input needs comes first and the rest runs while it is in
// flight. Here (a backward pass as program order has it) the gradient of
// w2 (%dw2, needed only by its update, through a call of a function with
// no effects) comes before the gradient the reduce_scatter takes;
// scheduled, the reduce_scatter's input is made first and %dw2 runs
// between the collective and its use. A call of a declared function (it
// may have effects, or communicate) keeps its place after the collective,
// and the terminator stays last.
// RUN: dtensor-opt %s --split-input-file --dtensor-schedule-collectives | FileCheck %s
// CHECK-LABEL: func.func @backward(
// CHECK: %[[G:.*]] = linalg.matmul ins(%arg0, %arg1
// CHECK-NEXT: %[[RS:.*]] = "dtensor.reduce_scatter"(%[[G]])
// CHECK-NEXT: %[[DW2:.*]] = linalg.matmul ins(%arg2, %arg3
// CHECK-NEXT: %[[S:.*]] = call @scale(%[[DW2]])
// CHECK-NEXT: %[[U:.*]] = arith.addf %[[RS]], %arg4
// CHECK-NEXT: call @log(%[[S]])
// CHECK-NEXT: return %[[U]]
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 2>, axis_names = ["x"]} : () -> ()
func.func private @log(tensor<8x8xf32>)
func.func @scale(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %y = math.exp %x : tensor<8x8xf32>
  return %y : tensor<8x8xf32>
}
func.func @backward(%a: tensor<8x8xf32>, %b: tensor<8x8xf32>, %c: tensor<8x8xf32>,
                    %d: tensor<8x8xf32>, %w: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %dw2 = linalg.matmul ins(%c, %d : tensor<8x8xf32>, tensor<8x8xf32>) outs(%c : tensor<8x8xf32>) -> tensor<8x8xf32>
  %s = call @scale(%dw2) : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %g = linalg.matmul ins(%a, %b : tensor<8x8xf32>, tensor<8x8xf32>) outs(%a : tensor<8x8xf32>) -> tensor<8x8xf32>
  %rs = "dtensor.reduce_scatter"(%g) {mesh = @m, mesh_axes = array<i64: 0>, reduce = "sum", shard_dim = 0 : i64} : (tensor<8x8xf32>) -> tensor<4x8xf32>
  %u = arith.addf %rs, %w : tensor<4x8xf32>
  call @log(%s) : (tensor<8x8xf32>) -> ()
  return %u : tensor<4x8xf32>
}

// -----

// Collectives keep their order; an op a later collective needs comes before
// the consumer of an earlier one; a loop that uses a value in its body
// follows that value.
// Under memory= the schedule stays within the budget (or program order's
// peak, if higher), counting as dtensor-report does. Beyond the 256 bytes
// of arguments, program order holds 768 at the loop (%t, %r and its body's
// value); hoisting the exp and its all_gather keeps the gathered 256 bytes
// through the loop (1024). Under 1024 bytes the function keeps program
// order; under 1280 it is scheduled as without a budget.
// RUN: dtensor-opt %s --split-input-file --dtensor-schedule-collectives=memory=1024 | FileCheck %s --check-prefix=MEM
// RUN: dtensor-opt %s --split-input-file --dtensor-schedule-collectives=memory=1280 | FileCheck %s
// RUN: not dtensor-opt %s --split-input-file --dtensor-schedule-collectives=memory=lots 2>&1 | FileCheck %s --check-prefix=BYTES
// MEM-LABEL: func.func @two(
// MEM: "dtensor.all_gather"(%arg0)
// MEM-NEXT: math.tanh
// MEM: scf.for
// MEM: math.exp %arg1
// MEM-NEXT: "dtensor.all_gather"
// BYTES: error: dtensor-schedule-collectives: memory='lots' is not a byte count
// CHECK-LABEL: func.func @two(
// CHECK: %[[A:.*]] = "dtensor.all_gather"(%arg0)
// CHECK-NEXT: %[[X:.*]] = math.exp %arg1
// CHECK-NEXT: %[[B:.*]] = "dtensor.all_gather"(%[[X]])
// CHECK-NEXT: %[[T:.*]] = math.tanh %[[A]]
// CHECK: scf.for
// CHECK: arith.addf %{{.*}}, %[[T]]
// CHECK: return
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 2>, axis_names = ["x"]} : () -> ()
func.func @two(%p: tensor<4x8xf32>, %q: tensor<4x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  %a = "dtensor.all_gather"(%p) {gather_dim = 0 : i64, mesh = @m, mesh_axes = array<i64: 0>} : (tensor<4x8xf32>) -> tensor<8x8xf32>
  %t = math.tanh %a : tensor<8x8xf32>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %r = scf.for %i = %c0 to %c3 step %c1 iter_args(%acc = %t) -> tensor<8x8xf32> {
    %n = arith.addf %acc, %t : tensor<8x8xf32>
    scf.yield %n : tensor<8x8xf32>
  }
  %x = math.exp %q : tensor<4x8xf32>
  %b = "dtensor.all_gather"(%x) {gather_dim = 0 : i64, mesh = @m, mesh_axes = array<i64: 0>} : (tensor<4x8xf32>) -> tensor<8x8xf32>
  return %r, %b : tensor<8x8xf32>, tensor<8x8xf32>
}
