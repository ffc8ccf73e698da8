// RUN: fuse-opt %s --split-input-file --verify-diagnostics | filecheck %s

// Every verifier of the tile dialect, with its located message.

tile.kernel @k grid 4 (%x: memref<4xf32>) {
  tile.return
}
// CHECK: invalid.mlir:5:1: error: 'tile.kernel' op grid rank must be 1, 2 or 3, got 4

// -----

tile.kernel @k grid 1 (%x: memref<4xf32, #tile.memory_space<shared>>) {
  tile.return
}
// CHECK: invalid.mlir:12:1: error: 'tile.kernel' op kernel parameter 0 must be a global buffer, got memref<4xf32, #tile.memory_space<shared>>

// -----

tile.kernel @k grid 1 (%x: memref<?xf32>) {
  tile.return
}
// CHECK: invalid.mlir:19:1: error: 'tile.kernel' op kernel parameter 0 must have a static shape, got memref<?xf32>

// -----

tile.kernel @k grid 1 (%x: memref<4xf32>) {
  tile.kernel @inner grid 1 () {
    tile.return
  }
  tile.return
}
// CHECK: invalid.mlir:27:3: error: 'tile.kernel' op tile.kernel cannot be nested in another kernel

// -----

func.func @f(%x: memref<4xf32>) {
  tile.launch @nope grid [1] (%x) : memref<4xf32>
  func.return
}
// CHECK: invalid.mlir:37:3: error: 'tile.launch' op @nope is not a tile.kernel

// -----

tile.kernel @k grid 1 (%x: memref<4xf32>) {
  tile.return
}
func.func @f(%x: memref<4xf32>) {
  tile.launch @k grid [1, 2] (%x) : memref<4xf32>
  func.return
}
// CHECK: invalid.mlir:48:3: error: 'tile.launch' op @k has a grid of rank 1, launched with [1, 2]

// -----

tile.kernel @k grid 1 (%x: memref<4xf32>) {
  tile.return
}
func.func @f(%x: memref<4xf32>) {
  tile.launch @k grid [1] (%x, %x) : memref<4xf32>, memref<4xf32>
  func.return
}
// CHECK: invalid.mlir:59:3: error: 'tile.launch' op @k takes 1 buffers, 2 were given

// -----

tile.kernel @k grid 1 (%x: memref<4xf32>) {
  tile.return
}
func.func @f(%x: memref<5xf32>) {
  tile.launch @k grid [1] (%x) : memref<5xf32>
  func.return
}
// CHECK: invalid.mlir:70:3: error: 'tile.launch' op argument 0 of type memref<5xf32> cannot be passed as memref<4xf32>

// -----

tile.kernel @k grid 1 (%x: memref<4xf32>) {
  tile.return
}
func.func @f(%x: memref<4xf32>) {
  tile.launch @k grid [0] (%x) : memref<4xf32>
  func.return
}
// CHECK: invalid.mlir:81:3: error: 'tile.launch' op grid sizes must be positive, got [0]

// -----

tile.kernel @k grid 1 (%x: memref<4xf32>) {
  tile.launch @k grid [1] (%x) : memref<4xf32>
  tile.return
}
// CHECK: invalid.mlir:89:3: error: 'tile.launch' op tile.launch is a host op; it cannot appear in a kernel

// -----

func.func @f() -> index {
  %p = tile.program_id 0
  func.return %p : index
}
// CHECK: invalid.mlir:97:3: error: 'tile.program_id' op tile.program_id must be inside a tile.kernel

// -----

tile.kernel @k grid 1 (%x: memref<4xf32>) {
  %p = tile.program_id 1
  tile.return
}
// CHECK: invalid.mlir:105:3: error: 'tile.program_id' op axis 1 is out of range for a grid of rank 1

// -----

tile.kernel @k grid 1 (%x: memref<4x8xf32>) {
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%c0] : memref<4x8xf32> -> tensor<8xf32>
  tile.return
}
// CHECK: invalid.mlir:114:3: error: 'tile.load' op tile.load takes 2 offsets for memref<4x8xf32>, got 1

// -----

tile.kernel @k grid 1 (%x: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%c0] : memref<8xf32> -> tensor<2x8xf32>
  tile.return
}
// CHECK: invalid.mlir:123:3: error: 'tile.load' op a tile of rank 2 does not fit memref<8xf32>

// -----

tile.kernel @k grid 1 (%x: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%c0] : memref<8xf32> -> tensor<8xbf16>
  tile.return
}
// CHECK: invalid.mlir:132:3: error: 'tile.load' op the tile's element type must be the buffer's: tensor<8xbf16>, memref<8xf32>

// -----

tile.kernel @k grid 1 (%x: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%c0] : memref<8xf32> -> tensor<0xf32>
  tile.return
}
// CHECK: invalid.mlir:141:3: error: 'tile.load' op tile dims must be positive, got 0

// -----

tile.kernel @k grid 1 (%x: memref<8xbf16>) {
  %c0 = arith.constant 0 : index
  %t = nn.constant 1.0 : tensor<8xf32>
  tile.store %t, %x[%c0] : tensor<8xf32>, memref<8xbf16>
  tile.return
}
// CHECK: invalid.mlir:151:3: error: 'tile.store' op the tile's element type must be the buffer's: tensor<8xf32>, memref<8xbf16>

// -----

tile.kernel @k grid 1 (%x: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %m = tile.mask [%c0] bounds [8, 8] : tensor<8xi1>
  tile.return
}
// CHECK: invalid.mlir:160:3: error: 'tile.mask' op tile.mask needs 1 offsets and bounds for tensor<8xi1>

// -----

tile.kernel @k grid 1 (%x: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %m = tile.mask [%c0] bounds [8] : tensor<8xf32>
  tile.return
}
// CHECK: invalid.mlir:169:3: error: 'tile.mask' op tile.mask produces an i1 tile, got tensor<8xf32>

// -----

func.func @f() {
  %s = tile.alloc : memref<8xf32, #tile.memory_space<shared>>
  func.return
}
// CHECK: invalid.mlir:177:3: error: 'tile.alloc' op tile.alloc on the host allocates global memory, got memref<8xf32, #tile.memory_space<shared>>

// -----

tile.kernel @k grid 1 (%x: memref<8xf32>) {
  %s = tile.alloc : memref<8xf32>
  tile.return
}
// CHECK: invalid.mlir:185:3: error: 'tile.alloc' op tile.alloc in a kernel allocates shared memory, got memref<8xf32>

// -----

tile.kernel @k grid 1 (%x: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %s = tile.alloc : memref<8xbf16, #tile.memory_space<shared>>
  tile.copy %x[%c0] to %s[%c0] [8] : memref<8xf32> to memref<8xbf16, #tile.memory_space<shared>>
  tile.return
}
// CHECK: invalid.mlir:195:3: error: 'tile.copy' op tile.copy keeps the element type: memref<8xf32>, memref<8xbf16, #tile.memory_space<shared>>

// -----

func.func @f() {
  tile.barrier
  func.return
}
// CHECK: invalid.mlir:203:3: error: 'tile.barrier' op tile.barrier must be inside a tile.kernel

// -----

func.func @f(%x: memref<4x8xf32>) {
  %v = tile.view %x : memref<4x8xf32> -> memref<30xf32>
  func.return
}
// CHECK: invalid.mlir:211:3: error: 'tile.view' op tile.view keeps the element type and count: memref<4x8xf32> -> memref<30xf32>

// -----

func.func @f(%a: memref<4x8xf32>, %b: memref<8x3xf32>, %c: memref<4x4xf32>) {
  tile.gemm %a, %b into %c : memref<4x8xf32>, memref<8x3xf32>, memref<4x4xf32>
  func.return
}
// CHECK: invalid.mlir:219:3: error: 'tile.gemm' op out must have shape 4x3, got memref<4x4xf32>

// -----

func.func @f(%a: memref<4x8xf32>, %b: memref<8x3xbf16>, %c: memref<4x3xf32>) {
  tile.gemm %a, %b into %c : memref<4x8xf32>, memref<8x3xbf16>, memref<4x3xf32>
  func.return
}
// CHECK: invalid.mlir:227:3: error: 'tile.gemm' op tile.gemm needs one floating-point element type: memref<4x8xf32>, memref<8x3xbf16>, memref<4x3xf32>

// -----

tile.kernel @k grid 1 (%x: memref<8xf32>) {
  %a = nn.constant 1.0 : tensor<4x8xbf16>
  %b = nn.constant 1.0 : tensor<8x4xbf16>
  %c = nn.constant 0.0 : tensor<4x4xbf16>
  %d = tile.dot %a, %b, %c : tensor<4x8xbf16>, tensor<8x4xbf16>, tensor<4x4xbf16>
  tile.return
}
// CHECK: invalid.mlir:238:3: error: 'tile.dot' op tile.dot accumulates in f32: acc and result must be f32, got tensor<4x4xbf16>

// -----

tile.kernel @k grid 1 (%x: memref<8xf32>) {
  %a = nn.constant 1.0 : tensor<4x8xf32>
  %b = nn.constant 1.0 : tensor<4x8xf32>
  %c = nn.constant 0.0 : tensor<4x8xf32>
  %d = tile.dot %a, %b, %c : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
  tile.return
}
// CHECK: invalid.mlir:249:3: error: 'tile.dot' op tile.dot shapes do not chain: tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>

// -----

tile.kernel @k grid 1 (%x: memref<8xf32>) {
  %a = nn.constant 1.0 : tensor<4x8xf32>
  %r = tile.reduce prod %a axis 1 : tensor<4x8xf32> -> tensor<4xf32>
  tile.return
}
// CHECK: invalid.mlir:258:3: error: 'tile.reduce' op kind must be one of ('sum', 'max', 'min'), got 'prod'

// -----

tile.kernel @k grid 1 (%x: memref<8xf32>) {
  %a = nn.constant 1.0 : tensor<4x8xf32>
  %r = tile.reduce sum %a axis 2 : tensor<4x8xf32> -> tensor<4xf32>
  tile.return
}
// CHECK: invalid.mlir:267:3: error: 'tile.reduce' op axis 2 is out of range for tensor<4x8xf32>

// -----

tile.kernel @k grid 1 (%x: memref<8xf32>) {
  %a = nn.constant 1.0 : tensor<4x8xf32>
  %r = tile.reduce max %a axis 1 : tensor<4x8xf32> -> tensor<8xf32>
  tile.return
}
// CHECK: invalid.mlir:276:3: error: 'tile.reduce' op result must be tensor<4xf32>, got tensor<8xf32>

// -----

tile.kernel @k grid 1 (%x: memref<8xf32>) {
  %a = nn.constant 1.0 : tensor<4xf32>
  %r = tile.broadcast %a dims [0] : tensor<4xf32> -> tensor<8x4xf32>
  tile.return
}
// CHECK: invalid.mlir:285:3: error: 'tile.broadcast' op operand dim 0 (size 4) cannot broadcast to 8

// -----

tile.kernel @k grid 1 (%x: memref<8xf32>) {
  %a = nn.constant 1.0 : tensor<4xf32>
  %r = tile.broadcast %a dims [2] : tensor<4xf32> -> tensor<8x4xf32>
  tile.return
}
// CHECK: invalid.mlir:294:3: error: 'tile.broadcast' op dims [2] must be increasing result dims, one per operand dim of tensor<4xf32>

// -----

tile.kernel @k grid 1 (%x: memref<8xf32>) {
  %a = nn.constant 1.0 : tensor<4x8xf32>
  %r = tile.transpose %a [0, 0] : tensor<4x8xf32> -> tensor<4x4xf32>
  tile.return
}
// CHECK: invalid.mlir:303:3: error: 'tile.transpose' op [0, 0] is not a permutation of 2 dims

// -----

tile.kernel @k grid 1 (%x: memref<8xf32, #tile.memory_space<texture>>) {
  tile.return
}
// CHECK: invalid.mlir:310:61: error: Expected `global`, `shared`, or `registers`.

// -----

tile.kernel @k grid 1 (%x: memref<4x8xf32, strided<[1, 4]>>) {
  tile.return
}
// CHECK: invalid.mlir:[[# @LINE - 3]]:1: error: 'tile.kernel' op kernel parameter 0 must be a contiguous row-major buffer (no layout), got memref<4x8xf32, strided<[1, 4]>>
