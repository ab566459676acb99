// RUN: dtensor-run -n 2 %s | FileCheck %s
// CHECK: rank 1: {{[0-9]+}} result elements (all results), equal to the single-device run
// CHECK: every rank's result equals the single-device run
// An entry of 20 arguments and 10 results (dtensor-run had a limit of 16
// and 8; a GPT-2 block with separate q, k, v weights has 17 arguments).
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 2>, axis_names = ["x"]} : () -> ()
func.func @many(%a0: tensor<6x4xf32> {dtensor.layout = #dtensor.layout<@m, "[S0, R]">},
    %a1: tensor<6x4xf32> {dtensor.layout = #dtensor.layout<@m, "[S0, R]">},
    %a2: tensor<6x4xf32> {dtensor.layout = #dtensor.layout<@m, "[S0, R]">},
    %a3: tensor<6x4xf32> {dtensor.layout = #dtensor.layout<@m, "[S0, R]">},
    %a4: tensor<6x4xf32> {dtensor.layout = #dtensor.layout<@m, "[S0, R]">},
    %a5: tensor<6x4xf32> {dtensor.layout = #dtensor.layout<@m, "[S0, R]">},
    %a6: tensor<6x4xf32> {dtensor.layout = #dtensor.layout<@m, "[S0, R]">},
    %a7: tensor<6x4xf32> {dtensor.layout = #dtensor.layout<@m, "[S0, R]">},
    %a8: tensor<6x4xf32> {dtensor.layout = #dtensor.layout<@m, "[S0, R]">},
    %a9: tensor<6x4xf32> {dtensor.layout = #dtensor.layout<@m, "[S0, R]">},
    %a10: tensor<6x4xf32> {dtensor.layout = #dtensor.layout<@m, "[S0, R]">},
    %a11: tensor<6x4xf32> {dtensor.layout = #dtensor.layout<@m, "[S0, R]">},
    %a12: tensor<6x4xf32> {dtensor.layout = #dtensor.layout<@m, "[S0, R]">},
    %a13: tensor<6x4xf32> {dtensor.layout = #dtensor.layout<@m, "[S0, R]">},
    %a14: tensor<6x4xf32> {dtensor.layout = #dtensor.layout<@m, "[S0, R]">},
    %a15: tensor<6x4xf32> {dtensor.layout = #dtensor.layout<@m, "[S0, R]">},
    %a16: tensor<6x4xf32> {dtensor.layout = #dtensor.layout<@m, "[S0, R]">},
    %a17: tensor<6x4xf32> {dtensor.layout = #dtensor.layout<@m, "[S0, R]">},
    %a18: tensor<6x4xf32> {dtensor.layout = #dtensor.layout<@m, "[S0, R]">},
    %a19: tensor<6x4xf32> {dtensor.layout = #dtensor.layout<@m, "[S0, R]">}) -> (
    tensor<6x4xf32>,
    tensor<6x4xf32>,
    tensor<6x4xf32>,
    tensor<6x4xf32>,
    tensor<6x4xf32>,
    tensor<6x4xf32>,
    tensor<6x4xf32>,
    tensor<6x4xf32>,
    tensor<6x4xf32>,
    tensor<6x4xf32>) {
  %s0 = arith.addf %a0, %a0 : tensor<6x4xf32>
  %s1 = arith.addf %s0, %a1 : tensor<6x4xf32>
  %s2 = arith.addf %s1, %a2 : tensor<6x4xf32>
  %s3 = arith.addf %s2, %a3 : tensor<6x4xf32>
  %s4 = arith.addf %s3, %a4 : tensor<6x4xf32>
  %s5 = arith.addf %s4, %a5 : tensor<6x4xf32>
  %s6 = arith.addf %s5, %a6 : tensor<6x4xf32>
  %s7 = arith.addf %s6, %a7 : tensor<6x4xf32>
  %s8 = arith.addf %s7, %a8 : tensor<6x4xf32>
  %s9 = arith.addf %s8, %a9 : tensor<6x4xf32>
  %s10 = arith.addf %s9, %a10 : tensor<6x4xf32>
  %s11 = arith.addf %s10, %a11 : tensor<6x4xf32>
  %s12 = arith.addf %s11, %a12 : tensor<6x4xf32>
  %s13 = arith.addf %s12, %a13 : tensor<6x4xf32>
  %s14 = arith.addf %s13, %a14 : tensor<6x4xf32>
  %s15 = arith.addf %s14, %a15 : tensor<6x4xf32>
  %s16 = arith.addf %s15, %a16 : tensor<6x4xf32>
  %s17 = arith.addf %s16, %a17 : tensor<6x4xf32>
  %s18 = arith.addf %s17, %a18 : tensor<6x4xf32>
  %s19 = arith.addf %s18, %a19 : tensor<6x4xf32>
  return %s0, %s2, %s4, %s6, %s8, %s10, %s12, %s14, %s16, %s18 : tensor<6x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>
}
