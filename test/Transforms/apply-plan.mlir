// dtensor-apply-plan: layouts from a plan file (docs/plans.md). Argument
// names come from dtensor.name or a name location.
// RUN: dtensor-opt %s --dtensor-apply-plan="plan=%S/Inputs/plans/mlp.json" | FileCheck %s
// CHECK: "dtensor.mesh"() {axis_names = ["dp", "tp"], shape = array<i64: 2, 2>, sym_name = "mesh"}
// CHECK-LABEL: func.func @mlp(
// CHECK-SAME: {dtensor.layout = #dtensor.layout<@mesh, "[S0, R]">, dtensor.name = "x"}
// CHECK-SAME: {dtensor.layout = #dtensor.layout<@mesh, "[R, S1]">, dtensor.name = "l1.w_up"}
// CHECK-SAME: %{{.*}}: tensor<128xf32> {dtensor.layout = #dtensor.layout<@mesh, "[S1]">}
// CHECK-SAME: {dtensor.layout = #dtensor.layout<@mesh, "[S1, R]">, dtensor.name = "l1.w_down"}
//
// Then the whole pipeline: Megatron on the tensor axis, data parallel on
// the other: one all_reduce over axis 1.
// RUN: dtensor-opt %s --pass-pipeline="builtin.module(dtensor-apply-plan{plan=%S/Inputs/plans/mlp.json}, dtensor-spmd)" | FileCheck %s --check-prefix=SPMD
// SPMD-COUNT-1: "dtensor.all_reduce"({{.*}}mesh_axes = array<i64: 1>
// SPMD-NOT: "dtensor.all_gather"
//
// An existing mesh by name, and a layout by name; an annotation that agrees
// with the plan stays, one that does not is an error.
// RUN: not dtensor-opt %S/Inputs/plan-existing-mesh.mlir --dtensor-apply-plan="plan=%S/Inputs/plans/existing-mesh.json" 2>&1 | FileCheck %s --check-prefix=EXISTING
// EXISTING: plan-existing-mesh.mlir:8:1: error: plan '{{.*}}existing-mesh.json': rule 1 ('*w*') gives argument 'wv' of @g the layout [R], but it is annotated [S0]
// RUN: dtensor-opt %S/Inputs/plan-existing-mesh.mlir --dtensor-apply-plan="plan=%S/Inputs/plans/existing-mesh-ok.json" | FileCheck %s --check-prefix=OK
// OK-LABEL: func.func @f(
// OK-SAME: {dtensor.layout = #dtensor.layout<@tp, "[S0, R]">, dtensor.name = "x"}
// OK-SAME: {dtensor.layout = #dtensor.layout<@tp, "[R, R]">, dtensor.name = "w"}
// OK-LABEL: func.func @g(
// OK-SAME: #dtensor.layout<@tp, "[S0]">
//
// The sequence style splits dim 1 ([batch, seq, hidden]) or its "dim" on
// the last axis (or its "axis").
// RUN: dtensor-opt %S/Inputs/plan-sequence.mlir --dtensor-apply-plan="plan=%S/Inputs/plans/sequence.json" | FileCheck %s --check-prefix=SEQ
// SEQ-LABEL: func.func @norm(
// SEQ-SAME: {dtensor.layout = #dtensor.layout<@mesh, "[R, S1, R]">, dtensor.name = "x"}
// SEQ-SAME: {dtensor.layout = #dtensor.layout<@mesh, "[S0, R]">, dtensor.name = "h"}
// SEQ-SAME: {dtensor.layout = #dtensor.layout<@mesh, "[R]">, dtensor.name = "g"}
// RUN: not dtensor-opt %S/Inputs/plan-sequence.mlir --dtensor-apply-plan="plan=%S/Inputs/plans/sequence-rank.json" 2>&1 | FileCheck %s --check-prefix=SEQRANK
// SEQRANK: plan-sequence.mlir:2:1: error: plan '{{.*}}sequence-rank.json': rule 1 ('g') splits dim 1, but argument 'g' of @norm has 1 dim
// RUN: not dtensor-opt %S/Inputs/plan-sequence.mlir --dtensor-apply-plan="plan=%S/Inputs/plans/dim-not-sequence.json" 2>&1 | FileCheck %s --check-prefix=SEQDIM
// SEQDIM: error: plan '{{.*}}dim-not-sequence.json': rule 1 ('h'): "dim" is the sequence style's tensor dim, an integer from 0 to 15
//
// Fully sharded data parallel: parameters sharded over dp (style fsdp: dim 0), or, with a tensor
// parallel style, "fsdp" shards the dim the style leaves whole (a vector's
// only dim over both axes).
// RUN: dtensor-opt %s --dtensor-apply-plan="plan=%S/Inputs/plans/fsdp.json" | FileCheck %s --check-prefix=FSDPTP
// FSDPTP-LABEL: func.func @mlp(
// FSDPTP-SAME: {dtensor.layout = #dtensor.layout<@mesh, "[S0, R]">, dtensor.name = "x"}
// FSDPTP-SAME: {dtensor.layout = #dtensor.layout<@mesh, "[S0, S1]">, dtensor.name = "l1.w_up"}
// FSDPTP-SAME: %{{.*}}: tensor<128xf32> {dtensor.layout = #dtensor.layout<@mesh, "[S10]">}
// FSDPTP-SAME: {dtensor.layout = #dtensor.layout<@mesh, "[S1, S0]">, dtensor.name = "l1.w_down"}
// RUN: dtensor-opt %s --dtensor-apply-plan="plan=%S/Inputs/plans/fsdp-only.json" | FileCheck %s --check-prefix=FSDP
// FSDP-LABEL: func.func @mlp(
// FSDP-SAME: {dtensor.layout = #dtensor.layout<@mesh, "[S0, R]">, dtensor.name = "x"}
// FSDP-SAME: {dtensor.layout = #dtensor.layout<@mesh, "[S0, R]">, dtensor.name = "l1.w_up"}
// FSDP-SAME: %{{.*}}: tensor<128xf32> {dtensor.layout = #dtensor.layout<@mesh, "[S0]">}
// FSDP-SAME: {dtensor.layout = #dtensor.layout<@mesh, "[S0, R]">, dtensor.name = "l1.w_down"}
// RUN: not dtensor-opt %s --dtensor-apply-plan="plan=%S/Inputs/plans/fsdp-same-axis.json" 2>&1 | FileCheck %s --check-prefix=FSDPAXIS
// FSDPAXIS: error: plan '{{.*}}fsdp-same-axis.json': rule 1 ('*.w_up'): "fsdp" names the style's own axis
//
// Errors, each naming the plan and what is wrong.
// RUN: not dtensor-opt %s --dtensor-apply-plan="plan=%S/Inputs/plans/unknown-style.json" 2>&1 | FileCheck %s --check-prefix=STYLE
// STYLE: error: plan '{{.*}}unknown-style.json': rule 1 ('*.w_up'): unknown style 'colwize' (valid: colwise, rowwise, replicate, data_parallel, sequence, fsdp, vocab_parallel)
// RUN: not dtensor-opt %s --dtensor-apply-plan="plan=%S/Inputs/plans/no-match.json" 2>&1 | FileCheck %s --check-prefix=NOMATCH
// NOMATCH: error: plan '{{.*}}no-match.json': rule 2 ('layer2.*') matches no argument {{.*}}the module's named arguments: x, l1.w_up, b_up, l1.w_down)
// RUN: not dtensor-opt %s --dtensor-apply-plan="plan=%S/Inputs/plans/conflict.json" 2>&1 | FileCheck %s --check-prefix=CONFLICT
// CONFLICT: apply-plan.mlir:[[@LINE+17]]:1: error: plan '{{.*}}conflict.json': conflicting rules for argument 'l1.w_down' of @mlp: rule 1 ('*.w_*') gives [R, S(tp)], rule 2 ('*.w_down') gives [S(tp), R]
// RUN: not dtensor-opt %s --dtensor-apply-plan="plan=%S/Inputs/plans/bad-json.json" 2>&1 | FileCheck %s --check-prefix=JSON
// JSON: error: plan '{{.*}}bad-json.json':2:{{[0-9]+}}: '}' expected near '"style"'
// RUN: not dtensor-opt %s --dtensor-apply-plan="plan=%S/Inputs/plans/bad-axis.json" 2>&1 | FileCheck %s --check-prefix=AXIS
// AXIS: error: plan '{{.*}}bad-axis.json': rule 1: axis pp is not an axis of mesh @mesh (its axes: dp, tp)
// RUN: not dtensor-opt %s --dtensor-apply-plan="plan=%S/Inputs/plans/bad-key.json" 2>&1 | FileCheck %s --check-prefix=KEY
// KEY: error: plan '{{.*}}bad-key.json': rule 1: unknown key "axes" (valid: match, function, layout, style, axis, dim, fsdp, storage, interleave)
// RUN: not dtensor-opt %s --dtensor-apply-plan="plan=%S/Inputs/plans/empty-mesh-name.json" 2>&1 | FileCheck %s --check-prefix=EMPTY
// EMPTY: error: plan '{{.*}}empty-mesh-name.json': the mesh's name is empty
// RUN: not dtensor-opt %s --dtensor-apply-plan="plan=%S/Inputs/plans/nine-axes.json" 2>&1 | FileCheck %s --check-prefix=NINE
// NINE: error: plan '{{.*}}nine-axes.json': mesh @big has 9 axes; at most 8 are supported
// RUN: not dtensor-opt %s --dtensor-apply-plan="plan=%S/Inputs/plans/no-mesh.json" 2>&1 | FileCheck %s --check-prefix=NOMESH
// NOMESH: error: plan '{{.*}}no-mesh.json': the module has no mesh @pp, and the plan does not declare it
// RUN: not dtensor-opt %s --dtensor-apply-plan="plan=%S/Inputs/plans/missing.json" 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: error: plan {{.*}}missing.json: cannot read: No such file or directory
// RUN: not dtensor-opt %s --dtensor-apply-plan 2>&1 | FileCheck %s --check-prefix=NOPLAN
// NOPLAN: error: dtensor-apply-plan needs plan=FILE
func.func @mlp(%x: tensor<64x256xf32> {dtensor.name = "x"},
               %w_up: tensor<256x512xf32> {dtensor.name = "l1.w_up"},
               %b_up: tensor<128xf32> loc("b_up"),
               %w_down: tensor<512x256xf32> {dtensor.name = "l1.w_down"}) -> tensor<64x256xf32> {
  %z = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<64x512xf32>
  %i1 = linalg.fill ins(%z : f32) outs(%e1 : tensor<64x512xf32>) -> tensor<64x512xf32>
  %h = linalg.matmul ins(%x, %w_up : tensor<64x256xf32>, tensor<256x512xf32>) outs(%i1 : tensor<64x512xf32>) -> tensor<64x512xf32>
  %e2 = tensor.empty() : tensor<64x256xf32>
  %i2 = linalg.fill ins(%z : f32) outs(%e2 : tensor<64x256xf32>) -> tensor<64x256xf32>
  %y = linalg.matmul ins(%h, %w_down : tensor<64x512xf32>, tensor<512x256xf32>) outs(%i2 : tensor<64x256xf32>) -> tensor<64x256xf32>
  return %y : tensor<64x256xf32>
}

// A FIFO or a device as the plan blocked forever: refused.
// RUN: rm -f %t.fifo && mkfifo %t.fifo
// RUN: not dtensor-opt %s --dtensor-apply-plan="plan=%t.fifo" 2>&1 | FileCheck %s --check-prefix=FIFO
// RUN: not dtensor-opt %s --dtensor-apply-plan="plan=/dev/zero" 2>&1 | FileCheck %s --check-prefix=DEVICE
// FIFO: error: plan {{.*}}.fifo: is a FIFO: only a regular file is read
// DEVICE: error: plan /dev/zero: is a device: only a regular file is read
