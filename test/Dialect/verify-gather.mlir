// RUN: dtensor-opt %s --split-input-file --verify-diagnostics --dtensor-verify
// Every error the verifier reports about dtensor.gather and
// dtensor.scatter_add (docs/gather.md).

func.func @no_dims(%w: tensor<8x4xf32>, %i: tensor<3xi64>) -> tensor<3x4xf32> {
  // expected-error @+1 {{expected base attribute 'builtin.string' but got 'builtin.integer'}}
  %g = "dtensor.gather"(%w, %i) {dims = 3 : i64} : (tensor<8x4xf32>, tensor<3xi64>) -> tensor<3x4xf32>
  return %g : tensor<3x4xf32>
}

// -----

func.func @bad_letter(%w: tensor<8x4xf32>, %i: tensor<3xi64>) -> tensor<3x4xf32> {
  // expected-error @+1 {{'dims' "vD,b->bd": unexpected 'D'}}
  %g = "dtensor.gather"(%w, %i) {dims = "vD,b->bd"} : (tensor<8x4xf32>, tensor<3xi64>) -> tensor<3x4xf32>
  return %g : tensor<3x4xf32>
}

// -----

func.func @two_gathered_one_index(%w: tensor<8x4xf32>, %i: tensor<3xi64>) -> tensor<3xf32> {
  // expected-error @+1 {{the table's letters the result lacks are selected by the index tensors, one each: 1 index tensors for more}}
  %g = "dtensor.gather"(%w, %i) {dims = "vd,b->b"} : (tensor<8x4xf32>, tensor<3xi64>) -> tensor<3xf32>
  return %g : tensor<3xf32>
}

// -----

func.func @index_letter_not_in_result(%w: tensor<8x4xf32>, %i: tensor<3xi64>) -> tensor<4xf32> {
  // expected-error @+1 {{index tensor 0's letter 'b' is not one of the result's 'd'}}
  %g = "dtensor.gather"(%w, %i) {dims = "vd,b->d"} : (tensor<8x4xf32>, tensor<3xi64>) -> tensor<4xf32>
  return %g : tensor<4xf32>
}

// -----

func.func @rank(%w: tensor<8x4xf32>, %i: tensor<3xi64>) -> tensor<3x4xf32> {
  // expected-error @+1 {{'dims' gives the table 3 dims, but it is not a tensor of that rank}}
  %g = "dtensor.gather"(%w, %i) {dims = "vdx,b->bdx"} : (tensor<8x4xf32>, tensor<3xi64>) -> tensor<3x4xf32>
  return %g : tensor<3x4xf32>
}

// -----

func.func @size(%w: tensor<8x4xf32>, %i: tensor<3xi64>) -> tensor<3x5xf32> {
  // expected-error @+1 {{'dims' letter 'd' has size 5 in the result but 4 elsewhere}}
  %g = "dtensor.gather"(%w, %i) {dims = "vd,b->bd"} : (tensor<8x4xf32>, tensor<3xi64>) -> tensor<3x5xf32>
  return %g : tensor<3x5xf32>
}

// -----

func.func @float_index(%w: tensor<8x4xf32>, %i: tensor<3xf32>) -> tensor<3x4xf32> {
  // expected-error @+1 {{index tensor 0 must hold signless integers or index}}
  %g = "dtensor.gather"(%w, %i) {dims = "vd,b->bd"} : (tensor<8x4xf32>, tensor<3xf32>) -> tensor<3x4xf32>
  return %g : tensor<3x4xf32>
}

// -----

func.func @element(%w: tensor<8x4xf32>, %i: tensor<3xi64>) -> tensor<3x4xf16> {
  // expected-error @+1 {{the result's element type differs from the table's}}
  %g = "dtensor.gather"(%w, %i) {dims = "vd,b->bd"} : (tensor<8x4xf32>, tensor<3xi64>) -> tensor<3x4xf16>
  return %g : tensor<3x4xf16>
}

// -----

func.func @scatter_result(%d: tensor<8x4xf32>, %i: tensor<3xi64>, %u: tensor<3x4xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{the result's letters 'dv' must be the destination's 'vd'}}
  %s = "dtensor.scatter_add"(%d, %i, %u) {dims = "vd,b,bd->dv"} : (tensor<8x4xf32>, tensor<3xi64>, tensor<3x4xf32>) -> tensor<8x4xf32>
  return %s : tensor<8x4xf32>
}

// -----

func.func @scatter_operands(%d: tensor<8x4xf32>, %i: tensor<3xi64>) -> tensor<8x4xf32> {
  // expected-error @+1 {{expects 3 operands (destination, 1 index tensors, updates) and one result}}
  %s = "dtensor.scatter_add"(%d, %i, %i, %i) {dims = "vd,b,bd->vd"} : (tensor<8x4xf32>, tensor<3xi64>, tensor<3xi64>, tensor<3xi64>) -> tensor<8x4xf32>
  return %s : tensor<8x4xf32>
}
