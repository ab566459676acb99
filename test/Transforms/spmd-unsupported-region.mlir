// RUN: dtensor-opt %s --verify-diagnostics --dtensor-spmd

// An op inside a region dtensor-propagate does not enter: the error names
// that region's op instead of asking to run dtensor-propagate (which
// dtensor-spmd just ran).
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 2>, axis_names = ["x"]} : () -> ()
func.func @f(%a: tensor<8x4xf32> {dtensor.layout = #dtensor.layout<@m, "[S0, R]">}) -> tensor<8x4xf32> {
  %r = scf.execute_region -> tensor<8x4xf32> {
    // expected-error @+1 {{'arith.addf' op has no result layout: it is inside 'scf.execute_region', which dtensor-propagate does not enter}}
    %n = arith.addf %a, %a : tensor<8x4xf32>
    scf.yield %n : tensor<8x4xf32>
  }
  return %r : tensor<8x4xf32>
}
