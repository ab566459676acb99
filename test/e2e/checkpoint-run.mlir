// Arguments from a checkpoint and results into one: numpy makes the inputs,
// dtensor-ckpt imports them on a 2-device mesh, dtensor-run loads them on
// 4 ranks in the program's layouts (each rank reading only its part), runs
// the Megatron MLP, checks it against the single-device run and saves the
// result; numpy checks the exported result.
// RUN: rm -rf %t && mkdir -p %t
// RUN: /usr/bin/python3 %S/Inputs/npy-mlp.py make %t
// RUN: dtensor-ckpt import %t/ck x %t/x.npy --mesh 2 --spec "[S0, R]"
// RUN: dtensor-ckpt import %t/ck w1 %t/w1.npy --mesh 2 --spec "[R, S0]"
// RUN: dtensor-ckpt import %t/ck w2 %t/w2.npy --mesh 2 --spec "[R, R]"
// RUN: dtensor-run -n 4 --load %t/ck --save %t/out %s | FileCheck %s
// CHECK: every rank's result equals the single-device run
// RUN: dtensor-ckpt info %t/out | FileCheck %s --check-prefix=INFO
// INFO: y f32 16x64 tp=4 [R, R] 1 4096
// RUN: dtensor-ckpt export %t/out y %t/y.npy
// RUN: /usr/bin/python3 %S/Inputs/npy-mlp.py check %t
//
// The same on MPI, saving over the previous result.
// RUN: dtensor-run -n 4 --backend mpi --load %t/ck --save %t/out %s | FileCheck %s
// RUN: dtensor-ckpt verify %t/out
//
// A checkpoint without an argument's name: a message naming it.
// RUN: not dtensor-run -n 4 --load %t/out %s 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: dtensor-run: {{.*}}out/dtensor-checkpoint.json: no tensor 'x' for argument 0 of the entry (f32 16x64; name an argument with {dtensor.name = "..."})
"dtensor.mesh"() {sym_name = "tp", shape = array<i64: 4>, axis_names = ["tp"]} : () -> ()
func.func @megatron(%x: tensor<16x64xf32> {dtensor.name = "x", dtensor.layout = #dtensor.layout<@tp, "[R, R]">},
                    %w1: tensor<64x256xf32> {dtensor.name = "w1", dtensor.layout = #dtensor.layout<@tp, "[R, S0]">},
                    %w2: tensor<256x64xf32> {dtensor.name = "w2", dtensor.layout = #dtensor.layout<@tp, "[S0, R]">})
    -> (tensor<16x64xf32> {dtensor.name = "y", dtensor.layout = #dtensor.layout<@tp, "[R, R]">}) {
  %z = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<16x256xf32>
  %i1 = linalg.fill ins(%z : f32) outs(%e1 : tensor<16x256xf32>) -> tensor<16x256xf32>
  %h = linalg.matmul ins(%x, %w1 : tensor<16x64xf32>, tensor<64x256xf32>) outs(%i1 : tensor<16x256xf32>) -> tensor<16x256xf32>
  %e2 = tensor.empty() : tensor<16x64xf32>
  %i2 = linalg.fill ins(%z : f32) outs(%e2 : tensor<16x64xf32>) -> tensor<16x64xf32>
  %y = linalg.matmul ins(%h, %w2 : tensor<16x256xf32>, tensor<256x64xf32>) outs(%i2 : tensor<16x64xf32>) -> tensor<16x64xf32>
  return %y : tensor<16x64xf32>
}
