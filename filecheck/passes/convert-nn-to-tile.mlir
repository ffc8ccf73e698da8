// RUN: fuse-opt %s --split-input-file -p convert-nn-to-tile | filecheck %s
// RUN: fuse-opt %s --split-input-file -p 'convert-nn-to-tile{block=32 block-rows=2 block-cols=16 block-m=16 block-n=32 block-k=16 group-m=2}' | filecheck %s --check-prefix=FORCED
// RUN: fuse-opt %s --split-input-file -p 'convert-nn-to-tile{max-row-block=32}' | filecheck %s --check-prefix=LOOPED
// RUN: fuse-opt %s --split-input-file -p 'convert-nn-to-tile{max-row-block=32 row-chunk=32}' | filecheck %s --check-prefix=CHUNK
// RUN: fuse-opt %s --split-input-file -p 'convert-nn-to-tile{max-row-block=32 online-stats=false}' | filecheck %s --check-prefix=PERLEVEL
// RUN: fuse-opt %s --split-input-file -p 'convert-nn-to-tile{block-cols=32}' | filecheck %s --check-prefix=COLS
// RUN: fuse-opt %s --split-input-file -p 'convert-nn-to-tile{statistics-row-block=32}' | filecheck %s --check-prefix=STATS
// RUN: fuse-opt %s --split-input-file -p 'convert-nn-to-tile{exp2-sums=false}' | filecheck %s --check-prefix=NOEXP2
// RUN: fuse-opt %s --split-input-file -p 'convert-nn-to-tile{exp2-sums=false max-row-block=32}' | filecheck %s --check-prefix=NOEXP2LOOP
// RUN: not fuse-opt %s --split-input-file -p 'convert-nn-to-tile{block-m=48}' 2>&1 | filecheck %s --check-prefix=BADSIZE
// BADSIZE: error: convert-nn-to-tile: block-m=48 must be a positive power of two
// BADSIZE-NOT: Traceback
// RUN: not fuse-opt %s --split-input-file -p 'convert-nn-to-tile{row-cache-bytes=-8}' 2>&1 | filecheck %s --check-prefix=BADCACHE
// BADCACHE: error: convert-nn-to-tile: row-cache-bytes=-8 must be >= 0
// BADCACHE-NOT: Traceback
// RUN: not fuse-opt %s --split-input-file -p 'convert-nn-to-tile{online-stats=maybe}' 2>&1 | filecheck %s --check-prefix=BADBOOL
// BADBOOL: error: convert-nn-to-tile: option online-stats=maybe must be bool
// RUN: not fuse-opt %s --split-input-file -p 'convert-nn-to-tile{blok=64}' 2>&1 | filecheck %s --check-prefix=BADNAME
// BADNAME: error: convert-nn-to-tile: unknown option blok (options: attention-block-m, attention-block-n, attention-query-tiles, block, block-cols, block-k, block-m, block-n, block-rows, column-statistics, exp2-sums, group-m, max-row-block, online-stats, row-cache-bytes, row-chunk, scan, statistics-row-block, statistics-row-chunk)
// RUN: not fuse-opt %s --split-input-file -p 'convert-nn-to-tile{row-chunk=48}' 2>&1 | filecheck %s --check-prefix=BADCHUNK
// BADCHUNK: error: convert-nn-to-tile: row-chunk=48 must be a positive power of two
// RUN: not fuse-opt %s --split-input-file -p 'convert-nn-to-tile{block=2097152}' 2>&1 | filecheck %s --check-prefix=HUGE
// HUGE: :{{[0-9]+}}:{{[0-9]+}}: error: convert-nn-to-tile: these tile sizes make a tile of 2097152 elements (at most 1048576); force smaller block sizes
// HUGE-NOT: Traceback

// Pointwise: the group's values all have 100 elements, so the kernel iterates over one
// flat dim (reshapes are free); 100 is ragged against a block of 32 (with forced sizes), so the last
// program's loads and stores are masked at the buffer's bounds.
// CHECK-LABEL: tile.kernel @flat grid 1
// CHECK-SAME:  (%[[X:.*]]: memref<100xf32>, %[[Y:.*]]: memref<100xf32>, %[[O:.*]]: memref<100xbf16>)
// CHECK-SAME:  schedule = "pointwise", iteration_sizes = array<i64: 100>, block_sizes = array<i64: 128>
// CHECK-SAME:  candidates = [{block = 256 : i64}
// CHECK:       %[[T:.*]] = tile.load %[[X]][%{{.*}}] : memref<100xf32> -> tensor<128xf32>
// CHECK-NEXT:  %[[E:.*]] = nn.exp %[[T]] : tensor<128xf32>
// CHECK-NEXT:  %[[U:.*]] = tile.load %[[Y]][%{{.*}}] : memref<100xf32> -> tensor<128xf32>
// CHECK-NEXT:  %[[S:.*]] = nn.add %[[E]], %[[U]] : tensor<128xf32>
// CHECK-NEXT:  %[[C:.*]] = nn.cast %[[S]] : tensor<128xf32> -> tensor<128xbf16>
// CHECK-NEXT:  tile.store %[[C]], %[[O]][%{{.*}}] : tensor<128xbf16>, memref<100xbf16>
// CHECK-NEXT:  tile.return
// Host calling convention: inputs are memrefs, the result is an out-param.
// CHECK-LABEL: func.func @pointwise_flat
// CHECK-SAME:  (%[[A:.*]]: memref<4x25xf32>, %[[B:.*]]: memref<4x25xf32>, %[[R:.*]]: memref<4x25xbf16> {tile.output})
// CHECK-NEXT:  tile.launch @flat grid [1] (%[[A]], %[[B]], %[[R]]) : memref<4x25xf32>, memref<4x25xf32>, memref<4x25xbf16>
// CHECK-NEXT:  func.return
// FORCED-LABEL: tile.kernel @flat grid 1
// FORCED-SAME:  block_sizes = array<i64: 32>
// FORCED:       %[[P:.*]] = tile.program_id 0
// FORCED-NEXT:  %[[OFF:.*]] = arith.muli %[[P]], %{{.*}} : index
// FORCED-NEXT:  tile.load %{{.*}}[%[[OFF]]] : memref<100xf32> -> tensor<32xf32>
// FORCED:       tile.store %{{.*}}, %{{.*}}[%[[OFF]]] : tensor<32xbf16>, memref<100xbf16>
// FORCED:       tile.launch @flat grid [4]
func.func @pointwise_flat(%x: tensor<4x25xf32>, %y: tensor<4x25xf32>) -> tensor<4x25xbf16> {
  %0 = nn.fusion ins(%x, %y : tensor<4x25xf32>, tensor<4x25xf32>) -> tensor<4x25xbf16> attributes {kernel_name = "flat", kind = "pointwise", route = "kernel"} {
  ^bb0(%a: tensor<4x25xf32>, %b: tensor<4x25xf32>):
    %e = nn.exp %a : tensor<4x25xf32>
    %s = nn.add %e, %b : tensor<4x25xf32>
    %c = nn.cast %s : tensor<4x25xf32> -> tensor<4x25xbf16>
    nn.yield %c : tensor<4x25xbf16>
  }
  func.return %0 : tensor<4x25xbf16>
}

// -----

// Pointwise with a broadcast: 2-D blocks (rows x cols); the bias is loaded once per
// column block and broadcast along the rows. Forced sizes give 2x16 blocks, 3 x 3 programs, the
// program id split into a column and a row offset.
// CHECK-LABEL: tile.kernel @gelu_bias grid 1
// CHECK-SAME:  schedule = "pointwise", iteration_sizes = array<i64: 5, 37>, block_sizes = array<i64: 8, 64>
// CHECK:       %[[X:.*]] = tile.load %{{.*}}[%{{.*}}, %{{.*}}] : memref<5x37xf32> -> tensor<8x64xf32>
// CHECK-NEXT:  %[[B:.*]] = tile.load %{{.*}}[%{{.*}}] : memref<37xf32> -> tensor<64xf32>
// CHECK-NEXT:  %[[BB:.*]] = tile.broadcast %[[B]] dims [1] : tensor<64xf32> -> tensor<8x64xf32>
// CHECK-NEXT:  %[[S:.*]] = nn.add %[[X]], %[[BB]] : tensor<8x64xf32>
// CHECK-NEXT:  nn.gelu %[[S]] : tensor<8x64xf32>
// CHECK:       tile.launch @gelu_bias grid [1]
// FORCED-LABEL: tile.kernel @gelu_bias grid 1
// FORCED-SAME:  block_sizes = array<i64: 2, 16>
// FORCED:       %[[P:.*]] = tile.program_id 0
// FORCED-NEXT:  %[[J:.*]] = arith.remsi %[[P]], %{{.*}} : index
// FORCED-NEXT:  %[[I:.*]] = arith.divsi %[[P]], %{{.*}} : index
// FORCED-NEXT:  %[[COL:.*]] = arith.muli %[[J]], %{{.*}} : index
// FORCED-NEXT:  %[[ROW:.*]] = arith.muli %[[I]], %{{.*}} : index
// FORCED-NEXT:  tile.load %{{.*}}[%[[ROW]], %[[COL]]] : memref<5x37xf32> -> tensor<2x16xf32>
// FORCED-NEXT:  tile.load %{{.*}}[%[[COL]]] : memref<37xf32> -> tensor<16xf32>
// FORCED:       tile.store %{{.*}}, %{{.*}}[%[[ROW]], %[[COL]]] : tensor<2x16xf32>, memref<5x37xf32>
// FORCED:       tile.launch @gelu_bias grid [9]
func.func @pointwise_broadcast(%x: tensor<5x37xf32>, %b: tensor<37xf32>) -> tensor<5x37xf32> {
  %0 = nn.fusion ins(%x, %b : tensor<5x37xf32>, tensor<37xf32>) -> tensor<5x37xf32> attributes {kernel_name = "gelu_bias", kind = "pointwise", route = "kernel"} {
  ^bb0(%a: tensor<5x37xf32>, %c: tensor<37xf32>):
    %cb = nn.broadcast %c : tensor<37xf32> -> tensor<5x37xf32>
    %s = nn.add %a, %cb : tensor<5x37xf32>
    %g = nn.gelu %s : tensor<5x37xf32>
    nn.yield %g : tensor<5x37xf32>
  }
  func.return %0 : tensor<5x37xf32>
}

// -----

// Row reduction, whole rows in registers (the 100-wide row is one 128 block): the
// ragged columns are replaced by the reduction's identity before tile.reduce. The
// autotuner's candidates: rows per program for whole rows, the chunk when looped.
// With max-row-block=32, rows longer than 32 loop over column chunks: the max and the
// sum of exponentials share one loop (online softmax: the running sum is rescaled by
// exp(m - m') when the running max grows; a max of -inf is read as 0), accumulators
// as iter_args, then a last loop that stores the row: two passes; one row per program.
// A row whose max ends -inf (all -inf) sums to NaN, as every exp(-inf - -inf) is.
// In the first loop the exponentials are only summed: exp2((x - m') * log2(e)), one
// hardware ex2 (the stores' loop keeps exp).
// CHECK-LABEL: tile.kernel @softmax grid 1
// CHECK-SAME:  schedule = "row_reduction", iteration_sizes = array<i64: 6, 100>, block_sizes = array<i64: 8, 128>, reduce_dim = 1 : i64
// CHECK-SAME:  candidates = [{"block-rows" = 1 : i64}, {"block-rows" = 2 : i64}, {"block-rows" = 4 : i64}, {"block-rows" = 8 : i64}]
// CHECK:       %[[X:.*]] = tile.load %{{.*}}[%{{.*}}, %{{.*}}] : memref<6x100xf32> -> tensor<8x128xf32>
// CHECK-NEXT:  %[[M:.*]] = tile.mask [%{{.*}}, %{{.*}}] bounds [6, 100] : tensor<8x128xi1>
// CHECK-NEXT:  %[[NINF:.*]] = nn.constant 0xfff0000000000000 : tensor<8x128xf32>
// CHECK-NEXT:  %[[XM:.*]] = nn.select %[[M]], %[[X]], %[[NINF]] : tensor<8x128xf32>
// CHECK-NEXT:  %[[MAX:.*]] = tile.reduce max %[[XM]] axis 1 : tensor<8x128xf32> -> tensor<8xf32>
// CHECK-NEXT:  tile.broadcast %[[MAX]] dims [0] : tensor<8xf32> -> tensor<8x128xf32>
// CHECK:       tile.reduce sum %{{.*}} axis 1 : tensor<8x128xf32> -> tensor<8xf32>
// CHECK:       nn.div
// CHECK-NEXT:  tile.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] : tensor<8x128xf32>, memref<6x100xf32>
// LOOPED-LABEL: tile.kernel @softmax grid 1
// LOOPED-SAME:  schedule = "row_reduction_looped", iteration_sizes = array<i64: 6, 100>, block_sizes = array<i64: 1, 128>
// LOOPED-SAME:  candidates = [{"block-cols" = 1024 : i64}, {"block-cols" = 2048 : i64}, {"block-cols" = 4096 : i64}]
// `row-chunk` sets the chunk a looped row reads per step (the CUDA backend passes 4096):
// CHUNK-LABEL: tile.kernel @softmax grid 1
// CHUNK-SAME:  schedule = "row_reduction_looped", iteration_sizes = array<i64: 6, 100>, block_sizes = array<i64: 1, 32>
// CHUNK:       tile.load %{{.*}}[%{{.*}}, %{{.*}}] : memref<6x100xf32> -> tensor<1x32xf32>
// LOOPED:       %[[ROW:.*]] = tile.program_id 0
// LOOPED:       %[[MAX:.*]], %[[SUM:.*]] = scf.for %[[K:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[M:.*]] = %{{.*}}, %[[S:.*]] = %{{.*}}) -> (tensor<1xf32>, tensor<1xf32>) {
// LOOPED-NEXT:    %[[X:.*]] = tile.load %{{.*}}[%[[ROW]], %[[K]]] : memref<6x100xf32> -> tensor<1x128xf32>
// LOOPED-NEXT:    tile.mask [%[[ROW]], %[[K]]] bounds [6, 100] : tensor<1x128xi1>
// LOOPED:         %[[CMAX:.*]] = tile.reduce max %{{.*}} axis 1 : tensor<1x128xf32> -> tensor<1xf32>
// LOOPED-NEXT:    %[[MNEW:.*]] = nn.max %[[M]], %[[CMAX]] : tensor<1xf32>
// LOOPED:         %[[NINF:.*]] = nn.compare eq, %[[MNEW]], %{{.*}} : tensor<1xf32>
// LOOPED:         %[[SAFE:.*]] = nn.select %[[NINF]], %{{.*}}, %[[MNEW]] : tensor<1xf32>
// LOOPED-NEXT:    %[[MB:.*]] = tile.broadcast %[[SAFE]] dims [0] : tensor<1xf32> -> tensor<1x128xf32>
// LOOPED-NEXT:    %[[D:.*]] = nn.sub %[[X]], %[[MB]] : tensor<1x128xf32>
// LOOPED-NEXT:    %[[LOG2E:.*]] = nn.constant 1.4426950408889634 : tensor<1x128xf32>
// LOOPED-NEXT:    %[[D2:.*]] = nn.mul %[[D]], %[[LOG2E]] : tensor<1x128xf32>
// LOOPED-NEXT:    nn.exp2 %[[D2]] : tensor<1x128xf32>
// LOOPED:         %[[CSUM:.*]] = tile.reduce sum %{{.*}} axis 1 : tensor<1x128xf32> -> tensor<1xf32>
// LOOPED-NEXT:    %[[SHIFT:.*]] = nn.sub %[[M]], %[[SAFE]] : tensor<1xf32>
// LOOPED-NEXT:    %[[ALPHA:.*]] = nn.exp %[[SHIFT]] : tensor<1xf32>
// LOOPED-NEXT:    %[[SCALED:.*]] = nn.mul %[[S]], %[[ALPHA]] : tensor<1xf32>
// LOOPED-NEXT:    %[[SNEW:.*]] = nn.add %[[SCALED]], %[[CSUM]] : tensor<1xf32>
// LOOPED-NEXT:    scf.yield %[[MNEW]], %[[SNEW]] : tensor<1xf32>, tensor<1xf32>
// LOOPED:       %[[EMPTY:.*]] = nn.compare eq, %[[MAX]], %{{.*}} : tensor<1xf32>
// LOOPED:       %[[NANSUM:.*]] = nn.select %[[EMPTY]], %{{.*}}, %[[SUM]] : tensor<1xf32>
// LOOPED:       scf.for %[[K2:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// LOOPED:         tile.broadcast %[[MAX]] dims [0]
// LOOPED:         tile.broadcast %[[NANSUM]] dims [0]
// LOOPED:         tile.store %{{.*}}, %{{.*}}[%[[ROW]], %[[K2]]] : tensor<1x128xf32>, memref<6x100xf32>
// LOOPED-NOT:   scf.for
// LOOPED:       tile.launch @softmax grid [6]
// With online-stats=false, one loop per reduction level (max, then sum), then the
// store loop: three passes over the row. Each level's loop accumulates whole tiles and
// reduces once after it.
// PERLEVEL-LABEL: tile.kernel @softmax grid 1
// PERLEVEL-SAME:  schedule = "row_reduction_looped"
// PERLEVEL:       %[[MAXACC:.*]] = scf.for %{{.*}} iter_args(%{{.*}} = %{{.*}}) -> (tensor<1x128xf32>) {
// PERLEVEL-NOT:     tile.reduce
// PERLEVEL:         nn.max %{{.*}} : tensor<1x128xf32>
// PERLEVEL:       scf.yield
// PERLEVEL:       %[[MAX:.*]] = tile.reduce max %[[MAXACC]] axis 1 : tensor<1x128xf32> -> tensor<1xf32>
// PERLEVEL:       %[[SUMACC:.*]] = scf.for %{{.*}} iter_args(%{{.*}} = %{{.*}}) -> (tensor<1x128xf32>) {
// PERLEVEL:         tile.broadcast %[[MAX]] dims [0]
// PERLEVEL-NOT:     tile.reduce
// PERLEVEL:       scf.yield
// PERLEVEL:       tile.reduce sum %[[SUMACC]] axis 1 : tensor<1x128xf32> -> tensor<1xf32>
// PERLEVEL:       scf.for
// PERLEVEL:         tile.store
// PERLEVEL-NOT:   scf.for
// PERLEVEL:       tile.launch @softmax grid [6]
// A forced column block shorter than the row loops over chunks of it (100 = 3 x 32 +
// a masked tail): block_sizes [1, 32].
// COLS-LABEL: tile.kernel @softmax grid 1
// COLS-SAME:  schedule = "row_reduction_looped", iteration_sizes = array<i64: 6, 100>, block_sizes = array<i64: 1, 32>
// COLS:       scf.for %{{.*}} iter_args(%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) -> (tensor<1xf32>, tensor<1xf32>) {
// COLS:         tile.load %{{.*}} : memref<6x100xf32> -> tensor<1x32xf32>
// COLS:       tile.launch @softmax grid [6]
func.func @row_reduction(%x: tensor<6x100xf32>) -> tensor<6x100xf32> {
  %0 = nn.fusion ins(%x : tensor<6x100xf32>) -> tensor<6x100xf32> attributes {kernel_name = "softmax", kind = "reduction", route = "kernel"} {
  ^bb0(%a: tensor<6x100xf32>):
    %m = nn.reduce_max %a [1] keepdim : tensor<6x100xf32> -> tensor<6x1xf32>
    %mb = nn.broadcast %m : tensor<6x1xf32> -> tensor<6x100xf32>
    %d = nn.sub %a, %mb : tensor<6x100xf32>
    %e = nn.exp %d : tensor<6x100xf32>
    %s = nn.sum %e [1] keepdim : tensor<6x100xf32> -> tensor<6x1xf32>
    %sb = nn.broadcast %s : tensor<6x1xf32> -> tensor<6x100xf32>
    %y = nn.div %e, %sb : tensor<6x100xf32>
    nn.yield %y : tensor<6x100xf32>
  }
  func.return %0 : tensor<6x100xf32>
}

// -----

// A row's log-sum-exp stored alone (a loss's statistics): its exponentials are only
// summed, so they are exp2 of the deviation in base 2, whole rows or looped. With
// statistics-row-block=32 such a kernel loops in chunks of 32 (a looped softmax's
// statistics take one pass, so a whole row reads no less), while the softmax above,
// which stores rows, stays whole.
// CHECK-LABEL: tile.kernel @log_sum_exp grid 1
// CHECK-SAME:  schedule = "row_reduction", iteration_sizes = array<i64: 6, 100>
// CHECK:       %[[D:.*]] = nn.sub %{{.*}}, %{{.*}} : tensor<8x128xf32>
// CHECK-NEXT:  %[[LOG2E:.*]] = nn.constant 1.4426950408889634 : tensor<8x128xf32>
// CHECK-NEXT:  %[[D2:.*]] = nn.mul %[[D]], %[[LOG2E]] : tensor<8x128xf32>
// CHECK-NEXT:  %[[E:.*]] = nn.exp2 %[[D2]] : tensor<8x128xf32>
// CHECK-NOT:   nn.exp {{.*}} : tensor<8x128xf32>
// CHECK:       tile.reduce sum
// CHECK:       nn.log
// With exp2-sums=false (the CUDA target) the summed exponentials stay exp:
// NOEXP2-LABEL: tile.kernel @log_sum_exp grid 1
// NOEXP2-NOT:   nn.exp2
// NOEXP2:       nn.exp %{{.*}} : tensor<8x128xf32>
// NOEXP2-NOT:   nn.exp2
// NOEXP2:       tile.launch @log_sum_exp
// and so do the online loop's terms:
// NOEXP2LOOP-LABEL: tile.kernel @log_sum_exp grid 1
// NOEXP2LOOP-SAME:  schedule = "row_reduction_looped"
// NOEXP2LOOP-NOT:   nn.exp2
// NOEXP2LOOP:       scf.for
// NOEXP2LOOP:         nn.exp %{{.*}} : tensor<1x32xf32>
// NOEXP2LOOP-NOT:   nn.exp2
// NOEXP2LOOP:       tile.launch @log_sum_exp
// STATS-LABEL: tile.kernel @softmax grid 1
// STATS-SAME:  schedule = "row_reduction", iteration_sizes = array<i64: 6, 100>
// STATS-LABEL: tile.kernel @log_sum_exp grid 1
// STATS-SAME:  schedule = "row_reduction_looped", iteration_sizes = array<i64: 6, 100>, block_sizes = array<i64: 1, 32>
// STATS:       scf.for
// STATS:         nn.exp2
// STATS-NOT:   scf.for
// STATS:       tile.store
func.func @lse_rows(%x: tensor<6x100xf32>) -> tensor<6xf32> {
  %0 = nn.fusion ins(%x : tensor<6x100xf32>) -> tensor<6xf32> attributes {kernel_name = "log_sum_exp", kind = "reduction", route = "kernel"} {
  ^bb0(%a: tensor<6x100xf32>):
    %m = nn.reduce_max %a [1] keepdim : tensor<6x100xf32> -> tensor<6x1xf32>
    %mb = nn.broadcast %m : tensor<6x1xf32> -> tensor<6x100xf32>
    %d = nn.sub %a, %mb : tensor<6x100xf32>
    %e = nn.exp %d : tensor<6x100xf32>
    %s = nn.sum %e [1] : tensor<6x100xf32> -> tensor<6xf32>
    %l = nn.log %s : tensor<6xf32>
    %mr = nn.reshape %m : tensor<6x1xf32> -> tensor<6xf32>
    %r = nn.add %l, %mr : tensor<6xf32>
    nn.yield %r : tensor<6xf32>
  }
  func.return %0 : tensor<6xf32>
}

// -----

// Short rows: several rows per program (64 rows of 16 in one 64x16 block); the mean
// divides the f32 sum by the row length.
// CHECK-LABEL: tile.kernel @row_mean grid 1
// CHECK-SAME:  block_sizes = array<i64: 64, 16>
// CHECK:       %[[S:.*]] = tile.reduce sum %{{.*}} axis 1 : tensor<64x16xf32> -> tensor<64xf32>
// CHECK-NEXT:  %[[N:.*]] = nn.constant 1.600000e+01 : tensor<64xf32>
// CHECK-NEXT:  %[[M:.*]] = nn.div %[[S]], %[[N]] : tensor<64xf32>
// CHECK-NEXT:  tile.store %[[M]], %{{.*}}[%{{.*}}] : tensor<64xf32>, memref<64xf32>
func.func @row_reduction_rows(%x: tensor<64x16xf32>) -> tensor<64xf32> {
  %0 = nn.fusion ins(%x : tensor<64x16xf32>) -> tensor<64xf32> attributes {kernel_name = "row_mean", kind = "reduction", route = "kernel"} {
  ^bb0(%a: tensor<64x16xf32>):
    %q = nn.mul %a, %a : tensor<64x16xf32>
    %m = nn.mean %q [1] : tensor<64x16xf32> -> tensor<64xf32>
    nn.yield %m : tensor<64xf32>
  }
  func.return %0 : tensor<64xf32>
}

// -----

// Matmul + epilogue: grouped program order (GROUP_M rows of tiles), a K loop of
// tile.dot into an f32 accumulator, then the epilogue on the accumulator and one store.
// The transposed weight is loaded [BN, BK] and transposed in registers. Forced: 16x32
// tiles, BK 16, GROUP_M 2: 3 x 2 programs, K = 24 is ragged against 16 (masked loads
// read zeros, which add nothing to the dot).
// CHECK-LABEL: tile.kernel @linear_gelu grid 1
// CHECK-SAME:  (%[[A:.*]]: memref<40x24xbf16>, %[[W:.*]]: memref<50x24xbf16>, %[[B:.*]]: memref<50xbf16>, %[[O:.*]]: memref<40x50xbf16>)
// CHECK-SAME:  schedule = "matmul", iteration_sizes = array<i64: 40, 50>, block_sizes = array<i64: 64, 64>, block_k = 32 : i64, group_m = 8 : i64
// CHECK:       %[[P:.*]] = tile.program_id 0
// CHECK-NEXT:  %[[GROUP:.*]] = arith.divsi %[[P]], %{{.*}} : index
// CHECK-NEXT:  %[[FIRST:.*]] = arith.muli %[[GROUP]], %{{.*}} : index
// CHECK-NEXT:  %[[LEFT:.*]] = arith.subi %{{.*}}, %[[FIRST]] : index
// CHECK-NEXT:  %[[SIZE:.*]] = arith.minsi %[[LEFT]], %{{.*}} : index
// CHECK-NEXT:  %[[LOCAL:.*]] = arith.remsi %[[P]], %{{.*}} : index
// CHECK-NEXT:  %[[R:.*]] = arith.remsi %[[LOCAL]], %[[SIZE]] : index
// CHECK-NEXT:  %[[IM:.*]] = arith.addi %[[FIRST]], %[[R]] : index
// CHECK-NEXT:  %[[IN:.*]] = arith.divsi %[[LOCAL]], %[[SIZE]] : index
// CHECK-NEXT:  %[[PM:.*]] = arith.muli %[[IM]], %{{.*}} : index
// CHECK-NEXT:  %[[PN:.*]] = arith.muli %[[IN]], %{{.*}} : index
// CHECK-NEXT:  %[[Z:.*]] = nn.constant 0.000000e+00 : tensor<64x64xf32>
// CHECK-NEXT:  %[[ACC:.*]] = scf.for %[[K:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[C:.*]] = %[[Z]]) -> (tensor<64x64xf32>) {
// CHECK-NEXT:    %[[TA:.*]] = tile.load %[[A]][%[[PM]], %[[K]]] : memref<40x24xbf16> -> tensor<64x32xbf16>
// CHECK-NEXT:    %[[TW:.*]] = tile.load %[[W]][%[[PN]], %[[K]]] : memref<50x24xbf16> -> tensor<64x32xbf16>
// CHECK-NEXT:    %[[TB:.*]] = tile.transpose %[[TW]] [1, 0] : tensor<64x32xbf16> -> tensor<32x64xbf16>
// CHECK-NEXT:    %[[D:.*]] = tile.dot %[[TA]], %[[TB]], %[[C]] : tensor<64x32xbf16>, tensor<32x64xbf16>, tensor<64x64xf32>
// CHECK-NEXT:    scf.yield %[[D]] : tensor<64x64xf32>
// CHECK-NEXT:  }
// CHECK-NEXT:  %[[RES:.*]] = nn.cast %[[ACC]] : tensor<64x64xf32> -> tensor<64x64xbf16>
// CHECK-NEXT:  %[[TBIAS:.*]] = tile.load %[[B]][%[[PN]]] : memref<50xbf16> -> tensor<64xbf16>
// CHECK-NEXT:  %[[BB:.*]] = tile.broadcast %[[TBIAS]] dims [1] : tensor<64xbf16> -> tensor<64x64xbf16>
// CHECK-NEXT:  %[[S:.*]] = nn.add %[[RES]], %[[BB]] : tensor<64x64xbf16>
// CHECK-NEXT:  %[[G:.*]] = nn.gelu %[[S]] : tensor<64x64xbf16>
// CHECK-NEXT:  tile.store %[[G]], %[[O]][%[[PM]], %[[PN]]] : tensor<64x64xbf16>, memref<40x50xbf16>
// FORCED-LABEL: tile.kernel @linear_gelu grid 1
// FORCED-SAME:  block_sizes = array<i64: 16, 32>, block_k = 16 : i64, group_m = 2 : i64
// FORCED:       tile.dot %{{.*}}, %{{.*}}, %{{.*}} : tensor<16x16xbf16>, tensor<16x32xbf16>, tensor<16x32xf32>
// FORCED:       tile.launch @linear_gelu grid [6]
func.func @matmul_epilogue(%x: tensor<40x24xbf16>, %w: tensor<50x24xbf16>, %b: tensor<50xbf16>) -> tensor<40x50xbf16> {
  %0 = nn.fusion ins(%x, %w, %b : tensor<40x24xbf16>, tensor<50x24xbf16>, tensor<50xbf16>) -> tensor<40x50xbf16> attributes {kernel_name = "linear_gelu", kind = "matmul", route = "kernel"} {
  ^bb0(%a: tensor<40x24xbf16>, %c: tensor<50x24xbf16>, %d: tensor<50xbf16>):
    %p = nn.matmul %a, %c transpose_b : tensor<40x24xbf16>, tensor<50x24xbf16> -> tensor<40x50xbf16>
    %db = nn.broadcast %d : tensor<50xbf16> -> tensor<40x50xbf16>
    %s = nn.add %p, %db : tensor<40x50xbf16>
    %g = nn.gelu %s : tensor<40x50xbf16>
    nn.yield %g : tensor<40x50xbf16>
  }
  func.return %0 : tensor<40x50xbf16>
}

// -----

// route = "library_gemm": a tile.gemm into a temporary, then the epilogue alone as a
// (flat) pointwise kernel.
// CHECK-LABEL: tile.kernel @linear_relu grid 1
// CHECK-SAME:  schedule = "pointwise"
// CHECK:       nn.relu %{{.*}} : tensor<1024xbf16>
// CHECK-LABEL: func.func @library_gemm
// CHECK-SAME:  (%[[X:.*]]: memref<40x24xbf16>, %[[W:.*]]: memref<50x24xbf16>, %[[O:.*]]: memref<40x50xbf16> {tile.output})
// CHECK-NEXT:  %[[T:.*]] = tile.alloc : memref<40x50xbf16>
// CHECK-NEXT:  tile.gemm %[[X]], %[[W]] into %[[T]] transpose_b : memref<40x24xbf16>, memref<50x24xbf16>, memref<40x50xbf16>
// CHECK-NEXT:  tile.launch @linear_relu grid [2] (%[[T]], %[[O]]) : memref<40x50xbf16>, memref<40x50xbf16>
func.func @library_gemm(%x: tensor<40x24xbf16>, %w: tensor<50x24xbf16>) -> tensor<40x50xbf16> {
  %0 = nn.fusion ins(%x, %w : tensor<40x24xbf16>, tensor<50x24xbf16>) -> tensor<40x50xbf16> attributes {kernel_name = "linear_relu", kind = "matmul", route = "library_gemm"} {
  ^bb0(%a: tensor<40x24xbf16>, %c: tensor<50x24xbf16>):
    %p = nn.matmul %a, %c transpose_b : tensor<40x24xbf16>, tensor<50x24xbf16> -> tensor<40x50xbf16>
    %r = nn.relu %p : tensor<40x50xbf16>
    nn.yield %r : tensor<40x50xbf16>
  }
  func.return %0 : tensor<40x50xbf16>
}

// -----

// A library GEMM whose epilogue starts with a bias add (through the f32 policy's casts)
// takes the bias into the GEMM (cuBLAS's epilogue, one rounding): a projection with
// nothing else after it launches no kernel; what follows the bias add is the epilogue.
// CHECK-LABEL: func.func @gemm_bias
// CHECK-SAME:  (%[[X:.*]]: memref<40x24xbf16>, %[[W:.*]]: memref<50x24xbf16>, %[[B:.*]]: memref<50xbf16>, %[[O:.*]]: memref<40x50xbf16> {tile.output})
// CHECK-NEXT:  tile.gemm %[[X]], %[[W]] into %[[O]] bias %[[B]] transpose_b : memref<40x24xbf16>, memref<50x24xbf16>, memref<40x50xbf16>, memref<50xbf16>
// CHECK-NEXT:  func.return
// CHECK-LABEL: tile.kernel @bias_gelu
// CHECK-NOT:   nn.add
// CHECK:       nn.gelu
// CHECK-LABEL: func.func @gemm_bias_gelu
// CHECK:       tile.gemm %{{.*}}, %{{.*}} into %[[T:.*]] bias %{{.*}} transpose_b
// CHECK-NEXT:  tile.launch @bias_gelu grid [{{.*}}] (%[[T]], %{{.*}})
func.func @gemm_bias(%x: tensor<40x24xbf16>, %w: tensor<50x24xbf16>, %b: tensor<50xbf16>) -> tensor<40x50xbf16> {
  %0 = nn.fusion ins(%x, %w, %b : tensor<40x24xbf16>, tensor<50x24xbf16>, tensor<50xbf16>) -> tensor<40x50xbf16> attributes {kernel_name = "bias", kind = "matmul", route = "library_gemm"} {
  ^bb0(%a: tensor<40x24xbf16>, %c: tensor<50x24xbf16>, %v: tensor<50xbf16>):
    %p = nn.matmul %a, %c transpose_b : tensor<40x24xbf16>, tensor<50x24xbf16> -> tensor<40x50xbf16>
    %vb = nn.broadcast %v : tensor<50xbf16> -> tensor<40x50xbf16>
    %pw = nn.cast %p : tensor<40x50xbf16> -> tensor<40x50xf32>
    %vw = nn.cast %vb : tensor<40x50xbf16> -> tensor<40x50xf32>
    %s = nn.add %pw, %vw : tensor<40x50xf32>
    %r = nn.cast %s : tensor<40x50xf32> -> tensor<40x50xbf16>
    nn.yield %r : tensor<40x50xbf16>
  }
  func.return %0 : tensor<40x50xbf16>
}
func.func @gemm_bias_gelu(%x: tensor<40x24xbf16>, %w: tensor<50x24xbf16>, %b: tensor<50xbf16>) -> tensor<40x50xbf16> {
  %0 = nn.fusion ins(%x, %w, %b : tensor<40x24xbf16>, tensor<50x24xbf16>, tensor<50xbf16>) -> tensor<40x50xbf16> attributes {kernel_name = "bias_gelu", kind = "matmul", route = "library_gemm"} {
  ^bb0(%a: tensor<40x24xbf16>, %c: tensor<50x24xbf16>, %v: tensor<50xbf16>):
    %p = nn.matmul %a, %c transpose_b : tensor<40x24xbf16>, tensor<50x24xbf16> -> tensor<40x50xbf16>
    %vb = nn.broadcast %v : tensor<50xbf16> -> tensor<40x50xbf16>
    %s = nn.add %vb, %p : tensor<40x50xbf16>
    %g = nn.gelu %s : tensor<40x50xbf16>
    nn.yield %g : tensor<40x50xbf16>
  }
  func.return %0 : tensor<40x50xbf16>
}

// -----

// Ops outside fusions: one kernel each (a lone transpose is a copy: a one-program
// whole_tensor kernel, which each backend prints as its own tuned copy; transposes inside
// fused groups are indexed); a result used later is written into its out-param and
// read from there; a value returned only reshaped is computed into its out-param viewed
// in its shape (no copy kernel); a returned input, reshaped or not, is copied.
// CHECK-LABEL: tile.kernel @host_exp
// CHECK-LABEL: tile.kernel @host_transpose grid 1
// CHECK-SAME:  attributes {schedule = "whole_tensor"}
// CHECK:       nn.transpose %{{.*}} [1, 0] : tensor<3x5xf32> -> tensor<5x3xf32>
// CHECK-LABEL: tile.kernel @host_reshape
// CHECK-LABEL: tile.kernel @copy
// CHECK-LABEL: func.func @host
// CHECK-SAME:  (%[[X:.*]]: memref<3x5xf32>, %[[R0:.*]]: memref<3x5xf32> {tile.output}, %[[R1:.*]]: memref<15xf32> {tile.output}, %[[R2:.*]]: memref<3x5xf32> {tile.output}, %[[R3:.*]]: memref<5x3xf32> {tile.output}, %[[R4:.*]]: memref<15xf32> {tile.output})
// CHECK-NEXT:  tile.launch @host_exp grid [1] (%[[X]], %[[R2]])
// CHECK-NEXT:  %[[V:.*]] = tile.view %[[R1]] : memref<15xf32> -> memref<3x5xf32>
// CHECK-NEXT:  tile.launch @host_neg grid [1] (%[[R2]], %[[V]])
// CHECK-NEXT:  tile.launch @host_transpose grid [1] (%[[R2]], %[[R3]])
// CHECK-NEXT:  tile.launch @host_reshape grid [1] (%[[X]], %[[R4]]) : memref<3x5xf32>, memref<15xf32>
// CHECK-NEXT:  tile.launch @copy grid [1] (%[[X]], %[[R0]])
// CHECK-NEXT:  func.return
func.func @host(%x: tensor<3x5xf32>) -> (tensor<3x5xf32>, tensor<15xf32>, tensor<3x5xf32>, tensor<5x3xf32>, tensor<15xf32>) {
  %e = nn.exp %x : tensor<3x5xf32>
  %n = nn.neg %e : tensor<3x5xf32>
  %r = nn.reshape %n : tensor<3x5xf32> -> tensor<15xf32>
  %t = nn.transpose %e [1, 0] : tensor<3x5xf32> -> tensor<5x3xf32>
  %rx = nn.reshape %x : tensor<3x5xf32> -> tensor<15xf32>
  func.return %x, %r, %e, %t, %rx : tensor<3x5xf32>, tensor<15xf32>, tensor<3x5xf32>, tensor<5x3xf32>, tensor<15xf32>
}

// -----

// Dual GEMM (gate and up projections share x): one K loop loads the A tile once and
// keeps one f32 accumulator per matmul (two iter_args); BN is capped at 64.
// CHECK-LABEL: tile.kernel @gate_up grid 1
// CHECK-SAME:  (%[[X:.*]]: memref<40x24xbf16>, %[[G:.*]]: memref<96x24xbf16>, %[[U:.*]]: memref<96x24xbf16>, %[[O:.*]]: memref<40x96xbf16>)
// CHECK-SAME:  block_sizes = array<i64: 64, 64>
// CHECK:       %[[ACC1:.*]], %[[ACC2:.*]] = scf.for %[[K:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[C1:.*]] = %{{.*}}, %[[C2:.*]] = %{{.*}}) -> (tensor<64x64xf32>, tensor<64x64xf32>) {
// CHECK-NEXT:    %[[TA:.*]] = tile.load %[[X]][%{{.*}}, %[[K]]] : memref<40x24xbf16> -> tensor<64x32xbf16>
// CHECK-NEXT:    tile.load %[[G]][%{{.*}}, %[[K]]]
// CHECK-NEXT:    %[[TG:.*]] = tile.transpose
// CHECK-NEXT:    %[[D1:.*]] = tile.dot %[[TA]], %[[TG]], %[[C1]]
// CHECK-NEXT:    tile.load %[[U]][%{{.*}}, %[[K]]]
// CHECK-NEXT:    %[[TU:.*]] = tile.transpose
// CHECK-NEXT:    %[[D2:.*]] = tile.dot %[[TA]], %[[TU]], %[[C2]]
// CHECK-NEXT:    scf.yield %[[D1]], %[[D2]] : tensor<64x64xf32>, tensor<64x64xf32>
// CHECK:       %[[R1:.*]] = nn.cast %[[ACC1]]
// CHECK-NEXT:  %[[R2:.*]] = nn.cast %[[ACC2]]
// CHECK-NEXT:  %[[S:.*]] = nn.silu %[[R1]]
// CHECK-NEXT:  %[[P:.*]] = nn.mul %[[S]], %[[R2]]
// CHECK-NEXT:  tile.store %[[P]], %[[O]]
// CHECK:       tile.launch @gate_up grid [2]
func.func @dual_gemm(%x: tensor<40x24xbf16>, %wg: tensor<96x24xbf16>, %wu: tensor<96x24xbf16>) -> tensor<40x96xbf16> {
  %0 = nn.fusion ins(%x, %wg, %wu : tensor<40x24xbf16>, tensor<96x24xbf16>, tensor<96x24xbf16>) -> tensor<40x96xbf16> attributes {kernel_name = "gate_up", kind = "matmul", route = "kernel"} {
  ^bb0(%a: tensor<40x24xbf16>, %g: tensor<96x24xbf16>, %u: tensor<96x24xbf16>):
    %gate = nn.matmul %a, %g transpose_b : tensor<40x24xbf16>, tensor<96x24xbf16> -> tensor<40x96xbf16>
    %up = nn.matmul %a, %u transpose_b : tensor<40x24xbf16>, tensor<96x24xbf16> -> tensor<40x96xbf16>
    %s = nn.silu %gate : tensor<40x96xbf16>
    %p = nn.mul %s, %up : tensor<40x96xbf16>
    nn.yield %p : tensor<40x96xbf16>
  }
  func.return %0 : tensor<40x96xbf16>
}

// -----

// Slices and a concat (RMS normalization, then rotate-half): the cut axis is split
// into parts of 8 columns, the iteration dim has size 8 and the parts are unrolled:
// part 1 of a buffer is the box at column offset 8. The row's sum of squares combines
// both parts; the concat is two stores. One kernel, the input read once. With forced
// block-cols=16 the column block shrinks to 8 so parts never overlap.
// CHECK-LABEL: tile.kernel @norm_rotary grid 1
// CHECK-SAME:  (%[[X:.*]]: memref<4x16xf32>, %{{.*}}: memref<8xf32>, %{{.*}}: memref<8xf32>, %[[O:.*]]: memref<4x16xf32>)
// CHECK-SAME:  schedule = "row_reduction", iteration_sizes = array<i64: 4, 8>, block_sizes = array<i64: 4, 8>
// CHECK:       %[[A:.*]] = tile.load %[[X]][%[[Z:.*]], %[[Z]]] : memref<4x16xf32> -> tensor<4x8xf32>
// CHECK:       %[[S0:.*]] = tile.reduce sum %{{.*}} axis 1 : tensor<4x8xf32> -> tensor<4xf32>
// CHECK-NEXT:  %[[H:.*]] = arith.addi %[[Z]], %{{.*}} : index
// CHECK-NEXT:  %[[B:.*]] = tile.load %[[X]][%[[Z]], %[[H]]] : memref<4x16xf32> -> tensor<4x8xf32>
// CHECK:       %[[S1:.*]] = tile.reduce sum %{{.*}} axis 1 : tensor<4x8xf32> -> tensor<4xf32>
// CHECK-NEXT:  nn.add %[[S0]], %[[S1]] : tensor<4xf32>
// CHECK:       tile.store %{{.*}}, %[[O]][%[[Z]], %[[Z]]] : tensor<4x8xf32>, memref<4x16xf32>
// CHECK:       tile.store %{{.*}}, %[[O]][%[[Z]], %[[H]]] : tensor<4x8xf32>, memref<4x16xf32>
// CHECK-NOT:   tile.kernel
// CHECK-LABEL: func.func @rotary
// FORCED-LABEL: tile.kernel @norm_rotary
// FORCED-SAME:  schedule = "row_reduction", iteration_sizes = array<i64: 4, 8>, block_sizes = array<i64: 2, 8>
func.func @rotary(%x: tensor<4x16xf32>, %c: tensor<8xf32>, %s: tensor<8xf32>) -> tensor<4x16xf32> {
  %0 = nn.fusion ins(%x, %c, %s : tensor<4x16xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x16xf32> attributes {kernel_name = "norm_rotary", kind = "reduction", route = "kernel"} {
  ^bb0(%a: tensor<4x16xf32>, %cos: tensor<8xf32>, %sin: tensor<8xf32>):
    %sq = nn.mul %a, %a : tensor<4x16xf32>
    %ss = nn.sum %sq [1] keepdim : tensor<4x16xf32> -> tensor<4x1xf32>
    %r = nn.rsqrt %ss : tensor<4x1xf32>
    %rb = nn.broadcast %r : tensor<4x1xf32> -> tensor<4x16xf32>
    %y = nn.mul %a, %rb : tensor<4x16xf32>
    %y1 = nn.slice %y [0:4, 0:8] : tensor<4x16xf32> -> tensor<4x8xf32>
    %y2 = nn.slice %y [0:4, 8:16] : tensor<4x16xf32> -> tensor<4x8xf32>
    %cb = nn.broadcast %cos : tensor<8xf32> -> tensor<4x8xf32>
    %sb = nn.broadcast %sin : tensor<8xf32> -> tensor<4x8xf32>
    %p = nn.mul %y1, %cb : tensor<4x8xf32>
    %q = nn.mul %y2, %sb : tensor<4x8xf32>
    %o1 = nn.sub %p, %q : tensor<4x8xf32>
    %u = nn.mul %y2, %cb : tensor<4x8xf32>
    %v = nn.mul %y1, %sb : tensor<4x8xf32>
    %o2 = nn.add %u, %v : tensor<4x8xf32>
    %o = nn.concat %o1, %o2 axis 1 : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x16xf32>
    nn.yield %o : tensor<4x16xf32>
  }
  func.return %0 : tensor<4x16xf32>
}

// -----

// A hand-written fusion that does not tile whole (a strided slice inside; nn-fuse never
// forms one) is split into runs of consecutive ops that do: pointwise, the slice alone
// (whole_tensor), pointwise; values crossing runs go through tile.alloc temporaries.
// CHECK-LABEL: tile.kernel @chain grid 1
// CHECK-SAME:  schedule = "pointwise"
// CHECK:       nn.exp
// CHECK:       tile.broadcast
// CHECK:       nn.add
// CHECK-LABEL: tile.kernel @chain_1 grid 1
// CHECK-SAME:  schedule = "whole_tensor"
// CHECK:       nn.slice
// CHECK-LABEL: tile.kernel @chain_2 grid 1
// CHECK-SAME:  schedule = "pointwise"
// CHECK:       nn.neg
// CHECK:       nn.mul
// CHECK-LABEL: func.func @split_group
// CHECK-NEXT:  %[[T1:.*]] = tile.alloc : memref<4x8xf32>
// CHECK-NEXT:  tile.launch @chain grid [1] (%{{.*}}, %{{.*}}, %[[T1]])
// CHECK-NEXT:  %[[T2:.*]] = tile.alloc : memref<4x4xf32>
// CHECK-NEXT:  tile.launch @chain_1 grid [1] (%[[T1]], %[[T2]])
// CHECK-NEXT:  tile.launch @chain_2 grid [1] (%[[T2]], %{{.*}})
func.func @split_group(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x4xf32> {
  %0 = nn.fusion ins(%x, %b : tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x4xf32> attributes {kernel_name = "chain", kind = "pointwise", route = "kernel"} {
  ^bb0(%a: tensor<4x8xf32>, %c: tensor<8xf32>):
    %e = nn.exp %a : tensor<4x8xf32>
    %cb = nn.broadcast %c : tensor<8xf32> -> tensor<4x8xf32>
    %s = nn.add %e, %cb : tensor<4x8xf32>
    %t = nn.slice %s [0:4, 0:8:2] : tensor<4x8xf32> -> tensor<4x4xf32>
    %n = nn.neg %t : tensor<4x4xf32>
    %h = nn.constant 0.5 : tensor<4x4xf32>
    %m = nn.mul %n, %h : tensor<4x4xf32>
    nn.yield %m : tensor<4x4xf32>
  }
  func.return %0 : tensor<4x4xf32>
}

// -----

// What nn-fuse leaves unfused costs what eager costs: a bypassed matmul is the library's
// GEMM (tile.gemm, reading the weight transposed, no copy), and a broadcast read only by
// unfused elementwise ops has no buffer or kernel of its own: the add reads it as
// indexing. One kernel (the add) besides the GEMM.
// CHECK-LABEL: tile.kernel @bypassed_add grid 1
// CHECK:       nn.add
// CHECK-NOT:   tile.kernel
// CHECK-LABEL: func.func @bypassed
// CHECK-SAME:  (%[[X:.*]]: memref<8x32xbf16>, %[[W:.*]]: memref<16x32xbf16>, %[[B:.*]]: memref<16xbf16>, %[[O:.*]]: memref<8x16xbf16> {tile.output})
// CHECK-NEXT:  %[[T:.*]] = tile.alloc : memref<8x16xbf16>
// CHECK-NEXT:  tile.gemm %[[X]], %[[W]] into %[[T]] transpose_b
// CHECK-NEXT:  tile.launch @bypassed_add grid [1] (%[[T]], %[[B]], %[[O]])
// CHECK-NEXT:  func.return
func.func @bypassed(%x: tensor<8x32xbf16>, %w: tensor<16x32xbf16>, %b: tensor<16xbf16>) -> tensor<8x16xbf16> {
  %m = nn.matmul %x, %w transpose_b : tensor<8x32xbf16>, tensor<16x32xbf16> -> tensor<8x16xbf16>
  %bb = nn.broadcast %b : tensor<16xbf16> -> tensor<8x16xbf16>
  %r = nn.add %m, %bb : tensor<8x16xbf16>
  func.return %r : tensor<8x16xbf16>
}

// -----

// A looped LayerNorm: the mean and the variance share the first loop, per lane
// (Welford on each lane's elements less its pilot, its first element, weighted by one
// reciprocal of the row's step count: no tile.reduce in the loop); after it the lanes
// combine (a ragged last chunk's lanes count one step fewer, from its mask) and the
// second loop normalizes and stores.
// LOOPED-LABEL: tile.kernel @layernorm grid 1
// LOOPED-SAME:  schedule = "row_reduction_looped"
// LOOPED:       %[[STEPS:.*]], %[[PILOT:.*]], %[[SHIFTED:.*]], %[[M2:.*]] = scf.for %{{.*}} iter_args(%[[S:.*]] = %{{.*}}, %[[P:.*]] = %{{.*}}, %[[MU:.*]] = %{{.*}}, %[[Q:.*]] = %{{.*}}) -> (tensor<1xf32>, tensor<1x32xf32>, tensor<1x32xf32>, tensor<1x32xf32>) {
// LOOPED:         %[[S2:.*]] = nn.add %[[S]], %{{.*}} : tensor<1xf32>
// LOOPED:         %[[W:.*]] = nn.div %{{.*}}, %[[S2]] : tensor<1xf32>
// LOOPED-NOT:     tile.reduce
// LOOPED:         %[[P2:.*]] = nn.select %{{.*}}, %{{.*}}, %[[P]] : tensor<1x32xf32>
// LOOPED-NOT:     tile.reduce
// LOOPED:         scf.yield %[[S2]], %[[P2]], %{{.*}}, %{{.*}} : tensor<1xf32>, tensor<1x32xf32>, tensor<1x32xf32>, tensor<1x32xf32>
// LOOPED:       tile.mask [%{{.*}}, %{{.*}}] bounds [4, 100] : tensor<1x32xi1>
// LOOPED:       %[[N:.*]] = tile.reduce sum %{{.*}} axis 1 : tensor<1x32xf32> -> tensor<1xf32>
// LOOPED:       %[[LANEMEAN:.*]] = nn.add %[[PILOT]], %[[SHIFTED]] : tensor<1x32xf32>
// LOOPED:       %[[MEAN:.*]] = nn.div %{{.*}}, %[[N]] : tensor<1xf32>
// LOOPED:       tile.reduce sum %[[M2]] axis 1
// LOOPED:       scf.for
// LOOPED:         tile.broadcast %[[MEAN]] dims [0]
// LOOPED:         tile.store
func.func @layer_norm_looped(%x: tensor<4x100xf32>) -> tensor<4x100xf32> {
  %0 = nn.fusion ins(%x : tensor<4x100xf32>) -> tensor<4x100xf32> attributes {kernel_name = "layernorm", kind = "reduction", route = "kernel"} {
  ^bb0(%a: tensor<4x100xf32>):
    %m = nn.mean %a [1] keepdim : tensor<4x100xf32> -> tensor<4x1xf32>
    %mb = nn.broadcast %m : tensor<4x1xf32> -> tensor<4x100xf32>
    %d = nn.sub %a, %mb : tensor<4x100xf32>
    %q = nn.mul %d, %d : tensor<4x100xf32>
    %v = nn.mean %q [1] keepdim : tensor<4x100xf32> -> tensor<4x1xf32>
    %eps = nn.constant 1.0e-05 : tensor<4x1xf32>
    %ve = nn.add %v, %eps : tensor<4x1xf32>
    %r = nn.rsqrt %ve : tensor<4x1xf32>
    %rb = nn.broadcast %r : tensor<4x1xf32> -> tensor<4x100xf32>
    %y = nn.mul %d, %rb : tensor<4x100xf32>
    nn.yield %y : tensor<4x100xf32>
  }
  func.return %0 : tensor<4x100xf32>
}

// -----

// Batched matmul + epilogue: the batch is an iteration dim of its own (one block of 1),
// programs cover batch x M tiles x N tiles (3 x 1 x 1 here); operand tiles are loaded
// at the batch index, and the matmul's candidate configurations are recorded.
// CHECK-LABEL: tile.kernel @bmm_relu grid 1
// CHECK-SAME:  schedule = "matmul", iteration_sizes = array<i64: 3, 40, 50>, block_sizes = array<i64: 1, 64, 64>, block_k = 32 : i64, group_m = 8 : i64
// CHECK-SAME:  candidates = [{"block-m" = 128 : i64, "block-n" = 128 : i64, "block-k" = 64 : i64}, {"block-m" = 128 : i64, "block-n" = 64 : i64, "block-k" = 64 : i64}, {"block-m" = 64 : i64, "block-n" = 128 : i64, "block-k" = 64 : i64}, {"block-m" = 64 : i64, "block-n" = 64 : i64, "block-k" = 32 : i64}, {"block-m" = 128 : i64, "block-n" = 256 : i64, "block-k" = 64 : i64}]
// CHECK:       tile.program_id 0
// CHECK:       scf.for %[[K:.*]] = %{{.*}} iter_args(%{{.*}} = %{{.*}}) -> (tensor<64x64xf32>) {
// CHECK-NEXT:    tile.load %{{.*}}[%[[BATCH:[0-9]+]], %{{.*}}, %[[K]]] : memref<3x40x24xbf16> -> tensor<64x32xbf16>
// CHECK-NEXT:    tile.load %{{.*}}[%[[BATCH]], %[[K]], %{{.*}}] : memref<3x24x50xbf16> -> tensor<32x64xbf16>
// CHECK-NEXT:    tile.dot
// CHECK:       nn.relu
// CHECK-NEXT:  tile.store %{{.*}}, %{{.*}}[%[[BATCH]], %{{.*}}, %{{.*}}] : tensor<64x64xbf16>, memref<3x40x50xbf16>
// CHECK:       tile.launch @bmm_relu grid [3]
func.func @batched(%x: tensor<3x40x24xbf16>, %w: tensor<3x24x50xbf16>) -> tensor<3x40x50xbf16> {
  %0 = nn.fusion ins(%x, %w : tensor<3x40x24xbf16>, tensor<3x24x50xbf16>) -> tensor<3x40x50xbf16> attributes {kernel_name = "bmm_relu", kind = "matmul", route = "kernel"} {
  ^bb0(%a: tensor<3x40x24xbf16>, %b: tensor<3x24x50xbf16>):
    %p = nn.matmul %a, %b : tensor<3x40x24xbf16>, tensor<3x24x50xbf16> -> tensor<3x40x50xbf16>
    %r = nn.relu %p : tensor<3x40x50xbf16>
    nn.yield %r : tensor<3x40x50xbf16>
  }
  func.return %0 : tensor<3x40x50xbf16>
}

// -----

// A matmul operand the epilogue also reads (an outer product, K = 1, plus x broadcast
// over N): the kernel takes x twice, in the K loop's view [batch, M, K] and in the
// epilogue's [batch, M]; the launch passes the same buffer to both.
// CHECK-LABEL: tile.kernel @outer_plus_x grid 1
// CHECK-SAME:  (%[[XK:.*]]: memref<3x40x1xf32>, %[[W:.*]]: memref<1x50xf32>, %[[XE:.*]]: memref<3x40xf32>, %[[O:.*]]: memref<3x40x50xf32>)
// CHECK:       scf.for
// CHECK-NEXT:    tile.load %[[XK]][%[[BATCH:[0-9]+]], %[[M:[0-9]+]], %{{.*}}] : memref<3x40x1xf32>
// CHECK:       tile.load %[[XE]][%[[BATCH]], %[[M]]] : memref<3x40xf32> -> tensor<64xf32>
// CHECK-NEXT:  tile.broadcast
// CHECK-NEXT:  nn.add
// CHECK:       tile.launch @outer_plus_x grid [3] (%[[X:.*]], %{{.*}}, %[[X]], %{{.*}})
func.func @operand_in_epilogue(%x: tensor<3x40x1xf32>, %w: tensor<1x50xf32>) -> tensor<3x40x50xf32> {
  %0 = nn.fusion ins(%x, %w : tensor<3x40x1xf32>, tensor<1x50xf32>) -> tensor<3x40x50xf32> attributes {kernel_name = "outer_plus_x", kind = "matmul", route = "kernel"} {
  ^bb0(%a: tensor<3x40x1xf32>, %b: tensor<1x50xf32>):
    %p = nn.matmul %a, %b : tensor<3x40x1xf32>, tensor<1x50xf32> -> tensor<3x40x50xf32>
    %e = nn.broadcast %a : tensor<3x40x1xf32> -> tensor<3x40x50xf32>
    %y = nn.add %p, %e : tensor<3x40x50xf32>
    nn.yield %y : tensor<3x40x50xf32>
  }
  func.return %0 : tensor<3x40x50xf32>
}

// -----

// A transpose of outer dims inside a pointwise group (attention's [b, s, h, d] ->
// [b, h, s, d]): tiles stay in the iteration (output) order and cover the longest
// suffix of dims (up to 4) that every buffer holds as its own last axes, here all of
// (b, h, s, d): the input is loaded as a [b, s, h, d] box (long contiguous runs of
// h x d) and turned into the iteration order; the transpose itself emits nothing.
// CHECK-LABEL: tile.kernel @rope_heads grid 1
// CHECK-SAME:  (%[[A:.*]]: memref<2x5x3x16xbf16>, %[[B:.*]]: memref<2x3x5x16xbf16>, %[[O:.*]]: memref<2x3x5x16xbf16>)
// CHECK-SAME:  schedule = "pointwise", iteration_sizes = array<i64: 2, 3, 5, 16>, block_sizes = array<i64: 2, 4, 8, 16>
// CHECK:       %[[X:.*]] = tile.load %[[A]][%[[N:[0-9]+]], %{{.*}}, %{{.*}}, %{{.*}}] : memref<2x5x3x16xbf16> -> tensor<2x8x4x16xbf16>
// CHECK-NEXT:  %[[XT:.*]] = tile.transpose %[[X]] [0, 2, 1, 3] : tensor<2x8x4x16xbf16> -> tensor<2x4x8x16xbf16>
// CHECK-NEXT:  tile.load %[[B]][%[[N]], %{{.*}}, %{{.*}}, %{{.*}}] : memref<2x3x5x16xbf16> -> tensor<2x4x8x16xbf16>
// CHECK-NEXT:  nn.mul
// CHECK-NEXT:  tile.store %{{.*}}, %[[O]][%[[N]], %{{.*}}, %{{.*}}, %{{.*}}] : tensor<2x4x8x16xbf16>
// CHECK:       tile.launch @rope_heads grid [1]
func.func @head_transpose(%x: tensor<2x5x3x16xbf16>, %z: tensor<2x3x5x16xbf16>) -> tensor<2x3x5x16xbf16> {
  %0 = nn.fusion ins(%x, %z : tensor<2x5x3x16xbf16>, tensor<2x3x5x16xbf16>) -> tensor<2x3x5x16xbf16> attributes {kernel_name = "rope_heads", kind = "pointwise", route = "kernel"} {
  ^bb0(%a: tensor<2x5x3x16xbf16>, %b: tensor<2x3x5x16xbf16>):
    %t = nn.transpose %a [0, 2, 1, 3] : tensor<2x5x3x16xbf16> -> tensor<2x3x5x16xbf16>
    %m = nn.mul %t, %b : tensor<2x3x5x16xbf16>
    nn.yield %m : tensor<2x3x5x16xbf16>
  }
  func.return %0 : tensor<2x3x5x16xbf16>
}

// -----

// A column reduction (over the first of two dims) of 300 rows: keeping the column whole
// would leave tiles of 6 columns (24-byte rows), so the tile takes whole sectors of
// columns and the program loops over the rows, masked at 300 and at 200 columns: 64
// columns would give 4 programs, so the block narrows to 16 (13 programs, 64-byte rows)
// and 128 rows per step. The loop accumulates whole 128x16 tiles (out-of-bounds rows
// replaced by the identity) and reduces once after it: no cross-thread reduction per
// iteration.
// CHECK-LABEL: tile.kernel @columns_sum grid 1
// CHECK-SAME:  schedule = "row_reduction_looped", iteration_sizes = array<i64: 300, 200>, block_sizes = array<i64: 128, 16>, reduce_dim = 0 : i64
// CHECK-SAME:  candidates = [{"block-cols" = 32 : i64, "block-rows" = 64 : i64}
// CHECK:       %[[ZERO:.*]] = nn.constant 0.000000e+00 : tensor<128x16xf32>
// CHECK:       %[[ACC:.*]] = scf.for %[[R:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[A:.*]] = %[[ZERO]]) -> (tensor<128x16xf32>)
// CHECK:       %[[T:.*]] = tile.load %{{.*}}[%[[R]], %{{.*}}] : memref<300x200xf32> -> tensor<128x16xf32>
// CHECK:       %[[M:.*]] = tile.mask
// CHECK:       %[[S:.*]] = nn.select %[[M]], %[[T]], %{{.*}} : tensor<128x16xf32>
// CHECK:       %[[N:.*]] = nn.add %[[A]], %[[S]] : tensor<128x16xf32>
// CHECK-NEXT:  scf.yield %[[N]] : tensor<128x16xf32>
// CHECK:       tile.reduce sum %[[ACC]] axis 0 : tensor<128x16xf32> -> tensor<16xf32>
// CHECK-LABEL: func.func @columns
// CHECK:       tile.launch @columns_sum grid [13]
func.func @columns(%x: tensor<300x200xf32>) -> tensor<200xf32> {
  %s = nn.sum %x [0] : tensor<300x200xf32> -> tensor<200xf32>
  func.return %s : tensor<200xf32>
}

// -----

// An unfused slice that is one contiguous run of its operand's buffer (whole trailing
// dims, one index on the dims before its last cut) and starts 16-byte aligned is a host
// view at an element offset, no kernel. A run that starts misaligned (i64 element 1) is
// read in place by the kernel adding one to it: it gets %x itself as a strided view at
// offset 1. A slice that is returned (columns of a matrix) is a one-program copy. A run
// at offset 0 with fewer elements (the first rows) carries its offset too: it is not a
// reshape.
// CHECK:       tile.kernel @[[ODD:.*]] grid 1 (%{{.*}}: memref<36xi64, strided<[1], offset: 1>>, %{{.*}}: memref<36xi64>)
// CHECK-LABEL: func.func @contiguous_slices
// CHECK-SAME:  (%[[X:.*]]: memref<1x37xi64>, %[[M:.*]]: memref<6x8xf32>
// CHECK:       %[[TAIL:.*]] = tile.view %[[X]] {offset = 2 : i64} : memref<1x37xi64> -> memref<1x35xi64>
// CHECK-NOT:   tile.launch @contiguous_slices_slice
// CHECK:       tile.launch @[[ODD]] grid [1] (%[[X]], %{{.*}}) : memref<1x37xi64>, memref<1x36xi64>
// CHECK:       %[[ROWS:.*]] = tile.view %[[M]] {offset = 16 : i64} : memref<6x8xf32> -> memref<3x8xf32>
// CHECK:       %[[ROW:.*]] = tile.view %[[M]] {offset = 44 : i64} : memref<6x8xf32> -> memref<1x3xf32>
// CHECK-NEXT:  tile.view %[[ROW]] : memref<1x3xf32> -> memref<3xf32>
// CHECK:       tile.view %[[M]] {offset = 0 : i64} : memref<6x8xf32> -> memref<2x8xf32>
// CHECK:       tile.launch @contiguous_slices_slice grid [1] (%[[M]], %{{.*}})
func.func @contiguous_slices(%x: tensor<1x37xi64>, %m: tensor<6x8xf32>) -> (tensor<1x35xi64>, tensor<1x36xi64>, tensor<3x8xf32>, tensor<3xf32>, tensor<2x8xf32>, tensor<6x2xf32>) {
  %tail = nn.slice %x [0:1, 2:37] : tensor<1x37xi64> -> tensor<1x35xi64>
  %one = nn.constant 1 : tensor<1x35xi64>
  %a = nn.add %tail, %one : tensor<1x35xi64>
  %odd = nn.slice %x [0:1, 1:37] : tensor<1x37xi64> -> tensor<1x36xi64>
  %one36 = nn.constant 1 : tensor<1x36xi64>
  %a2 = nn.add %odd, %one36 : tensor<1x36xi64>
  %rows = nn.slice %m [2:5, 0:8] : tensor<6x8xf32> -> tensor<3x8xf32>
  %two = nn.constant 2.0 : tensor<3x8xf32>
  %b = nn.mul %rows, %two : tensor<3x8xf32>
  %row = nn.slice %m [5:6, 4:7] : tensor<6x8xf32> -> tensor<1x3xf32>
  %part = nn.reshape %row : tensor<1x3xf32> -> tensor<3xf32>
  %three = nn.constant 3.0 : tensor<3xf32>
  %c = nn.mul %part, %three : tensor<3xf32>
  %head = nn.slice %m [0:2, 0:8] : tensor<6x8xf32> -> tensor<2x8xf32>
  %w = nn.constant 0.5 : tensor<8x8xf32>
  %d = nn.matmul %head, %w : tensor<2x8xf32>, tensor<8x8xf32> -> tensor<2x8xf32>
  %cols = nn.slice %m [0:6, 1:3] : tensor<6x8xf32> -> tensor<6x2xf32>
  func.return %a, %a2, %b, %c, %d, %cols : tensor<1x35xi64>, tensor<1x36xi64>, tensor<3x8xf32>, tensor<3xf32>, tensor<2x8xf32>, tensor<6x2xf32>
}

// -----

// Two reductions of different inputs over the same rows share the reduce dim (their
// reduced axes tied by `_tie_sibling_reductions`): one load and one sum of each, per
// row; looped, one accumulator each.
// CHECK-LABEL: tile.kernel @fused_0_sibling_sums
// CHECK-SAME:    schedule = "row_reduction"
// CHECK:         %[[A:.*]] = tile.load %0
// CHECK:         tile.reduce sum %[[A]] axis 1
// CHECK:         %[[B:.*]] = tile.load %1
// CHECK:         tile.reduce sum %[[B]] axis 1
// CHECK:         nn.div
// LOOPED-LABEL: tile.kernel @fused_0_sibling_sums
// LOOPED-SAME:    schedule = "row_reduction_looped"
// LOOPED:         scf.for {{.*}} iter_args(%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}})
// LOOPED:         tile.reduce sum
// LOOPED:         tile.reduce sum
// LOOPED:         nn.div
func.func @sibling_sums(%a: tensor<8x64xf32>, %b: tensor<8x64xf32>) -> tensor<8xf32> {
  %r = nn.fusion ins(%a, %b : tensor<8x64xf32>, tensor<8x64xf32>) -> tensor<8xf32> attributes {kernel_name = "fused_0_sibling_sums", kind = "reduction", route = "kernel"} {
  ^bb0(%x: tensor<8x64xf32>, %y: tensor<8x64xf32>):
    %sa = nn.sum %x [1] : tensor<8x64xf32> -> tensor<8xf32>
    %sb = nn.sum %y [1] : tensor<8x64xf32> -> tensor<8xf32>
    %q = nn.div %sa, %sb : tensor<8xf32>
    nn.yield %q : tensor<8xf32>
  }
  func.return %r : tensor<8xf32>
}

// -----

// Reduced axes listed out of order ([2, 1]) pair by axis index with the other
// reduction's ([1, 2]): one kernel (pairing them in list order merged two classes).
// CHECK-LABEL: tile.kernel @fused_0_unsorted_axes
// CHECK-SAME:    schedule = "row_reduction"
// CHECK-NOT:   tile.kernel
func.func @unsorted_axes(%a: tensor<4x8x8xf32>) -> tensor<4xf32> {
  %r = nn.fusion ins(%a : tensor<4x8x8xf32>) -> tensor<4xf32> attributes {kernel_name = "fused_0_unsorted_axes", kind = "reduction", route = "kernel"} {
  ^bb0(%x: tensor<4x8x8xf32>):
    %y = nn.exp %x : tensor<4x8x8xf32>
    %s1 = nn.sum %x [1, 2] : tensor<4x8x8xf32> -> tensor<4xf32>
    %s2 = nn.sum %y [2, 1] : tensor<4x8x8xf32> -> tensor<4xf32>
    %q = nn.div %s1, %s2 : tensor<4xf32>
    nn.yield %q : tensor<4xf32>
  }
  func.return %r : tensor<4xf32>
}
