// RUN: not dtensor-run -n 1 %s 2>&1 | FileCheck %s
// An op the CPU code generation has no lowering for is named at its place
// (dtensor-check-lowered), not left to LLVM's translation.
// CHECK: unsupported-op.mlir:[[#@LINE+9]]:10: error: 'complex.exp' op is not supported by the CPU code generation (it was not lowered to LLVM)
// CHECK-NOT: LLVM Translation failed
// CHECK-NOT: LLVMTranslationDialectInterface
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 1>, axis_names = ["x"]} : () -> ()
func.func @f(%x: tensor<8xf32>) -> tensor<8xf32> {
  %e = tensor.empty() : tensor<8xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]} ins(%x : tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %c = complex.create %v, %v : complex<f32>
    %s = complex.exp %c : complex<f32>
    %y = complex.re %s : complex<f32>
    linalg.yield %y : f32
  } -> tensor<8xf32>
  return %r : tensor<8xf32>
}
