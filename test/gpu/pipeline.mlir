// RUN: dtensor-opt %s --split-input-file --verify-diagnostics --pass-pipeline="builtin.module(dtensor-to-nvvm{format=isa})" | FileCheck %s
// RUN: not dtensor-opt %s --pass-pipeline="builtin.module(dtensor-to-nvvm{chip=gfx90a})" 2>&1 | FileCheck %s --check-prefix=OPT
// RUN: dtensor-opt %s --split-input-file --verify-diagnostics --pass-pipeline="builtin.module(dtensor-to-nvvm{format=isa boundary=device})" | FileCheck %s --check-prefix=DEV
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
//
// With boundary=device the caller passes device buffers and gets the
// result's device buffer: no copies, nothing of the caller's freed.
// DEV-LABEL: llvm.func @f(
// DEV-NOT: llvm.call @mgpuMemcpy
// DEV: llvm.call @mgpuMemAlloc
// DEV: gpu.launch_func
// DEV-NOT: llvm.call @mgpuMemFree
// DEV-NOT: llvm.call @malloc
// DEV: llvm.return
// OPT: 'dtensor-to-nvvm' option 'chip=gfx90a': expected chip=sm_NN, format=bin|isa or boundary=host|device
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

// A collective is a runtime call on device buffers (the nccl backend's),
// made after the host waited for the stream that wrote its operand; the
// runtime's set-up call takes the mesh's shape from host memory. (A
// collective's start completes it on device buffers; the wait is then
// nothing.)
// CHECK-LABEL: llvm.func @ar(
// CHECK: llvm.call @dtrt_mlir_init
// CHECK: llvm.call @mgpuMemAlloc
// CHECK: llvm.call @mgpuStreamSynchronize
// CHECK-NEXT: llvm.call @mgpuStreamDestroy
// CHECK: llvm.call @dtrt_mlir_collective_start_f32
// CHECK: llvm.call @dtrt_mlir_wait_f32
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 2>, axis_names = ["x"]} : () -> ()
func.func @ar(%a: tensor<8xf32>) -> tensor<8xf32> {
  %e = tensor.empty() : tensor<8xf32>
  %x = linalg.exp ins(%a : tensor<8xf32>) outs(%e : tensor<8xf32>) -> tensor<8xf32>
  %r = "dtensor.all_reduce"(%x) {mesh = @m, mesh_axes = array<i64: 0>, reduce = "sum"} : (tensor<8xf32>) -> tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

// Host code that branches on a value read from device memory cannot move
// into a kernel: reported where it is.
func.func @branch(%a: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<8xf32> {
  %c0 = arith.constant 0 : index
  %z = arith.constant 0.0 : f32
  // expected-error @+1 {{would run on the host over device memory}}
  %v = tensor.extract %a[%c0] : tensor<8xf32>
  %p = arith.cmpf ogt, %v, %z : f32
  %r = scf.if %p -> tensor<8xf32> {
    scf.yield %a : tensor<8xf32>
  } else {
    scf.yield %b : tensor<8xf32>
  }
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

// -----

// A contraction is a call of the runtime on device buffers (cuBLAS there),
// after the host waited for the stream of the copies before it; its zero
// fill (generalized into a linalg.generic on this target) is dropped, the
// call overwriting the output (first argument 1); the elementwise op after
// it stays a kernel.
// CHECK-LABEL: llvm.func @mm(
// CHECK: [[ONE:%[0-9]+]] = llvm.mlir.constant(1 : i64)
// CHECK-NOT: gpu.launch_func
// CHECK: llvm.call @mgpuStreamSynchronize
// CHECK-NEXT: llvm.call @mgpuStreamDestroy
// CHECK-NEXT: llvm.call @dtrt_mlir_contract_bf16_bf16_f32([[ONE]],
// CHECK: gpu.launch_func <{{.*}}> @mm_kernel::@mm_kernel
func.func @mm(%a: tensor<64x32xbf16>, %b: tensor<32x16xbf16>) -> tensor<64x16xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64x16xf32>
  %i = linalg.fill ins(%z : f32) outs(%e : tensor<64x16xf32>) -> tensor<64x16xf32>
  %c = linalg.matmul ins(%a, %b : tensor<64x32xbf16>, tensor<32x16xbf16>) outs(%i : tensor<64x16xf32>) -> tensor<64x16xf32>
  %t = linalg.exp ins(%c : tensor<64x16xf32>) outs(%e : tensor<64x16xf32>) -> tensor<64x16xf32>
  return %t : tensor<64x16xf32>
}

// -----

// A slice returned as it is: the copy out of the strided view is a kernel
// (gpu.memcpy copies contiguous buffers only).
// CHECK-LABEL: llvm.func @slice(
// CHECK: gpu.launch_func
// DEV-LABEL: llvm.func @slice(
// DEV: gpu.launch_func <{{.*}}> @slice_kernel::@slice_kernel
func.func @slice(%a: tensor<3x3xf32>) -> tensor<2x2xf32> {
  %s = tensor.extract_slice %a[0, 0] [2, 2] [1, 1] : tensor<3x3xf32> to tensor<2x2xf32>
  return %s : tensor<2x2xf32>
}
