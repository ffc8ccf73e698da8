// RUN: fuse-opt %s | fuse-opt | filecheck %s
// RUN: fuse-opt %s --print-op-generic | fuse-opt | filecheck %s
// RUN: fuse-opt %s --print-op-generic | filecheck %s --check-prefix=GENERIC

// Every tile op in its custom syntax; the custom and the generic form both round-trip.

// CHECK-LABEL: tile.kernel @pointwise grid 1
// CHECK-SAME:  (%[[X:.*]]: memref<100xf32>, %[[Y:.*]]: memref<100xbf16>)
// CHECK-SAME:  attributes {schedule = "pointwise", block_sizes = array<i64: 64>, num_warps = 2 : i64}
// GENERIC:     "tile.kernel"() ({
// GENERIC-NEXT: ^{{.*}}(%{{.*}}: memref<100xf32>, %{{.*}}: memref<100xbf16>):
tile.kernel @pointwise grid 1 (%x: memref<100xf32>, %y: memref<100xbf16>) attributes {schedule = "pointwise", block_sizes = array<i64: 64>, num_warps = 2 : i64} {
  // CHECK-NEXT: %[[P:.*]] = tile.program_id 0
  // GENERIC: "tile.program_id"() {axis = 0 : i64} : () -> index
  %p = tile.program_id 0
  %c64 = arith.constant 64 : index
  %o = arith.muli %p, %c64 : index
  // CHECK: %[[T:.*]] = tile.load %[[X]][%{{.*}}] : memref<100xf32> -> tensor<64xf32>
  // GENERIC: "tile.load"(%{{.*}}, %{{.*}}) : (memref<100xf32>, index) -> tensor<64xf32>
  %t = tile.load %x[%o] : memref<100xf32> -> tensor<64xf32>
  // elementwise math on tiles is nn ops on tile tensors
  // CHECK-NEXT: %[[E:.*]] = nn.exp %[[T]] : tensor<64xf32>
  %e = nn.exp %t : tensor<64xf32>
  // CHECK-NEXT: %[[C:.*]] = nn.cast %[[E]] : tensor<64xf32> -> tensor<64xbf16>
  %c = nn.cast %e : tensor<64xf32> -> tensor<64xbf16>
  // CHECK-NEXT: tile.store %[[C]], %[[Y]][%{{.*}}] : tensor<64xbf16>, memref<100xbf16>
  // GENERIC: "tile.store"(%{{.*}}, %{{.*}}, %{{.*}}) : (tensor<64xbf16>, memref<100xbf16>, index) -> ()
  tile.store %c, %y[%o] : tensor<64xbf16>, memref<100xbf16>
  // CHECK-NEXT: tile.return
  // GENERIC: "tile.return"() : () -> ()
  // GENERIC: }) {sym_name = "pointwise", grid = 1 : i64, schedule = "pointwise", block_sizes = array<i64: 64>, num_warps = 2 : i64} : () -> ()
  tile.return
}

// CHECK-LABEL: tile.kernel @row_reduction grid 2
tile.kernel @row_reduction grid 2 (%x: memref<6x100xf32>, %y: memref<6xf32>) {
  %r = tile.program_id 0
  // CHECK: tile.program_id 1
  %q = tile.program_id 1
  %c0 = arith.constant 0 : index
  // CHECK: tile.load %{{.*}}[%{{.*}}, %{{.*}}] fill -inf : memref<6x100xf32> -> tensor<2x128xf32>
  // GENERIC: "tile.load"(%{{.*}}, %{{.*}}, %{{.*}}) {fill = 0xfff0000000000000 : f64} : (memref<6x100xf32>, index, index) -> tensor<2x128xf32>
  %t = tile.load %x[%r, %c0] fill -inf : memref<6x100xf32> -> tensor<2x128xf32>
  // CHECK-NEXT: tile.load %{{.*}}[%{{.*}}, %{{.*}}] fill -1.500000e+00 : memref<6x100xf32> -> tensor<128xf32>
  %u = tile.load %x[%r, %c0] fill -1.5 : memref<6x100xf32> -> tensor<128xf32>
  // CHECK-NEXT: %[[M:.*]] = tile.mask [%{{.*}}, %{{.*}}] bounds [6, 100] : tensor<2x128xi1>
  // GENERIC: "tile.mask"(%{{.*}}, %{{.*}}) <{operandSegmentSizes = array<i32: 2, 0>}> {bounds = array<i64: 6, 100>} : (index, index) -> tensor<2x128xi1>
  %m = tile.mask [%r, %c0] bounds [6, 100] : tensor<2x128xi1>
  // CHECK-NEXT: tile.iota %{{.*}} start 10 step -3 : tensor<128xi64>
  // GENERIC: "tile.iota"(%{{.*}}) {start = 10 : i64, step = -3 : i64} : (index) -> tensor<128xi64>
  %iota = tile.iota %c0 start 10 step -3 : tensor<128xi64>
  // CHECK-NEXT: tile.iota %{{.*}} start 0 step 1 : tensor<f32>
  %row = tile.iota %r start 0 step 1 : tensor<f32>
  // a load by address: the flat positions a tile of i64 holds
  // CHECK-NEXT: tile.gather %{{.*}}[%{{.*}}] : memref<6x100xf32>, tensor<128xi64> -> tensor<128xf32>
  // GENERIC: "tile.gather"(%{{.*}}, %{{.*}}) : (memref<6x100xf32>, tensor<128xi64>) -> tensor<128xf32>
  %g = tile.gather %x[%iota] : memref<6x100xf32>, tensor<128xi64> -> tensor<128xf32>
  %z = nn.constant 0.0 : tensor<2x128xf32>
  // CHECK: nn.select %[[M]], %{{.*}}, %{{.*}} : tensor<2x128xf32>
  %s = nn.select %m, %t, %z : tensor<2x128xf32>
  // CHECK-NEXT: %[[S:.*]] = tile.reduce sum %{{.*}} axis 1 : tensor<2x128xf32> -> tensor<2xf32>
  // GENERIC: "tile.reduce"(%{{.*}}) {kind = "sum", axis = 1 : i64} : (tensor<2x128xf32>) -> tensor<2xf32>
  %sum = tile.reduce sum %s axis 1 : tensor<2x128xf32> -> tensor<2xf32>
  // CHECK-NEXT: tile.reduce max %{{.*}} axis 0 : tensor<2x128xf32> -> tensor<128xf32>
  %mx = tile.reduce max %t axis 0 : tensor<2x128xf32> -> tensor<128xf32>
  // CHECK-NEXT: tile.reduce min %{{.*}} axis 0 : tensor<128xf32> -> tensor<f32>
  %mn = tile.reduce min %u axis 0 : tensor<128xf32> -> tensor<f32>
  // CHECK-NEXT: tile.broadcast %[[S]] dims [0] : tensor<2xf32> -> tensor<2x128xf32>
  // GENERIC: "tile.broadcast"(%{{.*}}) {dims = array<i64: 0>} : (tensor<2xf32>) -> tensor<2x128xf32>
  %b = tile.broadcast %sum dims [0] : tensor<2xf32> -> tensor<2x128xf32>
  // CHECK-NEXT: tile.broadcast %{{.*}} dims [] : tensor<f32> -> tensor<2x128xf32>
  %b0 = tile.broadcast %mn dims [] : tensor<f32> -> tensor<2x128xf32>
  // CHECK-NEXT: tile.transpose %{{.*}} [1, 0] : tensor<2x128xf32> -> tensor<128x2xf32>
  // GENERIC: "tile.transpose"(%{{.*}}) {permutation = array<i64: 1, 0>} : (tensor<2x128xf32>) -> tensor<128x2xf32>
  %tr = tile.transpose %b [1, 0] : tensor<2x128xf32> -> tensor<128x2xf32>
  tile.store %sum, %y[%r] : tensor<2xf32>, memref<6xf32>
  tile.return
}

// CHECK-LABEL: tile.kernel @looped_with_row_cache grid 1
tile.kernel @looped_with_row_cache grid 1 (%x: memref<6x500xf32>, %y: memref<6xf32>) attributes {schedule = "row_reduction_looped", row_cache = [0 : i64], shared_bytes = 2000 : i64} {
  %r = tile.program_id 0
  %c0 = arith.constant 0 : index
  %c128 = arith.constant 128 : index
  %c500 = arith.constant 500 : index
  // CHECK: %[[SH:.*]] = tile.alloc : memref<1x500xf32, #tile.memory_space<shared>>
  // GENERIC: "tile.alloc"() : () -> memref<1x500xf32, #tile.memory_space<shared>>
  %sh = tile.alloc : memref<1x500xf32, #tile.memory_space<shared>>
  %init = nn.constant 0.0 : tensor<1xf32>
  // CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%{{.*}} = %{{.*}}) -> (tensor<1xf32>)
  %total = scf.for %k = %c0 to %c500 step %c128 iter_args(%acc = %init) -> (tensor<1xf32>) {
    // CHECK: tile.copy %{{.*}}[%{{.*}}, %{{.*}}] to %[[SH]][%{{.*}}, %{{.*}}] [1, 128] : memref<6x500xf32> to memref<1x500xf32, #tile.memory_space<shared>>
    // GENERIC: "tile.copy"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) {shape = array<i64: 1, 128>, operandSegmentSizes = array<i32: 1, 1, 2, 2>}
    tile.copy %x[%r, %k] to %sh[%c0, %k] [1, 128] : memref<6x500xf32> to memref<1x500xf32, #tile.memory_space<shared>>
    // CHECK-NEXT: tile.barrier
    // GENERIC: "tile.barrier"() : () -> ()
    tile.barrier
    // CHECK-NEXT: tile.load %[[SH]][%{{.*}}, %{{.*}}] : memref<1x500xf32, #tile.memory_space<shared>> -> tensor<1x128xf32>
    %t = tile.load %sh[%c0, %k] : memref<1x500xf32, #tile.memory_space<shared>> -> tensor<1x128xf32>
    %s = tile.reduce sum %t axis 1 : tensor<1x128xf32> -> tensor<1xf32>
    %n = nn.add %acc, %s : tensor<1xf32>
    scf.yield %n : tensor<1xf32>
  }
  tile.store %total, %y[%r] : tensor<1xf32>, memref<6xf32>
  tile.return
}

// CHECK-LABEL: tile.kernel @matmul grid 1
tile.kernel @matmul grid 1 (%a: memref<64x32xbf16>, %b: memref<16x32xbf16>, %c: memref<64x16xbf16>) attributes {schedule = "matmul", block_k = 32 : i64, group_m = 8 : i64, num_stages = 3 : i64} {
  %c0 = arith.constant 0 : index
  %acc = nn.constant 0.0 : tensor<64x16xf32>
  %ta = tile.load %a[%c0, %c0] : memref<64x32xbf16> -> tensor<64x32xbf16>
  %tb = tile.load %b[%c0, %c0] : memref<16x32xbf16> -> tensor<16x32xbf16>
  %tbt = tile.transpose %tb [1, 0] : tensor<16x32xbf16> -> tensor<32x16xbf16>
  // CHECK: %[[D:.*]] = tile.dot %{{.*}}, %{{.*}}, %{{.*}} : tensor<64x32xbf16>, tensor<32x16xbf16>, tensor<64x16xf32>
  // GENERIC: "tile.dot"(%{{.*}}, %{{.*}}, %{{.*}}) : (tensor<64x32xbf16>, tensor<32x16xbf16>, tensor<64x16xf32>) -> tensor<64x16xf32>
  %d = tile.dot %ta, %tbt, %acc : tensor<64x32xbf16>, tensor<32x16xbf16>, tensor<64x16xf32>
  // CHECK: tile.dot %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x4x8xf32>, tensor<2x8x4xf32>, tensor<2x4x4xf32>
  %ba = nn.constant 1.0 : tensor<2x4x8xf32>
  %bb = nn.constant 2.0 : tensor<2x8x4xf32>
  %bc = nn.constant 0.0 : tensor<2x4x4xf32>
  %bd = tile.dot %ba, %bb, %bc : tensor<2x4x8xf32>, tensor<2x8x4xf32>, tensor<2x4x4xf32>
  %r = nn.cast %d : tensor<64x16xf32> -> tensor<64x16xbf16>
  tile.store %r, %c[%c0, %c0] : tensor<64x16xbf16>, memref<64x16xbf16>
  tile.return
}

// A kernel parameter may spell out the global space; integer tiles take integer fills
// (i1: 0 or 1); a matmul kernel may record where it stages operands.
// CHECK-LABEL: tile.kernel @spaces_and_fills grid 1
// CHECK-SAME:  (%{{.*}}: memref<8xf32, #tile.memory_space<global>>, %{{.*}}: memref<8xi64>, %{{.*}}: memref<8xi1>)
// CHECK-SAME:  attributes {schedule = "matmul", operand_staging = "registers"}
// GENERIC:     ^{{.*}}(%{{.*}}: memref<8xf32, #tile.memory_space<global>>, %{{.*}}: memref<8xi64>, %{{.*}}: memref<8xi1>):
tile.kernel @spaces_and_fills grid 1 (%x: memref<8xf32, #tile.memory_space<global>>, %i: memref<8xi64>, %b: memref<8xi1>) attributes {schedule = "matmul", operand_staging = "registers"} {
  %c0 = arith.constant 0 : index
  // CHECK: tile.load %{{.*}}[%{{.*}}] fill nan : memref<8xf32, #tile.memory_space<global>> -> tensor<8xf32>
  %t = tile.load %x[%c0] fill nan : memref<8xf32, #tile.memory_space<global>> -> tensor<8xf32>
  // CHECK-NEXT: tile.load %{{.*}}[%{{.*}}] fill -9223372036854775808 : memref<8xi64> -> tensor<16xi64>
  // GENERIC: "tile.load"(%{{.*}}, %{{.*}}) {fill = -9223372036854775808 : i64} : (memref<8xi64>, index) -> tensor<16xi64>
  %u = tile.load %i[%c0] fill -9223372036854775808 : memref<8xi64> -> tensor<16xi64>
  // CHECK-NEXT: tile.load %{{.*}}[%{{.*}}] fill 1 : memref<8xi1> -> tensor<16xi1>
  // GENERIC: "tile.load"(%{{.*}}, %{{.*}}) {fill = true} : (memref<8xi1>, index) -> tensor<16xi1>
  %v = tile.load %b[%c0] fill 1 : memref<8xi1> -> tensor<16xi1>
  tile.return
}

// The host: inputs, out-params marked {tile.output}, temporaries, views, launches and
// library GEMMs.
// CHECK-LABEL: func.func @host
// CHECK-SAME:  (%[[A:.*]]: memref<4x25xf32>, %[[OUT:.*]]: memref<100xbf16> {tile.output})
func.func @host(%a: memref<4x25xf32>, %out: memref<100xbf16> {tile.output}) {
  // CHECK-NEXT: %[[T:.*]] = tile.alloc : memref<100xf32>
  %t = tile.alloc : memref<100xf32>
  // CHECK-NEXT: %[[V:.*]] = tile.view %[[A]] : memref<4x25xf32> -> memref<100xf32>
  // GENERIC: "tile.view"(%{{.*}}) : (memref<4x25xf32>) -> memref<100xf32>
  %v = tile.view %a : memref<4x25xf32> -> memref<100xf32>
  // a contiguous run of the source's elements: rows 1 and 2
  // CHECK-NEXT: %{{.*}} = tile.view %[[A]] {offset = 25 : i64} : memref<4x25xf32> -> memref<2x25xf32>
  // GENERIC: "tile.view"(%{{.*}}) {offset = 25 : i64} : (memref<4x25xf32>) -> memref<2x25xf32>
  %rows = tile.view %a {offset = 25 : i64} : memref<4x25xf32> -> memref<2x25xf32>
  // a buffer may be passed with another shape of the same element count
  // CHECK-NEXT: tile.launch @pointwise grid [2] (%[[A]], %[[OUT]]) : memref<4x25xf32>, memref<100xbf16>
  // GENERIC: "tile.launch"(%{{.*}}, %{{.*}}) <{operandSegmentSizes = array<i32: 0, 2>}> {kernel = @pointwise, grid = array<i64: 2>} : (memref<4x25xf32>, memref<100xbf16>) -> ()
  tile.launch @pointwise grid [2] (%a, %out) : memref<4x25xf32>, memref<100xbf16>
  // CHECK: tile.launch @row_reduction grid [3, 1]
  %x = tile.alloc : memref<6x100xf32>
  %y = tile.alloc : memref<6xf32>
  tile.launch @row_reduction grid [3, 1] (%x, %y) : memref<6x100xf32>, memref<6xf32>
  %ga = tile.alloc : memref<2x64x32xbf16>
  %gb = tile.alloc : memref<16x32xbf16>
  %gc = tile.alloc : memref<2x64x16xbf16>
  // CHECK: tile.gemm %{{.*}}, %{{.*}} into %{{.*}} transpose_b : memref<2x64x32xbf16>, memref<16x32xbf16>, memref<2x64x16xbf16>
  // GENERIC: "tile.gemm"(%{{.*}}, %{{.*}}, %{{.*}}) {transpose_b} : (memref<2x64x32xbf16>, memref<16x32xbf16>, memref<2x64x16xbf16>) -> ()
  tile.gemm %ga, %gb into %gc transpose_b : memref<2x64x32xbf16>, memref<16x32xbf16>, memref<2x64x16xbf16>
  %gbias = tile.alloc : memref<16xbf16>
  // CHECK: tile.gemm %{{.*}}, %{{.*}} into %{{.*}} bias %{{.*}} transpose_b : memref<2x64x32xbf16>, memref<16x32xbf16>, memref<2x64x16xbf16>, memref<16xbf16>
  // GENERIC: "tile.gemm"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) {transpose_b} : (memref<2x64x32xbf16>, memref<16x32xbf16>, memref<2x64x16xbf16>, memref<16xbf16>) -> ()
  tile.gemm %ga, %gb into %gc bias %gbias transpose_b : memref<2x64x32xbf16>, memref<16x32xbf16>, memref<2x64x16xbf16>, memref<16xbf16>
  %ta = tile.alloc : memref<32x64xf32>
  %tb = tile.alloc : memref<32x8xf32>
  %tc = tile.alloc : memref<64x8xf32>
  // CHECK: tile.gemm %{{.*}}, %{{.*}} into %{{.*}} transpose_a : memref<32x64xf32>, memref<32x8xf32>, memref<64x8xf32>
  tile.gemm %ta, %tb into %tc transpose_a : memref<32x64xf32>, memref<32x8xf32>, memref<64x8xf32>
  // CHECK: func.return
  func.return
}

// Dynamic sizes: `?` dims of buffers, read with tile.dim, in mask bounds, launch grids and
// host allocations (a dynamic size is the smallest i64 in the generic form, as in MLIR).

// CHECK-LABEL: tile.kernel @rows grid 1
// CHECK-SAME:  (%[[X:.*]]: memref<?x100xf32>, %{{.*}}: memref<?xf32>)
tile.kernel @rows grid 1 (%x: memref<?x100xf32>, %y: memref<?xf32>) attributes {schedule = "row_reduction", num_warps = 4 : i64, num_stages = 1 : i64} {
  %p = tile.program_id 0
  %c2 = arith.constant 2 : index
  %c0 = arith.constant 0 : index
  %r = arith.muli %p, %c2 : index
  // CHECK: %[[N:.*]] = tile.dim %[[X]], 0 : memref<?x100xf32>
  // GENERIC: "tile.dim"(%{{.*}}) {dim = 0 : i64} : (memref<?x100xf32>) -> index
  %n = tile.dim %x, 0 : memref<?x100xf32>
  %t = tile.load %x[%r, %c0] : memref<?x100xf32> -> tensor<2x128xf32>
  // CHECK: tile.mask [%{{.*}}, %{{.*}}] bounds [%[[N]], 100] : tensor<2x128xi1>
  // GENERIC: "tile.mask"(%{{.*}}, %{{.*}}, %{{.*}}) <{operandSegmentSizes = array<i32: 2, 1>}> {bounds = array<i64: -9223372036854775808, 100>} : (index, index, index) -> tensor<2x128xi1>
  %m = tile.mask [%r, %c0] bounds [%n, 100] : tensor<2x128xi1>
  %z = nn.constant 0.0 : tensor<2x128xf32>
  %s = nn.select %m, %t, %z : tensor<2x128xf32>
  %sum = tile.reduce sum %s axis 1 : tensor<2x128xf32> -> tensor<2xf32>
  tile.store %sum, %y[%r] : tensor<2xf32>, memref<?xf32>
  tile.return
}

// CHECK-LABEL: func.func @rows_host
// CHECK-SAME:  %{{.*}}: memref<?xf32> {tile.output, tile.dims_from = array<i64: 0, 0>}
func.func @rows_host(%x: memref<?x100xf32>, %y: memref<?xf32> {tile.output, tile.dims_from = array<i64: 0, 0>}) {
  // CHECK-NEXT: %[[N:.*]] = tile.dim %{{.*}}, 0 : memref<?x100xf32>
  %n = tile.dim %x, 0 : memref<?x100xf32>
  %c2 = arith.constant 2 : index
  %g = arith.ceildivui %n, %c2 : index
  // CHECK: %[[T:.*]] = tile.alloc(%[[N]]) : memref<?x100xf32>
  // GENERIC: "tile.alloc"(%{{.*}}) : (index) -> memref<?x100xf32>
  %t = tile.alloc(%n) : memref<?x100xf32>
  // CHECK-NEXT: tile.launch @rows grid [%[[G:.*]]] (%{{.*}}, %{{.*}}) : memref<?x100xf32>, memref<?xf32>
  // GENERIC: "tile.launch"(%{{.*}}, %{{.*}}, %{{.*}}) <{operandSegmentSizes = array<i32: 1, 2>}> {kernel = @rows, grid = array<i64: -9223372036854775808>} : (index, memref<?x100xf32>, memref<?xf32>) -> ()
  tile.launch @rows grid [%g] (%x, %y) : memref<?x100xf32>, memref<?xf32>
  func.return
}
