// RUN: dtensor-opt %s --split-input-file --dtensor-propagate --dtensor-verify | FileCheck %s

// A loop-carried value reaches a fixed point: the init is replicated, the
// body makes it column-sharded, so the iteration argument becomes
// column-sharded and the body is decided again with that layout.
"dtensor.mesh"() {sym_name = "tp", shape = array<i64: 4>, axis_names = ["tp"]} : () -> ()
// CHECK-LABEL: func.func @loop(
func.func @loop(%x: tensor<16x64xf32> {dtensor.layout = #dtensor.layout<@tp, "[R, R]">},
                %w: tensor<64x64xf32> {dtensor.layout = #dtensor.layout<@tp, "[R, S0]">}, %n: index) -> tensor<16x64xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %z = arith.constant 0.0 : f32
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %x) -> (tensor<16x64xf32>) {
    %e = tensor.empty() : tensor<16x64xf32>
    %f = linalg.fill ins(%z : f32) outs(%e : tensor<16x64xf32>) -> tensor<16x64xf32>
    // CHECK: linalg.matmul {dtensor.layout = #dtensor.layout<@tp, "[R, S0]">, {{.*}}dtensor.operand_layouts = [#dtensor.layout<@tp, "[R, R]">, #dtensor.layout<@tp, "[R, S0]">, #dtensor.layout<@tp, "[R, S0]">]}
    %h = linalg.matmul ins(%acc, %w : tensor<16x64xf32>, tensor<64x64xf32>) outs(%f : tensor<16x64xf32>) -> tensor<16x64xf32>
    // CHECK: scf.yield {dtensor.operand_layouts = [#dtensor.layout<@tp, "[R, S0]">]}
    scf.yield %h : tensor<16x64xf32>
  // CHECK: } {dtensor.layout = #dtensor.layout<@tp, "[R, S0]">, dtensor.operand_layouts = [unit, unit, unit, #dtensor.layout<@tp, "[R, S0]">]}
  }
  return %r : tensor<16x64xf32>
}

// -----

// scf.if: the result takes the then-branch's layout and both branches
// yield it.
"dtensor.mesh"() {sym_name = "tp", shape = array<i64: 4>, axis_names = ["tp"]} : () -> ()
// CHECK-LABEL: func.func @branch(
func.func @branch(%x: tensor<16x64xf32> {dtensor.layout = #dtensor.layout<@tp, "[R, S0]">},
                  %y: tensor<16x64xf32> {dtensor.layout = #dtensor.layout<@tp, "[S0, R]">}, %c: i1) -> tensor<16x64xf32> {
  %s = scf.if %c -> (tensor<16x64xf32>) {
    // CHECK: arith.addf {{.*}}dtensor.layout = #dtensor.layout<@tp, "[R, S0]">
    %a = arith.addf %x, %x : tensor<16x64xf32>
    // CHECK: scf.yield {dtensor.operand_layouts = [#dtensor.layout<@tp, "[R, S0]">]}
    scf.yield %a : tensor<16x64xf32>
  } else {
    // CHECK: scf.yield {dtensor.operand_layouts = [#dtensor.layout<@tp, "[R, S0]">]} %arg1
    scf.yield %y : tensor<16x64xf32>
  // CHECK: } {dtensor.layout = #dtensor.layout<@tp, "[R, S0]">}
  }
  return %s : tensor<16x64xf32>
}

// -----

// An annotation inside a loop body is seen too.
"dtensor.mesh"() {sym_name = "tp", shape = array<i64: 4>, axis_names = ["tp"]} : () -> ()
// CHECK-LABEL: func.func @annotated_body(
func.func @annotated_body(%x: tensor<16x64xf32>, %n: index) -> tensor<16x64xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %x) -> (tensor<16x64xf32>) {
    %a = "dtensor.annotate"(%acc) {layout = #dtensor.layout<@tp, "[S0, R]">} : (tensor<16x64xf32>) -> tensor<16x64xf32>
    // CHECK: math.exp {{.*}}dtensor.layout = #dtensor.layout<@tp, "[S0, R]">
    %b = math.exp %a : tensor<16x64xf32>
    scf.yield %b : tensor<16x64xf32>
  }
  return %r : tensor<16x64xf32>
}

// -----

// scf.while runs replicated: the init is needed replicated, the body's
// matmul still splits its columns, and what the body yields and the
// condition forwards is replicated (so every device runs the same
// iterations).
"dtensor.mesh"() {sym_name = "tp", shape = array<i64: 4>, axis_names = ["tp"]} : () -> ()
// CHECK-LABEL: func.func @while(
func.func @while(%x: tensor<16x64xf32> {dtensor.layout = #dtensor.layout<@tp, "[S0, R]">},
                 %w: tensor<64x64xf32> {dtensor.layout = #dtensor.layout<@tp, "[R, S0]">}, %go: i1) -> tensor<16x64xf32> {
  %z = arith.constant 0.0 : f32
  %r = scf.while (%v = %x) : (tensor<16x64xf32>) -> tensor<16x64xf32> {
    // CHECK: scf.condition(%{{.*}}) {dtensor.operand_layouts = [unit, #dtensor.layout<@tp, "[R, R]">]}
    scf.condition(%go) %v : tensor<16x64xf32>
  } do {
  ^bb0(%v1: tensor<16x64xf32>):
    %e = tensor.empty() : tensor<16x64xf32>
    %f = linalg.fill ins(%z : f32) outs(%e : tensor<16x64xf32>) -> tensor<16x64xf32>
    // CHECK: linalg.matmul {dtensor.layout = #dtensor.layout<@tp, "[R, S0]">
    %h = linalg.matmul ins(%v1, %w : tensor<16x64xf32>, tensor<64x64xf32>) outs(%f : tensor<16x64xf32>) -> tensor<16x64xf32>
    // CHECK: scf.yield {dtensor.operand_layouts = [#dtensor.layout<@tp, "[R, R]">]}
    scf.yield %h : tensor<16x64xf32>
  // CHECK: } attributes {dtensor.layout = #dtensor.layout<@tp, "[R, R]">, dtensor.operand_layouts = [#dtensor.layout<@tp, "[R, R]">]}
  }
  return %r : tensor<16x64xf32>
}
