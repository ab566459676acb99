// Malformed IR: a diagnostic at the source location with the line and a
// caret, exit 1.
// RUN: not dtensor-opt %s 2>&1 | FileCheck %s
// CHECK: malformed.mlir:[[@LINE+3]]:14: error: expected non-function type
// CHECK-NEXT: {{^}}func.func @g( {
// CHECK-NEXT: {{^}}             ^
func.func @g( {
