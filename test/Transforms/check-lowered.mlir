// RUN: dtensor-opt %s --verify-diagnostics --dtensor-check-lowered

// What is left outside the LLVM dialect is named at its place.
llvm.func @f(%x: f32) -> f32 {
  // expected-error @+1 {{'math.erf' op is not supported by the CPU code generation (it was not lowered to LLVM)}}
  %y = math.erf %x : f32
  llvm.return %y : f32
}

// An op on an element type the code generation has no arithmetic for
// names the type (f8E4M3FN and f8E5M2 are computed in f32 by
// dtensor-expand-f8; the other f8 kinds are not).
llvm.func @f8(%x: f32) -> f32 {
  // expected-error @+1 {{'arith.truncf' op computes on f8E4M3FNUZ, an element type the CPU code generation does not support (floats of 16 to 64 bits, f8E4M3FN and f8E5M2, integers i1 and i8 to i64)}}
  %t = arith.truncf %x : f32 to f8E4M3FNUZ
  // expected-error @+1 {{'arith.extf' op computes on f8E4M3FNUZ}}
  %y = arith.extf %t : f8E4M3FNUZ to f32
  llvm.return %y : f32
}
