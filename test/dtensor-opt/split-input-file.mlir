// Each chunk is parsed on its own; diagnostics keep the file's line numbers.
// RUN: not dtensor-opt %s --split-input-file 2>&1 | FileCheck %s
// RUN: not dtensor-opt %s --split-input-file 2>/dev/null | FileCheck %s --check-prefix=OUT

// OUT: func.func @first
// OUT: // -----
// OUT: func.func @third
func.func @first() {
  return
}

// -----

// CHECK: split-input-file.mlir:[[@LINE+1]]:3: error: Dialect `bogus' not found for custom op 'bogus.op'
  bogus.op
func.func @second() {
  return
}

// -----

func.func @third() {
  return
}
