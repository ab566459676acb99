// dtensor-early-dealloc: each memref.dealloc moves up to just after the
// last op of its block that uses the buffer or what is made from it (a
// cast, a call's result: a collective's request, whose wait is a use),
// and stays after a loop that uses it inside.
// RUN: dtensor-opt %s --dtensor-early-dealloc | FileCheck %s
// The end-to-end figure: the compiled Megatron MLP's buffers at most the
// 8192 bytes dtensor-report models (and malloc's headers), not 16608 as
// when every buffer lived to the return.
// RUN: dtensor-run -n 4 --repeat 1 %S/../../examples/megatron.mlir | FileCheck %s --check-prefix=RAN
// RAN: rank 0: step time {{.*}}; buffers at most {{8[0-9][0-9][0-9]}} bytes

func.func private @start(memref<*xf32>) -> i64
func.func private @wait(i64)
func.func private @use(memref<*xf32>)

// CHECK-LABEL: func.func @chain(
// CHECK: %[[A:.*]] = memref.alloc()
// CHECK: linalg.fill {{.*}} outs(%[[A]]
// CHECK: %[[B:.*]] = memref.alloc()
// CHECK: linalg.copy ins(%[[A]] {{.*}} outs(%[[B]]
// CHECK-NEXT: memref.dealloc %[[A]]
// CHECK: %[[C:.*]] = memref.alloc()
// CHECK: linalg.copy ins(%[[B]] {{.*}} outs(%[[C]]
// CHECK-NEXT: memref.dealloc %[[B]]
// CHECK: return %[[C]]
func.func @chain(%x: f32) -> memref<4xf32> {
  %a = memref.alloc() : memref<4xf32>
  linalg.fill ins(%x : f32) outs(%a : memref<4xf32>)
  %b = memref.alloc() : memref<4xf32>
  linalg.copy ins(%a : memref<4xf32>) outs(%b : memref<4xf32>)
  %c = memref.alloc() : memref<4xf32>
  linalg.copy ins(%b : memref<4xf32>) outs(%c : memref<4xf32>)
  memref.dealloc %a : memref<4xf32>
  memref.dealloc %b : memref<4xf32>
  return %c : memref<4xf32>
}

// A buffer handed to an asynchronous start lives until the wait that takes
// the start's request, through a cast.
// CHECK-LABEL: func.func @async(
// CHECK: %[[R:.*]] = call @start
// CHECK-NEXT: linalg.fill
// CHECK-NEXT: call @wait(%[[R]])
// CHECK-NEXT: memref.dealloc
// CHECK-NEXT: linalg.fill
// CHECK-NEXT: return
func.func @async(%x: f32, %y: memref<4xf32>) {
  %a = memref.alloc() : memref<4xf32>
  linalg.fill ins(%x : f32) outs(%a : memref<4xf32>)
  %u = memref.cast %a : memref<4xf32> to memref<*xf32>
  %r = call @start(%u) : (memref<*xf32>) -> i64
  linalg.fill ins(%x : f32) outs(%y : memref<4xf32>)
  call @wait(%r) : (i64) -> ()
  linalg.fill ins(%x : f32) outs(%y : memref<4xf32>)
  memref.dealloc %a : memref<4xf32>
  return
}

// Used inside a loop: freed after the loop, not inside it; a buffer made
// and freed inside the loop's body moves within the body.
// CHECK-LABEL: func.func @loop(
// CHECK: scf.for
// CHECK: %[[T:.*]] = memref.alloc()
// CHECK: func.call @use
// CHECK-NEXT: memref.dealloc %[[T]]
// CHECK-NEXT: linalg.fill
// CHECK: }
// CHECK-NEXT: memref.dealloc
// CHECK-NEXT: linalg.fill
// CHECK-NEXT: return
func.func @loop(%x: f32, %y: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %a = memref.alloc() : memref<4xf32>
  linalg.fill ins(%x : f32) outs(%a : memref<4xf32>)
  scf.for %i = %c0 to %c4 step %c1 {
    %t = memref.alloc() : memref<4xf32>
    linalg.copy ins(%a : memref<4xf32>) outs(%t : memref<4xf32>)
    %ut = memref.cast %t : memref<4xf32> to memref<*xf32>
    func.call @use(%ut) : (memref<*xf32>) -> ()
    linalg.fill ins(%x : f32) outs(%y : memref<4xf32>)
    memref.dealloc %t : memref<4xf32>
  }
  linalg.fill ins(%x : f32) outs(%y : memref<4xf32>)
  memref.dealloc %a : memref<4xf32>
  return
}

// A buffer from outside the dealloc's block stays where it is.
// CHECK-LABEL: func.func @outside(
// CHECK: scf.if
// CHECK-NEXT: linalg.fill
// CHECK-NEXT: linalg.fill
// CHECK-NEXT: memref.dealloc
func.func @outside(%x: f32, %y: memref<4xf32>, %p: i1) {
  %a = memref.alloc() : memref<4xf32>
  scf.if %p {
    linalg.fill ins(%x : f32) outs(%a : memref<4xf32>)
    linalg.fill ins(%x : f32) outs(%y : memref<4xf32>)
    memref.dealloc %a : memref<4xf32>
  }
  return
}
