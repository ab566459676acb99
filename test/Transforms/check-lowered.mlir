// RUN: dtensor-opt %s --verify-diagnostics --dtensor-check-lowered

// What is left outside the LLVM dialect is named at its place.
llvm.func @f(%x: f32) -> f32 {
  // expected-error @+1 {{'math.erf' op is not supported by the CPU code generation (it was not lowered to LLVM)}}
  %y = math.erf %x : f32
  llvm.return %y : f32
}
