// RUN: fuse-opt %s --split-input-file --verify-diagnostics

// Every verifier of the tile dialect: each case's `expected-error` names the message and
// the line it must be reported at.

// expected-error@+1 {{'tile.kernel' op grid rank must be 1, 2 or 3, got 4}}
tile.kernel @k grid 4 (%x: memref<4xf32>) {
  tile.return
}

// -----

// expected-error@+1 {{'tile.kernel' op kernel parameter 0 must be a global buffer, got memref<4xf32, #tile.memory_space<shared>>}}
tile.kernel @k grid 1 (%x: memref<4xf32, #tile.memory_space<shared>>) {
  tile.return
}

// -----

// expected-error@+1 {{'tile.kernel' op kernel parameter 0: a strided view must have a static shape, got memref<?xf32, strided<[2]>>}}
tile.kernel @k grid 1 (%x: memref<?xf32, strided<[2]>>) {
  tile.return
}

// -----

tile.kernel @k grid 1 (%x: memref<?x4xf32>) {
  // expected-error@+1 {{'tile.dim' op dim 2 is out of range for memref<?x4xf32>}}
  %n = tile.dim %x, 2 : memref<?x4xf32>
  tile.return
}

// -----

tile.kernel @k grid 1 (%x: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  // expected-error@+1 {{'tile.alloc' op the allocated buffer must have a static shape, got memref<?xf32, #tile.memory_space<shared>>}}
  %s = tile.alloc(%c0) : memref<?xf32, #tile.memory_space<shared>>
  tile.return
}

// -----

func.func @main(%x: memref<?x4xf32>) {
  %n = tile.dim %x, 0 : memref<?x4xf32>
  // expected-error@+1 {{'tile.alloc' op tile.alloc of memref<?x?xf32> takes 2 sizes (one per dynamic dim), got 1}}
  %t = "tile.alloc"(%n) : (index) -> memref<?x?xf32>
  func.return
}

// -----

tile.kernel @k grid 1 (%x: memref<?x4xf32>) {
  tile.return
}
func.func @main(%x: memref<8x4xf32>) {
  // expected-error@+1 {{'tile.launch' op argument 0 of type memref<8x4xf32> cannot be passed as memref<?x4xf32>: a buffer of dynamic size is passed as its very type}}
  tile.launch @k grid [1] (%x) : memref<8x4xf32>
  func.return
}

// -----

tile.kernel @k grid 1 (%x: memref<4xf32>) {
  tile.return
}
func.func @main(%x: memref<4xf32>, %g: index) {
  // expected-error@+1 {{'tile.launch' op grid sizes [1, -9223372036854775808] need one operand per dynamic entry, got 0}}
  "tile.launch"(%x) <{operandSegmentSizes = array<i32: 0, 1>}> {kernel = @k, grid = array<i64: 1, -9223372036854775808>} : (memref<4xf32>) -> ()
  func.return
}

// -----

tile.kernel @k grid 1 (%x: memref<4xf32>) {
  // expected-error@+1 {{'tile.kernel' op tile.kernel cannot be nested in another kernel}}
  tile.kernel @inner grid 1 () {
    tile.return
  }
  tile.return
}

// -----

func.func @f(%x: memref<4xf32>) {
  // expected-error@+1 {{'tile.launch' op @nope is not a tile.kernel}}
  tile.launch @nope grid [1] (%x) : memref<4xf32>
  func.return
}

// -----

tile.kernel @k grid 1 (%x: memref<4xf32>) {
  tile.return
}
func.func @f(%x: memref<4xf32>) {
  // expected-error@+1 {{'tile.launch' op @k has a grid of rank 1, launched with [1, 2]}}
  tile.launch @k grid [1, 2] (%x) : memref<4xf32>
  func.return
}

// -----

tile.kernel @k grid 1 (%x: memref<4xf32>) {
  tile.return
}
func.func @f(%x: memref<4xf32>) {
  // expected-error@+1 {{'tile.launch' op @k takes 1 buffers, 2 were given}}
  tile.launch @k grid [1] (%x, %x) : memref<4xf32>, memref<4xf32>
  func.return
}

// -----

tile.kernel @k grid 1 (%x: memref<4xf32>) {
  tile.return
}
func.func @f(%x: memref<5xf32>) {
  // expected-error@+1 {{'tile.launch' op argument 0 of type memref<5xf32> cannot be passed as memref<4xf32>}}
  tile.launch @k grid [1] (%x) : memref<5xf32>
  func.return
}

// -----

tile.kernel @k grid 1 (%x: memref<4xf32>) {
  tile.return
}
func.func @f(%x: memref<4xf32>) {
  // expected-error@+1 {{'tile.launch' op grid sizes must be positive, got [0]}}
  tile.launch @k grid [0] (%x) : memref<4xf32>
  func.return
}

// -----

tile.kernel @k grid 1 (%x: memref<4xf32>) {
  // expected-error@+1 {{'tile.launch' op tile.launch is a host op; it cannot appear in a kernel}}
  tile.launch @k grid [1] (%x) : memref<4xf32>
  tile.return
}

// -----

func.func @f() -> index {
  // expected-error@+1 {{'tile.program_id' op tile.program_id must be inside a tile.kernel}}
  %p = tile.program_id 0
  func.return %p : index
}

// -----

tile.kernel @k grid 1 (%x: memref<4xf32>) {
  // expected-error@+1 {{'tile.program_id' op axis 1 is out of range for a grid of rank 1}}
  %p = tile.program_id 1
  tile.return
}

// -----

tile.kernel @k grid 1 (%x: memref<4x8xf32>) {
  %c0 = arith.constant 0 : index
  // expected-error@+1 {{'tile.load' op tile.load takes 2 offsets for memref<4x8xf32>, got 1}}
  %t = tile.load %x[%c0] : memref<4x8xf32> -> tensor<8xf32>
  tile.return
}

// -----

tile.kernel @k grid 1 (%x: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  // expected-error@+1 {{'tile.load' op a tile of rank 2 does not fit memref<8xf32>}}
  %t = tile.load %x[%c0] : memref<8xf32> -> tensor<2x8xf32>
  tile.return
}

// -----

tile.kernel @k grid 1 (%x: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  // expected-error@+1 {{'tile.load' op the tile's element type must be the buffer's: tensor<8xbf16>, memref<8xf32>}}
  %t = tile.load %x[%c0] : memref<8xf32> -> tensor<8xbf16>
  tile.return
}

// -----

tile.kernel @k grid 1 (%x: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  // expected-error@+1 {{'tile.load' op tile dims must be positive, got 0}}
  %t = tile.load %x[%c0] : memref<8xf32> -> tensor<0xf32>
  tile.return
}

// -----

tile.kernel @k grid 1 (%x: memref<8xbf16>) {
  %c0 = arith.constant 0 : index
  %t = nn.constant 1.0 : tensor<8xf32>
  // expected-error@+1 {{'tile.store' op the tile's element type must be the buffer's: tensor<8xf32>, memref<8xbf16>}}
  tile.store %t, %x[%c0] : tensor<8xf32>, memref<8xbf16>
  tile.return
}

// -----

tile.kernel @k grid 1 (%x: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  // expected-error@+1 {{'tile.mask' op tile.mask needs 1 offsets and bounds for tensor<8xi1>}}
  %m = tile.mask [%c0] bounds [8, 8] : tensor<8xi1>
  tile.return
}

// -----

tile.kernel @k grid 1 (%x: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  // expected-error@+1 {{'tile.mask' op tile.mask produces an i1 tile, got tensor<8xf32>}}
  %m = tile.mask [%c0] bounds [8] : tensor<8xf32>
  tile.return
}

// -----

func.func @f() {
  // expected-error@+1 {{'tile.alloc' op tile.alloc on the host allocates global memory, got memref<8xf32, #tile.memory_space<shared>>}}
  %s = tile.alloc : memref<8xf32, #tile.memory_space<shared>>
  func.return
}

// -----

tile.kernel @k grid 1 (%x: memref<8xf32>) {
  // expected-error@+1 {{'tile.alloc' op tile.alloc in a kernel allocates shared memory, got memref<8xf32>}}
  %s = tile.alloc : memref<8xf32>
  tile.return
}

// -----

tile.kernel @k grid 1 (%x: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %s = tile.alloc : memref<8xbf16, #tile.memory_space<shared>>
  // expected-error@+1 {{'tile.copy' op tile.copy keeps the element type: memref<8xf32>, memref<8xbf16, #tile.memory_space<shared>>}}
  tile.copy %x[%c0] to %s[%c0] [8] : memref<8xf32> to memref<8xbf16, #tile.memory_space<shared>>
  tile.return
}

// -----

func.func @f() {
  // expected-error@+1 {{'tile.barrier' op tile.barrier must be inside a tile.kernel}}
  tile.barrier
  func.return
}

// -----

func.func @f(%x: memref<4x8xf32>) {
  // expected-error@+1 {{'tile.view' op tile.view keeps the element count: memref<4x8xf32> -> memref<30xf32>}}
  %v = tile.view %x : memref<4x8xf32> -> memref<30xf32>
  func.return
}

// -----

func.func @f(%x: memref<4x8xf32>) {
  // expected-error@+1 {{'tile.view' op tile.view at offset 9 reads past its source: memref<4x8xf32> -> memref<3x8xf32>}}
  %v = tile.view %x {offset = 9 : i64} : memref<4x8xf32> -> memref<3x8xf32>
  func.return
}

// -----

func.func @f(%x: memref<4x8xf32>) {
  // expected-error@+1 {{'tile.view' op tile.view keeps the element type: memref<4x8xf32> -> memref<32xf16>}}
  %v = tile.view %x : memref<4x8xf32> -> memref<32xf16>
  func.return
}

// -----

func.func @f(%a: memref<4x8xf32>, %b: memref<8x3xf32>, %c: memref<4x4xf32>) {
  // expected-error@+1 {{'tile.gemm' op out must have shape 4x3, got memref<4x4xf32>}}
  tile.gemm %a, %b into %c : memref<4x8xf32>, memref<8x3xf32>, memref<4x4xf32>
  func.return
}

// -----

func.func @f(%a: memref<4x8xf32>, %b: memref<8x3xf32>, %c: memref<4x3xf32>, %v: memref<4xf32>) {
  // expected-error@+1 {{'tile.gemm' op bias must be a vector of out's last dim and type, f32 x3, got memref<4xf32>}}
  tile.gemm %a, %b into %c bias %v : memref<4x8xf32>, memref<8x3xf32>, memref<4x3xf32>, memref<4xf32>
  func.return
}

// -----

func.func @f(%a: memref<8x4xf32>, %b: memref<8x3xf32>, %c: memref<4x3xf32>, %v: memref<3xf32>) {
  // expected-error@+1 {{'tile.gemm' op a bias needs a rank-2 rhs and no transpose_a (torch.addmm)}}
  tile.gemm %a, %b into %c bias %v transpose_a : memref<8x4xf32>, memref<8x3xf32>, memref<4x3xf32>, memref<3xf32>
  func.return
}

// -----

func.func @f(%a: memref<4x8xf32>, %b: memref<8x3xbf16>, %c: memref<4x3xf32>) {
  // expected-error@+1 {{'tile.gemm' op tile.gemm needs one floating-point element type: memref<4x8xf32>, memref<8x3xbf16>, memref<4x3xf32>}}
  tile.gemm %a, %b into %c : memref<4x8xf32>, memref<8x3xbf16>, memref<4x3xf32>
  func.return
}

// -----

tile.kernel @k grid 1 (%x: memref<8xf32>) {
  %a = nn.constant 1.0 : tensor<4x8xbf16>
  %b = nn.constant 1.0 : tensor<8x4xbf16>
  %c = nn.constant 0.0 : tensor<4x4xbf16>
  // expected-error@+1 {{'tile.dot' op tile.dot accumulates in f32: acc and result must be f32, got tensor<4x4xbf16>}}
  %d = tile.dot %a, %b, %c : tensor<4x8xbf16>, tensor<8x4xbf16>, tensor<4x4xbf16>
  tile.return
}

// -----

tile.kernel @k grid 1 (%x: memref<8xf32>) {
  %a = nn.constant 1.0 : tensor<4x8xf32>
  %b = nn.constant 1.0 : tensor<4x8xf32>
  %c = nn.constant 0.0 : tensor<4x8xf32>
  // expected-error@+1 {{'tile.dot' op tile.dot shapes do not chain: tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>}}
  %d = tile.dot %a, %b, %c : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
  tile.return
}

// -----

tile.kernel @k grid 1 (%x: memref<8xf32>) {
  %a = nn.constant 1.0 : tensor<4x8xf32>
  // expected-error@+1 {{'tile.reduce' op kind must be one of ('sum', 'max', 'min'), got 'prod'}}
  %r = tile.reduce prod %a axis 1 : tensor<4x8xf32> -> tensor<4xf32>
  tile.return
}

// -----

tile.kernel @k grid 1 (%x: memref<8xf32>) {
  %a = nn.constant 1.0 : tensor<4x8xf32>
  // expected-error@+1 {{'tile.reduce' op axis 2 is out of range for tensor<4x8xf32>}}
  %r = tile.reduce sum %a axis 2 : tensor<4x8xf32> -> tensor<4xf32>
  tile.return
}

// -----

tile.kernel @k grid 1 (%x: memref<8xf32>) {
  %a = nn.constant 1.0 : tensor<4x8xf32>
  // expected-error@+1 {{'tile.reduce' op result must be tensor<4xf32>, got tensor<8xf32>}}
  %r = tile.reduce max %a axis 1 : tensor<4x8xf32> -> tensor<8xf32>
  tile.return
}

// -----

tile.kernel @k grid 1 (%x: memref<8xf32>) {
  %a = nn.constant 1.0 : tensor<4xf32>
  // expected-error@+1 {{'tile.broadcast' op operand dim 0 (size 4) cannot broadcast to 8}}
  %r = tile.broadcast %a dims [0] : tensor<4xf32> -> tensor<8x4xf32>
  tile.return
}

// -----

tile.kernel @k grid 1 (%x: memref<8xf32>) {
  %a = nn.constant 1.0 : tensor<4xf32>
  // expected-error@+1 {{'tile.broadcast' op dims [2] must be increasing result dims, one per operand dim of tensor<4xf32>}}
  %r = tile.broadcast %a dims [2] : tensor<4xf32> -> tensor<8x4xf32>
  tile.return
}

// -----

tile.kernel @k grid 1 (%x: memref<8xf32>) {
  %a = nn.constant 1.0 : tensor<4x8xf32>
  // expected-error@+1 {{'tile.transpose' op [0, 0] is not a permutation of 2 dims}}
  %r = tile.transpose %a [0, 0] : tensor<4x8xf32> -> tensor<4x4xf32>
  tile.return
}

// -----

// expected-error@+1 {{Expected `global`, `shared`, or `registers`.}}
tile.kernel @k grid 1 (%x: memref<8xf32, #tile.memory_space<texture>>) {
  tile.return
}

// -----

// A kernel parameter may be a strided view, but only with static, non-negative strides
// and offset.
// expected-error@+1 {{'tile.kernel' op a strided view needs one static, non-negative stride per dim and a static, non-negative offset, got memref<4x8xf32, strided<[-1, 4]>>}}
tile.kernel @k grid 1 (%x: memref<4x8xf32, strided<[-1, 4]>>) {
  tile.return
}

// -----

// expected-error@+1 {{'tile.kernel' op a strided view needs one static, non-negative stride per dim and a static, non-negative offset, got memref<4x8xf32, strided<[8, 1], offset: ?>>}}
tile.kernel @k grid 1 (%x: memref<4x8xf32, strided<[8, 1], offset: ?>>) {
  tile.return
}

// -----

// Host buffers are contiguous: a temporary cannot be a strided view.
func.func @f() {
  // expected-error@+1 {{'tile.alloc' op the allocated buffer must be a contiguous row-major buffer (no layout), got memref<4x8xf32, strided<[1, 4]>>}}
  %t = tile.alloc : memref<4x8xf32, strided<[1, 4]>>
  func.return
}

// -----

// A strided parameter must stay inside the buffer passed for it: the view's last
// element is 272 + 61 * 256 + 223 = 16111, past the 62 x 256 buffer.
tile.kernel @k grid 1 (%x: memref<62x224xf32, strided<[256, 1], offset: 272>>) {
  tile.return
}
func.func @f(%x: memref<62x256xf32>) {
  // expected-error@+1 {{'tile.launch' op argument 0 of type memref<62x256xf32> cannot be passed as memref<62x224xf32, strided<[256, 1], offset: 272>>}}
  tile.launch @k grid [1] (%x) : memref<62x256xf32>
  func.return
}

// -----

// A load's fill must be a value of the tile's element type: integers for integer tiles.

tile.kernel @k grid 1 (%x: memref<3xi64>) {
  %c0 = arith.constant 0 : index
  // expected-error@+1 {{fill for i64 tiles must be an integer, got -inf}}
  %t = tile.load %x[%c0] fill -inf : memref<3xi64> -> tensor<4xi64>
  tile.return
}

// -----

tile.kernel @k grid 1 (%x: memref<8xi32>) {
  %c0 = arith.constant 0 : index
  // expected-error@+1 {{fill for i32 tiles must be an integer, got 1.5}}
  %t = tile.load %x[%c0] fill 1.5 : memref<8xi32> -> tensor<8xi32>
  tile.return
}

// -----

tile.kernel @k grid 1 (%x: memref<8xi1>) {
  %c0 = arith.constant 0 : index
  // expected-error@+1 {{fill 2 is out of range for i1 ([0, 1])}}
  %t = tile.load %x[%c0] fill 2 : memref<8xi1> -> tensor<8xi1>
  tile.return
}

// -----

"tile.kernel"() ({
^bb0(%x: memref<8xf32>):
  %c0 = "arith.constant"() {value = 0 : index} : () -> index
  // expected-error@+1 {{'tile.load' op fill for f32 tiles must be an f64 float, got 1 : i32}}
  %t = "tile.load"(%x, %c0) {fill = 1 : i32} : (memref<8xf32>, index) -> tensor<8xf32>
  "tile.return"() : () -> ()
}) {sym_name = "k", grid = 1 : i64} : () -> ()

// -----

"tile.kernel"() ({
^bb0(%x: memref<8xi64>):
  %c0 = "arith.constant"() {value = 0 : index} : () -> index
  // expected-error@+1 {{'tile.load' op fill for i64 tiles must be an i64 integer, got 1.000000e+00 : f64}}
  %t = "tile.load"(%x, %c0) {fill = 1.0 : f64} : (memref<8xi64>, index) -> tensor<8xi64>
  "tile.return"() : () -> ()
}) {sym_name = "k", grid = 1 : i64} : () -> ()

// -----

// An attribute xDSL itself rejects while parsing (300 does not fit i8) is reported at
// the attribute, quoted.
"tile.kernel"() ({
^bb0(%x: memref<8xi8>):
  %c0 = "arith.constant"() {value = 0 : index} : () -> index
  // expected-error-re@+1 {{Integer value 300 is out of range for type i8 {{.*}} (in '300 : i8')}}
  %t = "tile.load"(%x, %c0) {fill = 300 : i8} : (memref<8xi8>, index) -> tensor<8xi8>
  "tile.return"() : () -> ()
}) {sym_name = "k", grid = 1 : i64} : () -> ()

// -----

// Kernel-only ops on the host.

func.func @f(%x: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  // expected-error@+1 {{'tile.load' op tile.load must be inside a tile.kernel}}
  %t = tile.load %x[%c0] : memref<8xf32> -> tensor<8xf32>
  func.return
}

// -----

func.func @f(%x: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %t = nn.constant 1.0 : tensor<8xf32>
  // expected-error@+1 {{'tile.store' op tile.store must be inside a tile.kernel}}
  tile.store %t, %x[%c0] : tensor<8xf32>, memref<8xf32>
  func.return
}

// -----

func.func @f() {
  %c0 = arith.constant 0 : index
  // expected-error@+1 {{'tile.mask' op tile.mask must be inside a tile.kernel}}
  %m = tile.mask [%c0] bounds [8] : tensor<8xi1>
  func.return
}

// -----

func.func @f(%x: memref<8xf32>, %y: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  // expected-error@+1 {{'tile.copy' op tile.copy must be inside a tile.kernel}}
  tile.copy %x[%c0] to %y[%c0] [8] : memref<8xf32> to memref<8xf32>
  func.return
}

// -----

func.func @f() {
  %a = nn.constant 1.0 : tensor<4x8xf32>
  %b = nn.constant 1.0 : tensor<8x4xf32>
  %c = nn.constant 0.0 : tensor<4x4xf32>
  // expected-error@+1 {{'tile.dot' op tile.dot must be inside a tile.kernel}}
  %d = tile.dot %a, %b, %c : tensor<4x8xf32>, tensor<8x4xf32>, tensor<4x4xf32>
  func.return
}

// -----

func.func @f() {
  %a = nn.constant 1.0 : tensor<4x8xf32>
  // expected-error@+1 {{'tile.reduce' op tile.reduce must be inside a tile.kernel}}
  %r = tile.reduce sum %a axis 1 : tensor<4x8xf32> -> tensor<4xf32>
  func.return
}

// -----

func.func @f() {
  %a = nn.constant 1.0 : tensor<4xf32>
  // expected-error@+1 {{'tile.broadcast' op tile.broadcast must be inside a tile.kernel}}
  %r = tile.broadcast %a dims [1] : tensor<4xf32> -> tensor<2x4xf32>
  func.return
}

// -----

func.func @f() {
  %a = nn.constant 1.0 : tensor<4x8xf32>
  // expected-error@+1 {{'tile.transpose' op tile.transpose must be inside a tile.kernel}}
  %r = tile.transpose %a [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
  func.return
}

// -----

// tile.copy moves a box from global to shared memory.

tile.kernel @k grid 1 (%x: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %s = tile.alloc : memref<8xf32, #tile.memory_space<shared>>
  // expected-error@+1 {{'tile.copy' op tile.copy reads a global buffer, got memref<8xf32, #tile.memory_space<shared>>}}
  tile.copy %s[%c0] to %x[%c0] [8] : memref<8xf32, #tile.memory_space<shared>> to memref<8xf32>
  tile.return
}

// -----

tile.kernel @k grid 1 (%x: memref<8xf32>, %y: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  // expected-error@+1 {{'tile.copy' op tile.copy writes a shared buffer, got memref<8xf32>}}
  tile.copy %x[%c0] to %y[%c0] [8] : memref<8xf32> to memref<8xf32>
  tile.return
}

// -----

// Only elementwise nn ops and splat constants work on tiles, except in whole_tensor kernels.

// expected-error-re@+1 {{'tile.kernel' op nn.matmul (at {{[0-9]+}}:3) cannot be in a kernel with schedule "pointwise": tiles take only elementwise nn ops and splat nn.constant (other nn ops need schedule "whole_tensor")}}
tile.kernel @k grid 1 (%x: memref<8x8xf32>) attributes {schedule = "pointwise"} {
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%c0, %c0] : memref<8x8xf32> -> tensor<8x8xf32>
  %m = nn.matmul %t, %t : tensor<8x8xf32>, tensor<8x8xf32> -> tensor<8x8xf32>
  tile.store %m, %x[%c0, %c0] : tensor<8x8xf32>, memref<8x8xf32>
  tile.return
}

// -----

// expected-error-re@+1 {{'tile.kernel' op nn.softmax (at {{[0-9]+}}:5) cannot be in a kernel with no schedule}}
tile.kernel @k grid 1 (%x: memref<8x8xf32>) {
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%c0, %c0] : memref<8x8xf32> -> tensor<8x8xf32>
  scf.for %i = %c0 to %c0 step %c0 {
    %s = nn.softmax %t axis 1 : tensor<8x8xf32>
  }
  tile.return
}

// -----

// Integer attributes of tile ops are i64.

"tile.kernel"() ({
^bb0(%x: memref<8xf32>):
  "tile.return"() : () -> ()
}) {sym_name = "k", grid = 1 : i64} : () -> ()
func.func @f(%x: memref<8xf32>) {
  // expected-error@+1 {{'tile.launch' op grid must be an array<i64: ...>, got array<f32: 1.500000e+00>}}
  "tile.launch"(%x) <{operandSegmentSizes = array<i32: 0, 1>}> {kernel = @k, grid = array<f32: 1.5>} : (memref<8xf32>) -> ()
  func.return
}

// -----

"tile.kernel"() ({
^bb0(%x: memref<8xf32>):
  %a = "nn.constant"() {value = 1.0 : f64} : () -> tensor<4x8xf32>
  // expected-error@+1 {{'tile.reduce' op axis must be an i64 integer, got 1 : i32}}
  %r = "tile.reduce"(%a) {kind = "sum", axis = 1 : i32} : (tensor<4x8xf32>) -> tensor<4xf32>
  "tile.return"() : () -> ()
}) {sym_name = "k", grid = 1 : i64} : () -> ()

// -----

"tile.kernel"() ({
^bb0(%x: memref<8xf32>):
  %a = "nn.constant"() {value = 1.0 : f64} : () -> tensor<4xf32>
  // expected-error@+1 {{'tile.broadcast' op dims must be an array<i64: ...>, got array<i32: 1>}}
  %b = "tile.broadcast"(%a) {dims = array<i32: 1>} : (tensor<4xf32>) -> tensor<2x4xf32>
  "tile.return"() : () -> ()
}) {sym_name = "k", grid = 1 : i64} : () -> ()

// -----

// expected-error@+1 {{'tile.kernel' op grid must be an i64 integer, got 1 : i32}}
"tile.kernel"() ({
^bb0(%x: memref<8xf32>):
  "tile.return"() : () -> ()
}) {sym_name = "k", grid = 1 : i32} : () -> ()

// -----

// Registers hold tiles, not buffers; `operand_staging` names a MemorySpace.

// expected-error@+1 {{'tile.kernel' op kernel parameter 0 cannot live in registers: registers hold tiles (tensors), not buffers; got memref<8xf32, #tile.memory_space<registers>>}}
tile.kernel @k grid 1 (%x: memref<8xf32, #tile.memory_space<registers>>) {
  tile.return
}

// -----

tile.kernel @k grid 1 (%x: memref<8xf32>) {
  // expected-error@+1 {{'tile.alloc' op the allocated buffer cannot live in registers: registers hold tiles (tensors), not buffers; got memref<8xf32, #tile.memory_space<registers>>}}
  %s = tile.alloc : memref<8xf32, #tile.memory_space<registers>>
  tile.return
}

// -----

// expected-error@+1 {{'tile.kernel' op operand_staging must be "shared" or "registers", got "global"}}
tile.kernel @k grid 1 (%x: memref<8xf32>) attributes {operand_staging = "global"} {
  tile.return
}

// -----

// Custom-syntax errors point at the op, not at the next line.

tile.kernel @k grid 1 (%x: memref<8xf32>) {
  %a = nn.constant 1.0 : tensor<4x8xf32>
  // expected-error@+1 {{Expected ','}}
  %d = tile.dot %a, %a : tensor<4x8xf32>, tensor<4x8xf32>
  tile.return
}

// -----

tile.kernel @k grid 1 (%x: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %a = nn.constant 1.0 : tensor<8xf32>
  // expected-error@+1 {{2 operands but 1 types}}
  tile.store %a, %x[%c0] : tensor<8xf32>
  tile.return
}

// -----

tile.kernel @k grid 1 (%x: memref<8xf32>) {
  // expected-error@+1 {{integer 99999999999999999999999 does not fit i64}}
  %p = tile.program_id 99999999999999999999999
  tile.return
}

// -----

// Verifier errors with no other test.

// expected-error@+1 {{'tile.kernel' op tile.kernel body must end in tile.return}}
tile.kernel @k grid 1 (%x: memref<8xf32>) {
  %c0 = arith.constant 0 : index
}

// -----

func.func @f(%x: memref<8xf32>) {
  // expected-error@+1 {{'tile.view' op tile.view keeps the memory space: memref<8xf32> -> memref<8xf32, #tile.memory_space<shared>>}}
  %v = tile.view %x : memref<8xf32> -> memref<8xf32, #tile.memory_space<shared>>
  func.return
}

// -----

tile.kernel @k grid 1 (%a: memref<4x8xf32>, %b: memref<8x4xf32>, %c: memref<4x4xf32>) {
  // expected-error@+1 {{'tile.gemm' op tile.gemm is a host op; it cannot appear in a kernel}}
  tile.gemm %a, %b into %c : memref<4x8xf32>, memref<8x4xf32>, memref<4x4xf32>
  tile.return
}

// -----

tile.kernel @k grid 1 (%x: memref<8xf32>) {
  %a = nn.constant 1 : tensor<4x8xi64>
  %b = nn.constant 1 : tensor<8x4xi64>
  %c = nn.constant 0.0 : tensor<4x4xf32>
  // expected-error@+1 {{'tile.dot' op tile.dot needs floating-point tiles of one type: tensor<4x8xi64>, tensor<8x4xi64>}}
  %d = tile.dot %a, %b, %c : tensor<4x8xi64>, tensor<8x4xi64>, tensor<4x4xf32>
  tile.return
}

// -----

tile.kernel @k grid 1 (%x: memref<8xf32>) {
  %a = nn.constant 1.0 : tensor<8xf32>
  // expected-error@+1 {{'tile.dot' op tile.dot operands need one rank >= 2 and batch dims: tensor<8xf32>, tensor<8xf32>, tensor<8xf32>}}
  %d = tile.dot %a, %a, %a : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
  tile.return
}

// -----

tile.kernel @k grid 1 (%x: memref<8xf32>) {
  %a = nn.constant 1.0 : tensor<4xf32>
  // expected-error@+1 {{'tile.broadcast' op tile.broadcast keeps the element type: tensor<4xf32> -> tensor<2x4xbf16>}}
  %r = tile.broadcast %a dims [1] : tensor<4xf32> -> tensor<2x4xbf16>
  tile.return
}

// -----

tile.kernel @k grid 1 (%x: memref<8xf32>) {
  %i = arith.constant 0 : i64
  // expected-error@+1 {{'tile.load' op offsets must be of type index, got i64}}
  %t = "tile.load"(%x, %i) : (memref<8xf32>, i64) -> tensor<8xf32>
  tile.return
}

// -----

tile.kernel @k grid 1 (%x: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %s = tile.alloc : memref<8xf32, #tile.memory_space<shared>>
  // expected-error@+1 {{'tile.copy' op tile.copy dest takes 1 offsets for memref<8xf32, #tile.memory_space<shared>>, got 2}}
  tile.copy %x[%c0] to %s[%c0, %c0] [8] : memref<8xf32> to memref<8xf32, #tile.memory_space<shared>>
  tile.return
}

// -----

tile.kernel @k grid 1 (%x: memref<8xf32>) {
  tile.return
}
// expected-error@+1 {{'builtin.module' op Redefinition of symbol "k"}}
tile.kernel @k grid 1 (%x: memref<8xf32>) {
  tile.return
}

// -----

// expected-error@+1 {{'tile.kernel' op num_warps must be a power of two from 1 to 32, got 99999999}}
tile.kernel @k grid 1 (%x: memref<8xf32>) attributes {num_warps = 99999999 : i64} {
  tile.return
}

// -----

// expected-error@+1 {{'tile.kernel' op num_warps must be a power of two from 1 to 32, got 64}}
tile.kernel @k grid 1 (%x: memref<8xf32>) attributes {num_warps = 64 : i64} {
  tile.return
}

// -----

// expected-error@+1 {{'tile.kernel' op num_stages must be an integer from 1 to 8, got -3}}
tile.kernel @k grid 1 (%x: memref<8xf32>) attributes {num_stages = -3 : i64} {
  tile.return
}

// -----

// expected-error@+1 {{'tile.kernel' op "3" should be of base attribute integer}}
tile.kernel @k grid 1 (%x: memref<8xf32>) attributes {num_stages = "3"} {
  tile.return
}

// -----

// expected-error@+1 {{'tile.kernel' op vector_width must be a power of two from 1 to 16, got 3}}
tile.kernel @k grid 1 (%x: memref<8xf32>) attributes {vector_width = 3 : i64} {
  tile.return
}

// -----

// A schedule is one of the tiler's: any other text (here an injection attempt, which the
// printers would otherwise have to sanitize) is rejected.
// expected-error@+1 {{'tile.kernel' op schedule must be one of "pointwise", "row_reduction", "row_reduction_looped", "matmul", "whole_tensor", "attention", "scan", got "pointwise\0A#include <stdlib.h>"}}
tile.kernel @k grid 1 (%x: memref<8xf32>) attributes {schedule = "pointwise\n#include <stdlib.h>"} {
  tile.return
}

// -----

// expected-error@+1 {{'tile.kernel' op block_sizes has 1 entries for 2 iteration dims}}
tile.kernel @k grid 1 (%x: memref<8xf32>) attributes {iteration_sizes = array<i64: 8, 4>, block_sizes = array<i64: 8>} {
  tile.return
}

// -----

// expected-error@+1 {{'tile.kernel' op reduce_dim is out of range: 1}}
tile.kernel @k grid 1 (%x: memref<8xf32>) attributes {iteration_sizes = array<i64: 8>, reduce_dim = 1 : i64} {
  tile.return
}

// -----

// expected-error@+1 {{'tile.kernel' op row_cache must list distinct parameter indices below 1, got [1 : i64]}}
tile.kernel @k grid 1 (%x: memref<8xf32>) attributes {row_cache = [1 : i64]} {
  tile.return
}

// -----

// expected-error@+1 {{'tile.kernel' op candidates must be dictionaries of integers, got "big"}}
tile.kernel @k grid 1 (%x: memref<8xf32>) attributes {candidates = [{block = 8 : i64}, "big"]} {
  tile.return
}

// -----

tile.kernel @k grid 1 (%x: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  // expected-error@+1 {{'tile.iota' op tile.iota makes a tile of at most one dim, got tensor<2x8xi64>}}
  %i = tile.iota %c0 start 0 step 1 : tensor<2x8xi64>
  tile.return
}

// -----

tile.kernel @k grid 1 (%x: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  // expected-error@+1 {{'tile.iota' op tile.iota makes numbers, not tensor<8xi1>}}
  %i = tile.iota %c0 start 0 step 1 : tensor<8xi1>
  tile.return
}

// -----

func.func @f() {
  %c0 = arith.constant 0 : index
  // expected-error@+1 {{'tile.iota' op tile.iota must be inside a tile.kernel}}
  %i = tile.iota %c0 start 0 step 1 : tensor<8xi64>
  func.return
}

// -----

tile.kernel @k grid 1 (%x: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %i = tile.iota %c0 start 0 step 1 : tensor<8xf32>
  // expected-error@+1 {{'tile.gather' op the index must be a tile of i64, got tensor<8xf32>}}
  %g = tile.gather %x[%i] : memref<8xf32>, tensor<8xf32> -> tensor<8xf32>
  tile.return
}

// -----

tile.kernel @k grid 1 (%x: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %i = tile.iota %c0 start 0 step 1 : tensor<8xi64>
  // expected-error@+1 {{'tile.gather' op the result must have the index's shape and the buffer's element type: tensor<8xbf16>, tensor<8xi64>, memref<8xf32>}}
  %g = tile.gather %x[%i] : memref<8xf32>, tensor<8xi64> -> tensor<8xbf16>
  tile.return
}

// -----

func.func @f(%x: memref<8xf32>, %i: tensor<8xi64>) {
  // expected-error@+1 {{'tile.gather' op tile.gather must be inside a tile.kernel}}
  %g = tile.gather %x[%i] : memref<8xf32>, tensor<8xi64> -> tensor<8xf32>
  func.return
}

// -----

func.func @main(%x: memref<?x4x8xf32>) {
  // expected-error@+1 {{'tile.view' op a view of dynamic size has no offset, and views a buffer of dynamic size as a shape with one dynamic dim: memref<?x4x8xf32> -> memref<?x?xf32>}}
  %v = tile.view %x : memref<?x4x8xf32> -> memref<?x?xf32>
  func.return
}

// -----

func.func @main(%x: memref<?x4x8xf32>) {
  // expected-error@+1 {{'tile.view' op tile.view keeps the element count: memref<?x4x8xf32> -> memref<?x0xf32>}}
  %v = tile.view %x : memref<?x4x8xf32> -> memref<?x0xf32>
  func.return
}

// -----

func.func @main(%x2: memref<4x?xf32>, %w: memref<8x4xf32>, %y: memref<4x4xf32>) {
  // expected-error@+1 {{'tile.gemm' op tile.gemm needs a static contraction dim, got memref<4x?xf32>}}
  tile.gemm %x2, %w into %y : memref<4x?xf32>, memref<8x4xf32>, memref<4x4xf32>
  func.return
}

// -----

// expected-error@+1 {{'tile.kernel' op size_multiples needs one positive number per dynamic dim of the parameters (1), got [4, 4]}}
tile.kernel @k grid 1 (%x: memref<?xf32>) attributes {size_multiples = array<i64: 4, 4>} {
  tile.return
}
