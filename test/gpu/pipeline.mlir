// RUN: dtensor-opt %s --split-input-file --verify-diagnostics --pass-pipeline="builtin.module(dtensor-to-nvvm{format=isa})" | FileCheck %s
// RUN: not dtensor-opt %s --pass-pipeline="builtin.module(dtensor-to-nvvm{chip=gfx90a})" 2>&1 | FileCheck %s --check-prefix=OPT
//
// The GPU target (dtensor-to-nvvm): buffers in device memory, an
// elementwise chain fused into one kernel mapped to blocks and threads,
// compiled to PTX for sm_90 (format=isa; cubins need ptxas, gpu/cubins.test),
// host code calling the runtime's mgpu* functions: the arguments copied in,
// the result copied out to a host buffer, device buffers freed.
// CHECK-LABEL: llvm.func @f(
// CHECK: llvm.call @mgpuStreamCreate
// CHECK-COUNT-2: llvm.call @mgpuMemcpy
// CHECK: llvm.call @mgpuMemAlloc
// CHECK: gpu.launch_func <{{.*}}> @f_kernel::@f_kernel
// CHECK-NOT: gpu.launch_func
// CHECK: llvm.call @mgpuStreamSynchronize
// CHECK: llvm.call @malloc
// CHECK: llvm.call @mgpuMemcpy
// CHECK-COUNT-3: llvm.call @mgpuMemFree
// CHECK: gpu.binary @f_kernel
// CHECK-SAME: #gpu.object<#nvvm.target<chip = "sm_90", features = "+ptx80">
// CHECK-SAME: .target sm_90
// CHECK-SAME: .visible .entry f_kernel
// OPT: 'dtensor-to-nvvm' option 'chip=gfx90a': expected chip=sm_NN or format=bin|isa
func.func @f(%a: tensor<64x128xf32>, %b: tensor<64x128xf32>) -> tensor<64x128xf32> {
  %e = tensor.empty() : tensor<64x128xf32>
  %s = linalg.add ins(%a, %b : tensor<64x128xf32>, tensor<64x128xf32>) outs(%e : tensor<64x128xf32>) -> tensor<64x128xf32>
  %t = linalg.exp ins(%s : tensor<64x128xf32>) outs(%e : tensor<64x128xf32>) -> tensor<64x128xf32>
  return %t : tensor<64x128xf32>
}

// -----

// A reduction to a scalar is a loop with no parallel dim: it moves into a
// kernel of one thread (dtensor-gpu-serial-kernels), as does the fill of
// its one element, so nothing touches device memory from the host.
// CHECK-LABEL: llvm.func @sum(
// CHECK: gpu.launch_func <{{.*}}> @sum_kernel::@sum_kernel blocks in ([[ONE:%[0-9]+]], [[ONE]], [[ONE]]) threads in ([[ONE]], [[ONE]], [[ONE]])
// CHECK: gpu.launch_func <{{.*}}> @sum_kernel_0::@sum_kernel blocks in ([[ONE2:%[0-9]+]], [[ONE2]], [[ONE2]]) threads in ([[ONE2]], [[ONE2]], [[ONE2]])
func.func @sum(%a: tensor<64xf32>) -> tensor<f32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<f32>
  %i = linalg.fill ins(%z : f32) outs(%e : tensor<f32>) -> tensor<f32>
  %r = linalg.reduce ins(%a : tensor<64xf32>) outs(%i : tensor<f32>) dimensions = [0]
    (%x: f32, %acc: f32) {
      %s = arith.addf %x, %acc : f32
      linalg.yield %s : f32
    }
  return %r : tensor<f32>
}

// -----

// Collectives are runtime calls on device buffers, which the GPU target
// does not make yet (the runtime's set-up call, on the mesh's shape, is
// host code and fine).
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 2>, axis_names = ["x"]} : () -> ()
func.func @ar(%a: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'func.call' op would run on the host over device memory}}
  %r = "dtensor.all_reduce"(%a) {mesh = @m, mesh_axes = array<i64: 0>, reduce = "sum"} : (tensor<8xf32>) -> tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

// Dynamic sizes: the device copy of an argument is allocated with the
// argument's sizes (read from the host descriptor before the copy).
// CHECK-LABEL: llvm.func @dyn(
// CHECK: llvm.call @mgpuMemAlloc
// CHECK: llvm.call @mgpuMemcpy
// CHECK: gpu.launch_func
func.func @dyn(%a: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %d0 = tensor.dim %a, %c0 : tensor<?x?xf32>
  %d1 = tensor.dim %a, %c1 : tensor<?x?xf32>
  %e = tensor.empty(%d0, %d1) : tensor<?x?xf32>
  %t = linalg.exp ins(%a : tensor<?x?xf32>) outs(%e : tensor<?x?xf32>) -> tensor<?x?xf32>
  return %t : tensor<?x?xf32>
}
