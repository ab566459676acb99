// MLIR 22's parser crashes on a dense array of index
// (llvm/llvm-project#179045); dtensor-opt reports it at its place instead,
// from a file, from stdin and in a --split-input-file chunk, and leaves the
// same text alone in comments and strings.
// RUN: not dtensor-opt %s 2>&1 | FileCheck %s
// RUN: not dtensor-opt - < %s 2>&1 | FileCheck %s --check-prefix=STDIN
// RUN: not dtensor-opt %s --split-input-file 2>&1 | FileCheck %s
// RUN: sed -e 's/index: 5, 1/i64: 5, 1/' %s | dtensor-opt - | FileCheck %s --check-prefix=FIXED

// CHECK: index-array.mlir:[[@LINE+4]]:55: error: a dense array of index (array<index: ...>) is not accepted: MLIR 22's parser crashes on it (llvm/llvm-project#179045); write array<i64: ...>
// STDIN: <stdin>:[[@LINE+3]]:55: error: a dense array of index
// FIXED: func.func @f() attributes {a = array<i64: 5, 1>, s = "array<index: 2>"}
// A comment may say array<index: 1>.
func.func @f() attributes {s = "array<index: 2>", a = array<index: 5, 1>} {
  return
}
