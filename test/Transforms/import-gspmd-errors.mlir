// RUN: not dtensor-opt %s --split-input-file --dtensor-import-gspmd="devices=4" 2>&1 | FileCheck %s --check-prefix=ERR
// dtensor-import-gspmd: what has no dtensor layout, or does not read, is an
// error naming the value and the sharding.

// ERR: import-gspmd-errors.mlir:[[@LINE+1]]:1: error: argument 0: mhlo.sharding "{maximal device=1}": 'maximal' shardings have no dtensor layout
func.func @maximal(%a: tensor<4xf32> {mhlo.sharding = "{maximal device=1}"}) -> tensor<4xf32> {
  return %a : tensor<4xf32>
}

// -----

// ERR: error: argument 0: mhlo.sharding "{manual}": 'manual' shardings have no dtensor layout
func.func @manual(%a: tensor<4xf32> {mhlo.sharding = "{manual}"}) -> tensor<4xf32> {
  return %a : tensor<4xf32>
}

// -----

// ERR: error: argument 0: mhlo.sharding "{devices=[2,2]<=[2,2]T(1,0)}": a transposed device order (<=[...]T(...)) is not supported
func.func @transposed(%a: tensor<4x4xf32> {mhlo.sharding = "{devices=[2,2]<=[2,2]T(1,0)}"}) -> tensor<4x4xf32> {
  return %a : tensor<4x4xf32>
}

// -----

// ERR: error: argument 0: mhlo.sharding "{devices=[2,2]0,2,1,3}": device 2 is listed where device 1 would be: only devices in iota order
func.func @permuted(%a: tensor<4x4xf32> {mhlo.sharding = "{devices=[2,2]0,2,1,3}"}) -> tensor<4x4xf32> {
  return %a : tensor<4x4xf32>
}

// -----

// ERR: error: result 0: mhlo.sharding "{devices=[2,2]<=[4]}" tiles 2 dims of a tensor of 1
func.func @rank(%a: tensor<4xf32>) -> (tensor<4xf32> {mhlo.sharding = "{devices=[2,2]<=[4]}"}) {
  return %a : tensor<4xf32>
}

// -----

// ERR: error: the GSPMD shardings of this module split the devices in orders no one mesh has (tile products 2 and 3 do not divide each other)
func.func @chains(%a: tensor<6x6xf32> {mhlo.sharding = "{devices=[2,3]<=[6]}"},
                  %b: tensor<6x6xf32> {mhlo.sharding = "{devices=[3,2]<=[6]}"}) -> tensor<6x6xf32> {
  return %a : tensor<6x6xf32>
}

// -----

// ERR: error: GSPMD shardings use 2 and 4 devices in one module
func.func @counts(%a: tensor<4xf32> {mhlo.sharding = "{devices=[2]<=[2]}"},
                  %b: tensor<4xf32> {mhlo.sharding = "{devices=[4]<=[4]}"}) -> tensor<4xf32> {
  return %a : tensor<4xf32>
}

// -----

// ERR: error: the GSPMD shardings use 2 devices, not the 4 of devices=
func.func @given(%a: tensor<4xf32> {mhlo.sharding = "{devices=[2]<=[2]}"}) -> tensor<4xf32> {
  return %a : tensor<4xf32>
}

// -----

// ERR: error: argument 0: mhlo.sharding "{devices=[2 }": devices=[...] must list positive tile counts
func.func @syntax(%a: tensor<4xf32> {mhlo.sharding = "{devices=[2 }"}) -> tensor<4xf32> {
  return %a : tensor<4xf32>
}

// -----

// ERR: error: argument 0: mhlo.sharding {{.*}}: tuple shardings are not supported
func.func @tuple(%a: tensor<4xf32> {mhlo.sharding = "{{replicated}, {replicated}}"}) -> tensor<4xf32> {
  return %a : tensor<4xf32>
}
