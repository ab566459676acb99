// RUN: not dtensor-run -n 1 %s 2>&1 | FileCheck %s
// An argument larger than the machine's memory: dtensor-run names it and
// its size instead of writing through a failed allocation.
// CHECK: dtensor-run: {{.*}}argument 'x' needs 4000000000000000000 bytes (3725290298.46 GiB), more than this machine's memory
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 1>, axis_names = ["d"]} : () -> ()
func.func @big(%x: tensor<1000000000000000000xf32> {dtensor.name = "x"}) -> tensor<1000000000000000000xf32> {
  %r = arith.addf %x, %x : tensor<1000000000000000000xf32>
  return %r : tensor<1000000000000000000xf32>
}
