// Input from a file or stdin, output to stdout or -o.
// RUN: dtensor-opt %s | FileCheck %s
// RUN: cat %s | dtensor-opt - | FileCheck %s
// RUN: cat %s | dtensor-opt | FileCheck %s
// RUN: dtensor-opt %s -o %t && FileCheck %s < %t
// A path that is a pipe is read once (it gave an empty module when read
// again by the parser).
// RUN: cat %s | dtensor-opt /dev/stdin | FileCheck %s
// RUN: not dtensor-opt %s.missing 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: not dtensor-opt %s %s 2>&1 | FileCheck %s --check-prefix=TWO
// RUN: not dtensor-opt %s -o 2>&1 | FileCheck %s --check-prefix=NOOUT
// A write that fails is an error, not a truncated result with status 0.
// RUN: not dtensor-opt %s -o /dev/full 2>&1 | FileCheck %s --check-prefix=FULL
// A run that fails leaves no output file, not an empty one, and leaves an
// existing one as it was.
// RUN: rm -f %t.bad && not dtensor-opt %s --dtensor-no-such-pass -o %t.bad
// RUN: echo 'func.func @f( {' > %t.in && not dtensor-opt %t.in -o %t.bad 2>/dev/null
// RUN: not test -e %t.bad
// RUN: echo keep > %t.keep && not dtensor-opt %t.in -o %t.keep 2>/dev/null
// RUN: grep -q '^keep$' %t.keep
// The output may be the input file: it was read again by the parser after
// -o had truncated it, which left an empty module in the user's file.
// RUN: cp %s %t.same && dtensor-opt %t.same -o %t.same && FileCheck %s < %t.same

// CHECK: module {
// CHECK-NEXT: func.func @f(%arg0: i32) -> i32 {
// CHECK-NEXT: return %arg0 : i32
// MISSING: dtensor-opt: cannot open '{{.*}}io.mlir.missing'
// TWO: more than one input file
// NOOUT: -o needs a file name
// FULL: dtensor-opt: cannot write '/dev/full': No space left on device
func.func @f(%a: i32) -> i32 {
  return %a : i32
}
