// RUN: dtensor-opt %s --split-input-file --dtensor-approximate-math | FileCheck %s

// f32 tanh and exp become straight-line code (tanh's own exp included):
// no math.tanh or math.exp is left, and no call.
// CHECK-LABEL: func.func @f32(
// CHECK-NOT: math.tanh
// CHECK-NOT: math.exp
// CHECK-NOT: call
// The polynomials may become fused multiply-adds and tanh's one division a
// reciprocal estimate refined by Newton's step (its operands are finite):
// about a third fewer vector operations in a gelu.
// CHECK: arith.mulf %{{.*}} fastmath<contract> : f32
// CHECK: arith.addf %{{.*}} fastmath<contract> : f32
// CHECK: arith.divf %{{.*}} fastmath<ninf,arcp> : f32
// CHECK: math.floor
// CHECK: arith.bitcast
// CHECK: return
func.func @f32(%x: f32) -> (f32, f32) {
  %t = math.tanh %x : f32
  %e = math.exp %x : f32
  return %t, %e : f32, f32
}

// -----

// Other types stay as they are.
// CHECK-LABEL: func.func @f64(
// CHECK: math.tanh %{{.*}} : f64
// CHECK: math.exp %{{.*}} : vector<4xf32>
func.func @f64(%x: f64, %v: vector<4xf32>) -> (f64, vector<4xf32>) {
  %t = math.tanh %x : f64
  %e = math.exp %v : vector<4xf32>
  return %t, %e : f64, vector<4xf32>
}
