// IR printing around passes and pass timing go to stderr.
// RUN: dtensor-opt %s --dtensor-verify --cse --mlir-print-ir-after-all 2>&1 >/dev/null | FileCheck %s --check-prefix=AFTER
// RUN: dtensor-opt %s --dtensor-verify --mlir-print-ir-before-all 2>&1 >/dev/null | FileCheck %s --check-prefix=BEFORE
// RUN: dtensor-opt %s --dtensor-verify --cse --mlir-timing 2>&1 >/dev/null | FileCheck %s --check-prefix=TIMING
// RUN: dtensor-opt %s --mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC
// RUN: dtensor-opt %s --mlir-print-debuginfo | FileCheck %s --check-prefix=DEBUG
// RUN: dtensor-opt %s --mlir-disable-threading --cse | FileCheck %s --check-prefix=THREADS

// AFTER: IR Dump After dtensor-verify
// AFTER: func.func @f
// AFTER: IR Dump After CSE
// BEFORE: IR Dump Before dtensor-verify
// TIMING: Execution time report
// TIMING: dtensor-verify
// TIMING: CSE
// GENERIC: "func.func"() <{function_type = (i32) -> i32, sym_name = "f"}>
// THREADS: func.func @f(%arg0: i32) -> i32 {
// THREADS-NEXT: return %arg0 : i32
// DEBUG: loc("{{.*}}instrumentation.mlir":[[@LINE+1]]:1)
func.func @f(%a: i32) -> i32 {
  return %a : i32
}
