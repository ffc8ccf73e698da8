// RUN: fuse-opt %s --split-input-file -p nn-split-reductions,canonicalize,cse | filecheck %s
// RUN: fuse-opt %s --split-input-file -p 'nn-split-reductions{min-length=8 min-chunk=4 max-chunk=4 programs=2}' | filecheck %s --check-prefix=SMALL

// A loss reduced to a scalar: 2^20 elements in 1024 chunks of 1024 (about four programs
// per SM in stage one); the elementwise prologue is rebuilt on the split shape (so it
// fuses into stage one) and the partials are f32.
// CHECK-LABEL: func.func @mse
// CHECK:         %[[A:.*]] = nn.reshape %a : tensor<1048576xbf16> -> tensor<1024x1024xbf16>
// CHECK:         %[[B:.*]] = nn.reshape %b : tensor<1048576xbf16> -> tensor<1024x1024xbf16>
// CHECK:         %[[D:.*]] = nn.sub %[[A]], %[[B]] : tensor<1024x1024xbf16>
// CHECK:         %[[S:.*]] = nn.mul %[[D]], %[[D]] : tensor<1024x1024xbf16>
// CHECK:         %[[W:.*]] = nn.cast %[[S]] : tensor<1024x1024xbf16> -> tensor<1024x1024xf32>
// CHECK:         %[[P:.*]] = nn.mean %[[W]] [1] : tensor<1024x1024xf32> -> tensor<1024xf32>
// CHECK:         %[[T:.*]] = nn.mean %[[P]] [0] : tensor<1024xf32> -> tensor<f32>
// CHECK:         %[[R:.*]] = nn.cast %[[T]] : tensor<f32> -> tensor<bf16>
// CHECK:         func.return %[[R]]
func.func @mse(%a: tensor<1048576xbf16>, %b: tensor<1048576xbf16>) -> tensor<bf16> {
  %d = nn.sub %a, %b : tensor<1048576xbf16>
  %s = nn.mul %d, %d : tensor<1048576xbf16>
  %m = nn.mean %s [0] : tensor<1048576xbf16> -> tensor<bf16>
  func.return %m : tensor<bf16>
}

// -----

// Few long rows with keepdim: max stays in its type; the reduced axes come back as 1.
// CHECK-LABEL: func.func @few_rows
// CHECK:         %[[V:.*]] = nn.reshape %x : tensor<4x64x4096xf32> -> tensor<4x256x1024xf32>
// CHECK:         %[[P:.*]] = nn.reduce_max %[[V]] [2] : tensor<4x256x1024xf32> -> tensor<4x256xf32>
// CHECK:         %[[T:.*]] = nn.reduce_max %[[P]] [1] : tensor<4x256xf32> -> tensor<4xf32>
// CHECK:         nn.reshape %[[T]] : tensor<4xf32> -> tensor<4x1x1xf32>
func.func @few_rows(%x: tensor<4x64x4096xf32>) -> tensor<4x1x1xf32> {
  %m = nn.reduce_max %x [1, 2] keepdim : tensor<4x64x4096xf32> -> tensor<4x1x1xf32>
  func.return %m : tensor<4x1x1xf32>
}

// -----

// Left alone: many rows (one program per row fills the GPU) and short rows.
// CHECK-LABEL: func.func @unchanged
// CHECK-NOT:     nn.reshape
// CHECK:         nn.sum %x [1] : tensor<512x131072xf32> -> tensor<512xf32>
// CHECK:         nn.sum %y [0] : tensor<40000xf32> -> tensor<f32>
func.func @unchanged(%x: tensor<512x131072xf32>, %y: tensor<40000xf32>) -> (tensor<512xf32>, tensor<f32>) {
  %a = nn.sum %x [1] : tensor<512x131072xf32> -> tensor<512xf32>
  %b = nn.sum %y [0] : tensor<40000xf32> -> tensor<f32>
  func.return %a, %b : tensor<512xf32>, tensor<f32>
}

// -----

// A prime row length splits ragged: 98 chunks of 1024 overhang 100003 by 349. The
// input is read through a take at positions clamped into the row (s * 1024 + c, at most
// 100002), and the overhang is masked to the sum's identity before stage one.
// CHECK-LABEL: func.func @prime_length
// CHECK:         %[[S:.*]] = nn.constant dense<{{.*}}> : tensor<98x1xi64>
// CHECK:         %[[C:.*]] = nn.constant dense<{{.*}}> : tensor<1x1024xi64>
// CHECK:         %[[P:.*]] = nn.add
// CHECK:         %[[LAST:.*]] = nn.constant 100002 : tensor<98x1024xi64>
// CHECK:         %[[IN:.*]] = nn.min %[[P]], %[[LAST]] : tensor<98x1024xi64>
// CHECK:         %[[X:.*]] = nn.take %w, %[[IN]] : tensor<100003xf32>, tensor<98x1024xi64> -> tensor<98x1024xf32>
// CHECK:         %[[N:.*]] = nn.constant 100003 : tensor<98x1024xi64>
// CHECK:         %[[M:.*]] = nn.compare lt, %[[P]], %[[N]] : tensor<98x1024xi64>
// CHECK:         %[[Z:.*]] = nn.constant 0.000000e+00 : tensor<98x1024xf32>
// CHECK:         %[[V:.*]] = nn.select %[[M]], %[[X]], %[[Z]] : tensor<98x1024xf32>
// CHECK:         %[[Q:.*]] = nn.sum %[[V]] [1] : tensor<98x1024xf32> -> tensor<98xf32>
// CHECK:         nn.sum %[[Q]] [0] : tensor<98xf32> -> tensor<f32>
// SMALL-LABEL: func.func @prime_length
// SMALL:         nn.take %w
// SMALL:         nn.reduce_max {{.*}} [1] : tensor<4x4xf32> -> tensor<4xf32>
// SMALL:         nn.reduce_max {{.*}} [0] : tensor<4xf32> -> tensor<f32>
func.func @prime_length(%w: tensor<100003xf32>, %v: tensor<13xf32>) -> (tensor<f32>, tensor<f32>) {
  %d = nn.sum %w [0] : tensor<100003xf32> -> tensor<f32>
  %e = nn.reduce_max %v [0] : tensor<13xf32> -> tensor<f32>
  func.return %d, %e : tensor<f32>, tensor<f32>
}

// -----

// A row length that is not a power of two splits by a divisor: a Llama 3 vocabulary of
// 128256 into 64 chunks of 2004 (a 2048 block, 98 % filled; 8 x 64 = 512 programs), and
// 100001 = 11 x 9091 into 11 chunks (the only divisor in range).
// CHECK-LABEL: func.func @ragged_rows
// CHECK:         nn.reshape %x : tensor<8x128256xf32> -> tensor<8x64x2004xf32>
// CHECK:         nn.reduce_max {{.*}} [2] : tensor<8x64x2004xf32> -> tensor<8x64xf32>
// CHECK:         nn.reduce_max {{.*}} [1] : tensor<8x64xf32> -> tensor<8xf32>
// CHECK:         nn.reshape %w : tensor<100001xf32> -> tensor<11x9091xf32>
func.func @ragged_rows(%x: tensor<8x128256xf32>, %w: tensor<100001xf32>) -> (tensor<8xf32>, tensor<f32>) {
  %a = nn.reduce_max %x [1] : tensor<8x128256xf32> -> tensor<8xf32>
  %d = nn.sum %w [0] : tensor<100001xf32> -> tensor<f32>
  func.return %a, %d : tensor<8xf32>, tensor<f32>
}

// -----

// A column reduction with few outputs (a bias gradient: 4096 sums of 16384 rows, about
// 64 programs of 64 columns) splits its reduced axis into chunks: 16 x 1024 gives stage
// one about 1024 programs; the partials are f32.
// CHECK-LABEL: func.func @bias_gradient
// CHECK:         %[[V:.*]] = nn.reshape %x : tensor<16384x4096xbf16> -> tensor<16x1024x4096xbf16>
// CHECK:         %[[W:.*]] = nn.cast %[[V]] : tensor<16x1024x4096xbf16> -> tensor<16x1024x4096xf32>
// CHECK:         %[[P:.*]] = nn.sum %[[W]] [1] : tensor<16x1024x4096xf32> -> tensor<16x4096xf32>
// CHECK:         %[[T:.*]] = nn.sum %[[P]] [0] : tensor<16x4096xf32> -> tensor<4096xf32>
// CHECK:         nn.cast %[[T]] : tensor<4096xf32> -> tensor<4096xbf16>
func.func @bias_gradient(%x: tensor<16384x4096xbf16>) -> tensor<4096xbf16> {
  %s = nn.sum %x [0] : tensor<16384x4096xbf16> -> tensor<4096xbf16>
  func.return %s : tensor<4096xbf16>
}

// -----

// A middle axis with keepdim: the prologue is rebuilt on the split shape; 16 outputs
// want 4096 chunks, but a chunk keeps at least 256 elements: 256 chunks of 256.
// CHECK-LABEL: func.func @middle_axis
// CHECK:         %[[X:.*]] = nn.reshape %x : tensor<2x65536x8xf32> -> tensor<2x256x256x8xf32>
// CHECK:         %[[Y:.*]] = nn.reshape %y : tensor<2x65536x8xf32> -> tensor<2x256x256x8xf32>
// CHECK:         %[[D:.*]] = nn.sub %[[X]], %[[Y]] : tensor<2x256x256x8xf32>
// CHECK:         %[[P:.*]] = nn.reduce_max %[[D]] [2] : tensor<2x256x256x8xf32> -> tensor<2x256x8xf32>
// CHECK:         %[[T:.*]] = nn.reduce_max %[[P]] [1] : tensor<2x256x8xf32> -> tensor<2x8xf32>
// CHECK:         nn.reshape %[[T]] : tensor<2x8xf32> -> tensor<2x1x8xf32>
func.func @middle_axis(%x: tensor<2x65536x8xf32>, %y: tensor<2x65536x8xf32>) -> tensor<2x1x8xf32> {
  %d = nn.sub %x, %y : tensor<2x65536x8xf32>
  %s = nn.reduce_max %d [1] keepdim : tensor<2x65536x8xf32> -> tensor<2x1x8xf32>
  func.return %s : tensor<2x1x8xf32>
}

// -----

// Any divisor of the reduced count splits a column reduction (a chunk is a loop bound,
// not a block): 3 * 5 * 7 * 1024 rows of 4 columns in 420 chunks of 256 (4 outputs
// want 16384 chunks; 420 is the most that keep 256 elements each).
// CHECK-LABEL: func.func @ragged_columns
// CHECK:         nn.reshape %x : tensor<107520x4xf32> -> tensor<420x256x4xf32>
func.func @ragged_columns(%x: tensor<107520x4xf32>) -> tensor<4xf32> {
  %s = nn.sum %x [0] : tensor<107520x4xf32> -> tensor<4xf32>
  func.return %s : tensor<4xf32>
}

// -----

// Column reductions left alone: many outputs (65536 columns fill the GPU) and a small
// input (64K elements: a second launch costs more than it saves).
// CHECK-LABEL: func.func @columns_unchanged
// CHECK-NOT:     nn.reshape
// CHECK:         nn.sum %x [1] : tensor<64x1024x1024xf32> -> tensor<64x1024xf32>
// CHECK:         nn.sum %y [0] : tensor<1024x64xf32> -> tensor<64xf32>
func.func @columns_unchanged(%x: tensor<64x1024x1024xf32>, %y: tensor<1024x64xf32>) -> (tensor<64x1024xf32>, tensor<64xf32>) {
  %a = nn.sum %x [1] : tensor<64x1024x1024xf32> -> tensor<64x1024xf32>
  %b = nn.sum %y [0] : tensor<1024x64xf32> -> tensor<64xf32>
  func.return %a, %b : tensor<64x1024xf32>, tensor<64xf32>
}

// -----

// A prime reduced count of a column reduction splits ragged: 255 chunks of 257 rows
// (65535 >= 65521), each element read at (min(s * 257 + c, 65520)) * 16 + column; a
// mean becomes a sum of f32 partials times 1 / 65521.
// CHECK-LABEL: func.func @prime_column
// CHECK:         nn.take %a, %{{.*}} : tensor<65521x16xbf16>, tensor<255x257x16xi64> -> tensor<255x257x16xbf16>
// CHECK:         nn.compare lt
// CHECK:         %[[V:.*]] = nn.select {{.*}} : tensor<255x257x16xf32>
// CHECK:         %[[P:.*]] = nn.sum %[[V]] [1] : tensor<255x257x16xf32> -> tensor<255x16xf32>
// CHECK:         %[[T:.*]] = nn.sum %[[P]] [0] : tensor<255x16xf32> -> tensor<16xf32>
// CHECK:         %[[K:.*]] = nn.constant 1.5262282321698386e-05 : tensor<16xf32>
// CHECK:         %[[M:.*]] = nn.mul %[[T]], %[[K]] : tensor<16xf32>
// CHECK:         nn.cast %[[M]] : tensor<16xf32> -> tensor<16xbf16>
func.func @prime_column(%a: tensor<65521x16xbf16>) -> tensor<16xbf16> {
  %c = nn.mean %a [0] : tensor<65521x16xbf16> -> tensor<16xbf16>
  func.return %c : tensor<16xbf16>
}

// -----

// Axes in two runs (the first and the last): one reduction per run, the last run first,
// in f32 between them for a bf16 sum; a max needs no widening; keepdim reshapes at the end.
// CHECK-LABEL: func.func @first_and_last
// CHECK-NEXT:  %[[W:.*]] = nn.cast %{{.*}} : tensor<8x4x16xbf16> -> tensor<8x4x16xf32>
// CHECK-NEXT:  %[[R:.*]] = nn.sum %[[W]] [2] : tensor<8x4x16xf32> -> tensor<8x4xf32>
// CHECK-NEXT:  %[[C:.*]] = nn.sum %[[R]] [0] : tensor<8x4xf32> -> tensor<4xf32>
// CHECK-NEXT:  %[[B:.*]] = nn.cast %[[C]] : tensor<4xf32> -> tensor<4xbf16>
// CHECK-NEXT:  %[[M1:.*]] = nn.reduce_max %{{.*}} [2] : tensor<8x4x16xbf16> -> tensor<8x4xbf16>
// CHECK-NEXT:  %[[M0:.*]] = nn.reduce_max %[[M1]] [0] : tensor<8x4xbf16> -> tensor<4xbf16>
// CHECK-NEXT:  %[[K:.*]] = nn.reshape %[[M0]] : tensor<4xbf16> -> tensor<1x4x1xbf16>
// CHECK-NEXT:  func.return %[[B]], %[[K]]
func.func @first_and_last(%x: tensor<8x4x16xbf16>) -> (tensor<4xbf16>, tensor<1x4x1xbf16>) {
  %s = nn.sum %x [0, 2] : tensor<8x4x16xbf16> -> tensor<4xbf16>
  %m = nn.reduce_max %x [0, 2] keepdim : tensor<8x4x16xbf16> -> tensor<1x4x1xbf16>
  func.return %s, %m : tensor<4xbf16>, tensor<1x4x1xbf16>
}

// -----

// The prologue moves as a whole when its values are used only inside it (|a - b| used
// twice, as smooth-L1 does); a value also used elsewhere (returned here) is computed
// where it is and reshaped there, and only the ops above the reduction that depend on it
// alone are rebuilt.
// CHECK-LABEL: func.func @shared_inside
// CHECK:         %[[A:.*]] = nn.reshape %a : tensor<65536xf32> -> tensor<64x1024xf32>
// CHECK:         %[[B:.*]] = nn.reshape %b : tensor<65536xf32> -> tensor<64x1024xf32>
// CHECK:         %[[D:.*]] = nn.sub %[[A]], %[[B]] : tensor<64x1024xf32>
// CHECK:         %[[AD:.*]] = nn.abs %[[D]] : tensor<64x1024xf32>
// CHECK:         %[[E:.*]] = nn.exp %[[AD]] : tensor<64x1024xf32>
// CHECK:         %[[S:.*]] = nn.add %[[AD]], %[[E]] : tensor<64x1024xf32>
// CHECK:         nn.sum %[[S]] [1] : tensor<64x1024xf32> -> tensor<64xf32>
func.func @shared_inside(%a: tensor<65536xf32>, %b: tensor<65536xf32>) -> tensor<f32> {
  %d = nn.sub %a, %b : tensor<65536xf32>
  %ad = nn.abs %d : tensor<65536xf32>
  %e = nn.exp %ad : tensor<65536xf32>
  %s = nn.add %ad, %e : tensor<65536xf32>
  %m = nn.sum %s [0] : tensor<65536xf32> -> tensor<f32>
  func.return %m : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @shared_outside
// CHECK:         %[[D:.*]] = nn.sub %a, %b : tensor<65536xf32>
// CHECK:         %[[AD:.*]] = nn.abs %[[D]] : tensor<65536xf32>
// CHECK:         %[[R:.*]] = nn.reshape %[[AD]] : tensor<65536xf32> -> tensor<64x1024xf32>
// CHECK:         %[[E:.*]] = nn.exp %[[R]] : tensor<64x1024xf32>
// CHECK:         %[[S:.*]] = nn.add %[[R]], %[[E]] : tensor<64x1024xf32>
// CHECK:         nn.sum %[[S]] [1] : tensor<64x1024xf32> -> tensor<64xf32>
// CHECK:         func.return %{{.*}}, %[[AD]]
func.func @shared_outside(%a: tensor<65536xf32>, %b: tensor<65536xf32>) -> (tensor<f32>, tensor<65536xf32>) {
  %d = nn.sub %a, %b : tensor<65536xf32>
  %ad = nn.abs %d : tensor<65536xf32>
  %e = nn.exp %ad : tensor<65536xf32>
  %s = nn.add %ad, %e : tensor<65536xf32>
  %m = nn.sum %s [0] : tensor<65536xf32> -> tensor<f32>
  func.return %m, %ad : tensor<f32>, tensor<65536xf32>
}

// -----

// A shared value that no kernel stores (read only by elementwise ops and reductions of
// its shape: cross-entropy's per-row weights, read by the loss and by their own sum)
// is rebuilt in the split shape for each reduction, so both read the target through a
// view and nn-fuse makes them one kernel; reshaping it where it is needed a pointwise
// kernel to store it.
// CHECK-LABEL: func.func @shared_unstored
// CHECK-NOT:     nn.reshape %w
// CHECK-DAG:     %[[X:.*]] = nn.reshape %x : tensor<65536xf32> -> tensor<64x1024xf32>
// CHECK-DAG:     %[[T:.*]] = nn.reshape %t : tensor<65536xi64> -> tensor<64x1024xi64>
// CHECK:         %[[IGN:.*]] = nn.compare eq, %[[T]], %{{.*}} : tensor<64x1024xi64>
// CHECK:         %[[W:.*]] = nn.select %[[IGN]], %{{.*}}, %{{.*}} : tensor<64x1024xf32>
// CHECK:         %[[L:.*]] = nn.mul %[[X]], %[[W]] : tensor<64x1024xf32>
// CHECK:         nn.sum %[[L]] [1] : tensor<64x1024xf32> -> tensor<64xf32>
// CHECK:         nn.sum %[[W]] [1] : tensor<64x1024xf32> -> tensor<64xf32>
func.func @shared_unstored(%t: tensor<65536xi64>, %x: tensor<65536xf32>) -> (tensor<f32>, tensor<f32>) {
  %c = nn.constant -100 : tensor<65536xi64>
  %ign = nn.compare eq, %t, %c : tensor<65536xi64>
  %z = nn.constant 0.000000e+00 : tensor<65536xf32>
  %o = nn.constant 1.000000e+00 : tensor<65536xf32>
  %w = nn.select %ign, %z, %o : tensor<65536xf32>
  %l = nn.mul %x, %w : tensor<65536xf32>
  %s1 = nn.sum %l [0] : tensor<65536xf32> -> tensor<f32>
  %s2 = nn.sum %w [0] : tensor<65536xf32> -> tensor<f32>
  func.return %s1, %s2 : tensor<f32>, tensor<f32>
}

// -----

// A shared value that weighs less than what computes it stays where it is: rebuilt, the
// sum would read four inputs; left, it reads `%d`, which the kernel of `-d` also writes.
// CHECK-LABEL: func.func @shared_costly
// CHECK:         %[[D:.*]] = nn.add %ab, %ce : tensor<65536xf32>
// CHECK:         %[[R:.*]] = nn.reshape %[[D]] : tensor<65536xf32> -> tensor<64x1024xf32>
// CHECK:         nn.sum %[[R]] [1] : tensor<64x1024xf32> -> tensor<64xf32>
func.func @shared_costly(%a: tensor<65536xf32>, %b: tensor<65536xf32>, %c: tensor<65536xf32>, %e: tensor<65536xf32>) -> (tensor<f32>, tensor<65536xf32>) {
  %ab = nn.mul %a, %b : tensor<65536xf32>
  %ce = nn.mul %c, %e : tensor<65536xf32>
  %d = nn.add %ab, %ce : tensor<65536xf32>
  %n = nn.neg %d : tensor<65536xf32>
  %s = nn.sum %d [0] : tensor<65536xf32> -> tensor<f32>
  func.return %s, %n : tensor<f32>, tensor<65536xf32>
}

// -----

// A softmax's max and sum of exponentials split as a pair: stage one has each chunk's
// max and its sum of exp(x - max) (-inf read as 0, so a chunk of only -inf sums to 0),
// stage two rescales the chunk sums to the row max. x - max of the whole row is only
// computed by the normalization, which reads the new max.
// CHECK-LABEL: func.func @softmax_pair
// CHECK:         %[[X:.*]] = nn.reshape %x : tensor<2x65536xf32> -> tensor<2x64x1024xf32>
// CHECK:         %[[CM:.*]] = nn.reduce_max %[[X]] [2] keepdim : tensor<2x64x1024xf32> -> tensor<2x64x1xf32>
// CHECK:         %[[NINF:.*]] = nn.constant 0xfff0000000000000 : tensor<2x64x1xf32>
// CHECK:         %[[IS:.*]] = nn.compare eq, %[[CM]], %[[NINF]]
// CHECK:         %[[SAFE:.*]] = nn.select %[[IS]], %{{.*}}, %[[CM]]
// CHECK:         %[[SB:.*]] = nn.broadcast %[[SAFE]] : tensor<2x64x1xf32> -> tensor<2x64x1024xf32>
// CHECK:         %[[E:.*]] = nn.exp %{{.*}} : tensor<2x64x1024xf32>
// CHECK:         %[[CS:.*]] = nn.sum %[[E]] [2] keepdim
// CHECK:         %[[RM:.*]] = nn.reduce_max %[[CM]] [1] keepdim : tensor<2x64x1xf32> -> tensor<2x1x1xf32>
// CHECK:         %[[R:.*]] = nn.exp %{{.*}} : tensor<2x64x1xf32>
// CHECK:         %[[W:.*]] = nn.mul %[[CS]], %[[R]]
// CHECK:         %[[RS:.*]] = nn.sum %[[W]] [1] keepdim : tensor<2x64x1xf32> -> tensor<2x1x1xf32>
// CHECK:         %[[M:.*]] = nn.reshape %[[RM]] : tensor<2x1x1xf32> -> tensor<2x1xf32>
// CHECK:         %[[S:.*]] = nn.reshape %[[RS]] : tensor<2x1x1xf32> -> tensor<2x1xf32>
// CHECK:         nn.broadcast %[[M]] : tensor<2x1xf32> -> tensor<2x65536xf32>
// CHECK:         nn.broadcast %[[S]] : tensor<2x1xf32> -> tensor<2x65536xf32>
// CHECK-NOT:     nn.reduce_max
// CHECK-NOT:     nn.sum
func.func @softmax_pair(%x: tensor<2x65536xf32>) -> tensor<2x65536xf32> {
  %m = nn.reduce_max %x [1] keepdim : tensor<2x65536xf32> -> tensor<2x1xf32>
  %mb = nn.broadcast %m : tensor<2x1xf32> -> tensor<2x65536xf32>
  %d = nn.sub %x, %mb : tensor<2x65536xf32>
  %e = nn.exp %d : tensor<2x65536xf32>
  %s = nn.sum %e [1] keepdim : tensor<2x65536xf32> -> tensor<2x1xf32>
  %sb = nn.broadcast %s : tensor<2x1xf32> -> tensor<2x65536xf32>
  %y = nn.div %e, %sb : tensor<2x65536xf32>
  func.return %y : tensor<2x65536xf32>
}

// -----

// A normalization's row mean (exact for constant rows) and variance split as a pair:
// chunk row-means and squared deviations from them in stage one, read from the bf16
// input (the cast is rebuilt on the split shape; the full-shape one stays for the
// normalization); stage two takes the row mean of the chunk means and adds the spread
// between chunks, C * sum((mc - m)^2), to the chunks' sums (Chan et al.).
// CHECK-LABEL: func.func @variance_pair
// CHECK:         %[[V:.*]] = nn.reshape %x : tensor<2x65536xbf16> -> tensor<2x64x1024xbf16>
// CHECK:         %[[A:.*]] = nn.cast %[[V]] : tensor<2x64x1024xbf16> -> tensor<2x64x1024xf32>
// CHECK:         %[[MEAN:.*]] = nn.mean %[[A]] [2] keepdim
// CHECK:         %[[LO:.*]] = nn.reduce_min %[[A]] [2] keepdim
// CHECK:         %[[HI:.*]] = nn.reduce_max %[[A]] [2] keepdim
// CHECK:         %[[EQ:.*]] = nn.compare eq, %[[LO]], %[[HI]]
// CHECK:         %[[CM:.*]] = nn.select %[[EQ]], %[[LO]], %[[MEAN]] : tensor<2x64x1xf32>
// CHECK:         %[[M2C:.*]] = nn.sum %{{.*}} [2] keepdim : tensor<2x64x1024xf32> -> tensor<2x64x1xf32>
// CHECK:         nn.mean %[[CM]] [1] keepdim : tensor<2x64x1xf32> -> tensor<2x1x1xf32>
// CHECK:         nn.reduce_min %[[CM]] [1] keepdim
// CHECK:         nn.reduce_max %[[CM]] [1] keepdim
// CHECK:         %[[RM:.*]] = nn.select %{{.*}} : tensor<2x1x1xf32>
// CHECK:         %[[BETWEEN:.*]] = nn.sum %{{.*}} [1] keepdim : tensor<2x64x1xf32> -> tensor<2x1x1xf32>
// CHECK:         %[[WITHIN:.*]] = nn.sum %[[M2C]] [1] keepdim : tensor<2x64x1xf32> -> tensor<2x1x1xf32>
// CHECK:         %[[C:.*]] = nn.constant 1.024000e+03 : tensor<2x1x1xf32>
// CHECK:         %[[SPREAD:.*]] = nn.mul %[[BETWEEN]], %[[C]]
// CHECK:         %[[M2:.*]] = nn.add %[[WITHIN]], %[[SPREAD]]
// CHECK:         %[[N:.*]] = nn.constant 6.553600e+04 : tensor<2x1x1xf32>
// CHECK:         %[[VAR:.*]] = nn.div %[[M2]], %[[N]]
// CHECK:         %[[M:.*]] = nn.reshape %[[RM]] : tensor<2x1x1xf32> -> tensor<2x1xf32>
// CHECK:         %[[VR:.*]] = nn.reshape %[[VAR]] : tensor<2x1x1xf32> -> tensor<2x1xf32>
// CHECK:         nn.broadcast %[[M]] : tensor<2x1xf32> -> tensor<2x65536xf32>
// CHECK:         nn.broadcast %[[VR]] : tensor<2x1xf32> -> tensor<2x65536xf32>
// CHECK-NOT:     nn.mean
func.func @variance_pair(%x: tensor<2x65536xbf16>) -> tensor<2x65536xf32> {
  %a = nn.cast %x : tensor<2x65536xbf16> -> tensor<2x65536xf32>
  %mean = nn.mean %a [1] keepdim : tensor<2x65536xf32> -> tensor<2x1xf32>
  %lo = nn.reduce_min %a [1] keepdim : tensor<2x65536xf32> -> tensor<2x1xf32>
  %hi = nn.reduce_max %a [1] keepdim : tensor<2x65536xf32> -> tensor<2x1xf32>
  %c = nn.compare eq, %lo, %hi : tensor<2x1xf32>
  %m = nn.select %c, %lo, %mean : tensor<2x1xf32>
  %mb = nn.broadcast %m : tensor<2x1xf32> -> tensor<2x65536xf32>
  %d = nn.sub %a, %mb : tensor<2x65536xf32>
  %q = nn.mul %d, %d : tensor<2x65536xf32>
  %v = nn.mean %q [1] keepdim : tensor<2x65536xf32> -> tensor<2x1xf32>
  %vb = nn.broadcast %v : tensor<2x1xf32> -> tensor<2x65536xf32>
  %y = nn.mul %d, %vb : tensor<2x65536xf32>
  func.return %y : tensor<2x65536xf32>
}

// -----

// Not a softmax pair: the max over the last two axes without keepdim ([2]) broadcasts
// back along the last axis (nn.broadcast aligns trailing dims), not along its rows, so
// `x - mb` is not a deviation from the row's max; each reduction splits alone.
// CHECK-LABEL: func.func @misaligned_broadcast
// CHECK:         nn.reduce_max %{{.*}} [2] : tensor<2x64x1024xf32> -> tensor<2x64xf32>
// CHECK:         %[[M:.*]] = nn.reduce_max %{{.*}} [1] : tensor<2x64xf32> -> tensor<2xf32>
// CHECK:         nn.broadcast %[[M]] : tensor<2xf32> -> tensor<2x32768x2xf32>
// CHECK-NOT:     nn.compare
// CHECK:         nn.sum %{{.*}} [2] : tensor<2x64x1024xf32> -> tensor<2x64xf32>
func.func @misaligned_broadcast(%x: tensor<2x32768x2xf32>) -> tensor<2xf32> {
  %m = nn.reduce_max %x [1, 2] : tensor<2x32768x2xf32> -> tensor<2xf32>
  %mb = nn.broadcast %m : tensor<2xf32> -> tensor<2x32768x2xf32>
  %d = nn.sub %x, %mb : tensor<2x32768x2xf32>
  %e = nn.exp %d : tensor<2x32768x2xf32>
  %s = nn.sum %e [1, 2] : tensor<2x32768x2xf32> -> tensor<2xf32>
  func.return %s : tensor<2xf32>
}

// -----

// A variance over the columns of a tall input (BatchNorm-style statistics of 16
// features over 65536 rows) splits as a pair too: the reduced axis becomes (S, C) in
// the middle of the shape, chunk statistics reduce C, their combination reduces S.
// CHECK-LABEL: func.func @column_variance_pair
// CHECK:         %[[A:.*]] = nn.reshape %a : tensor<65536x16xf32> -> tensor<256x256x16xf32>
// CHECK:         %[[CM:.*]] = nn.mean %[[A]] [1] keepdim : tensor<256x256x16xf32> -> tensor<256x1x16xf32>
// CHECK:         %[[M2C:.*]] = nn.sum %{{.*}} [1] keepdim : tensor<256x256x16xf32> -> tensor<256x1x16xf32>
// CHECK:         %[[RM:.*]] = nn.mean %[[CM]] [0] keepdim : tensor<256x1x16xf32> -> tensor<1x1x16xf32>
// CHECK:         nn.sum %[[M2C]] [0] keepdim : tensor<256x1x16xf32> -> tensor<1x1x16xf32>
// CHECK:         %[[N:.*]] = nn.constant 6.553600e+04 : tensor<1x1x16xf32>
// CHECK:         %[[VAR:.*]] = nn.div %{{.*}}, %[[N]]
// CHECK:         %[[M:.*]] = nn.reshape %[[RM]] : tensor<1x1x16xf32> -> tensor<1x16xf32>
// CHECK:         %[[VR:.*]] = nn.reshape %[[VAR]] : tensor<1x1x16xf32> -> tensor<1x16xf32>
// CHECK:         nn.broadcast %[[M]] : tensor<1x16xf32> -> tensor<65536x16xf32>
// CHECK:         nn.broadcast %[[VR]] : tensor<1x16xf32> -> tensor<65536x16xf32>
// CHECK-NOT:     nn.mean
func.func @column_variance_pair(%a: tensor<65536x16xf32>) -> tensor<65536x16xf32> {
  %mean = nn.mean %a [0] keepdim : tensor<65536x16xf32> -> tensor<1x16xf32>
  %mb = nn.broadcast %mean : tensor<1x16xf32> -> tensor<65536x16xf32>
  %d = nn.sub %a, %mb : tensor<65536x16xf32>
  %q = nn.mul %d, %d : tensor<65536x16xf32>
  %v = nn.mean %q [0] keepdim : tensor<65536x16xf32> -> tensor<1x16xf32>
  %vb = nn.broadcast %v : tensor<1x16xf32> -> tensor<65536x16xf32>
  %y = nn.mul %d, %vb : tensor<65536x16xf32>
  func.return %y : tensor<65536x16xf32>
}

// -----

// A broadcast the prologue reads is rebuilt from its input in the split shape, so it
// stays indexing in stage one: a LayerNorm weight gradient's per-row mean and rstd
// ([16384, 1], broadcast along the columns) become [16, 1024, 1]; a per-column value
// broadcast along the rows ([4096]) gets (1, 1) for the reduced axis. Reshaped where
// they are, they would be written out whole.
// CHECK-LABEL: func.func @weight_gradient
// CHECK-NOT:     nn.reshape %{{(mb|rb|wb)}}
// CHECK-DAG:     %[[M:.*]] = nn.reshape %mean : tensor<16384x1xf32> -> tensor<16x1024x1xf32>
// CHECK-DAG:     nn.broadcast %[[M]] : tensor<16x1024x1xf32> -> tensor<16x1024x4096xf32>
// CHECK-DAG:     %[[R:.*]] = nn.reshape %rstd : tensor<16384x1xf32> -> tensor<16x1024x1xf32>
// CHECK-DAG:     nn.broadcast %[[R]] : tensor<16x1024x1xf32> -> tensor<16x1024x4096xf32>
// CHECK-DAG:     %[[W:.*]] = nn.reshape %w : tensor<4096xf32> -> tensor<1x1x4096xf32>
// CHECK-DAG:     nn.broadcast %[[W]] : tensor<1x1x4096xf32> -> tensor<16x1024x4096xf32>
// CHECK:         nn.sum %{{.*}} [1] : tensor<16x1024x4096xf32> -> tensor<16x4096xf32>
func.func @weight_gradient(%x: tensor<16384x4096xf32>, %dy: tensor<16384x4096xf32>, %mean: tensor<16384x1xf32>, %rstd: tensor<16384x1xf32>, %w: tensor<4096xf32>) -> tensor<4096xf32> {
  %mb = nn.broadcast %mean : tensor<16384x1xf32> -> tensor<16384x4096xf32>
  %rb = nn.broadcast %rstd : tensor<16384x1xf32> -> tensor<16384x4096xf32>
  %wb = nn.broadcast %w : tensor<4096xf32> -> tensor<16384x4096xf32>
  %d = nn.sub %x, %mb : tensor<16384x4096xf32>
  %xh = nn.mul %d, %rb : tensor<16384x4096xf32>
  %p = nn.mul %dy, %xh : tensor<16384x4096xf32>
  %q = nn.mul %p, %wb : tensor<16384x4096xf32>
  %g = nn.sum %q [0] : tensor<16384x4096xf32> -> tensor<4096xf32>
  func.return %g : tensor<4096xf32>
}

// -----

// An index vector along the reduced axis (positions masked in a loss) is rebuilt in the
// split shape as the sum of one along the chunks (0, 4, 8, 12) and one within a chunk
// (0..3), which kernels compute from their tile indices; reshaped whole it would be a
// constant along two axes, which a kernel writes out (thresholds lowered to split 16).
// SMALL-LABEL: func.func @masked_positions
// SMALL:         %[[S:.*]] = nn.constant dense<{{\[}}[0], [4], [8], [12]]> : tensor<4x1xi64>
// SMALL:         %[[SB:.*]] = nn.broadcast %[[S]] : tensor<4x1xi64> -> tensor<4x4xi64>
// SMALL:         %[[C:.*]] = nn.constant dense<{{\[}}[0, 1, 2, 3]]> : tensor<1x4xi64>
// SMALL:         %[[CB:.*]] = nn.broadcast %[[C]] : tensor<1x4xi64> -> tensor<4x4xi64>
// SMALL:         nn.add %[[SB]], %[[CB]] : tensor<4x4xi64>
// SMALL:         nn.sum %{{.*}} [1] : tensor<4x4xf32> -> tensor<4xf32>
func.func @masked_positions(%x: tensor<16xf32>) -> tensor<f32> {
  %i = nn.constant dense<[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]> : tensor<16xi64>
  %n = nn.constant 10 : tensor<16xi64>
  %keep = nn.compare lt, %i, %n : tensor<16xi64>
  %z = nn.constant 0.0 : tensor<16xf32>
  %m = nn.select %keep, %x, %z : tensor<16xf32>
  %s = nn.sum %m [0] : tensor<16xf32> -> tensor<f32>
  func.return %s : tensor<f32>
}

// -----

// An argmax (the frontend's form) splits as a pair: stage one the max of each chunk and
// the least position holding it (positions offset by the chunk), stage two the same
// over the chunks with those positions, so the input is read once; the extreme and
// the index are never split apart (their stage ones would each read it).
// SMALL-LABEL: func.func @argmax_rows
// SMALL:         %[[A:.*]] = nn.reshape %x : tensor<2x16xf32> -> tensor<2x4x4xf32>
// SMALL:         %[[AT:.*]] = nn.add
// SMALL:         %[[POS:.*]] = nn.broadcast %[[AT]] : tensor<1x4x4xi64> -> tensor<2x4x4xi64>
// SMALL:         %[[CM:.*]] = nn.reduce_max %[[A]] [2] keepdim
// SMALL:         %[[CB:.*]] = nn.broadcast %[[CM]] : tensor<2x4x1xf32> -> tensor<2x4x4xf32>
// SMALL:         %[[HIT:.*]] = nn.compare eq, %[[A]], %[[CB]]
// SMALL:         %[[C1:.*]] = nn.select %[[HIT]], %[[POS]], %{{.*}} : tensor<2x4x4xi64>
// SMALL:         %[[NAN:.*]] = nn.compare ne, %[[A]], %[[A]]
// SMALL:         %[[C2:.*]] = nn.select %[[NAN]], %[[POS]], %[[C1]]
// SMALL:         %[[CI:.*]] = nn.reduce_min %[[C2]] [2] keepdim : tensor<2x4x4xi64> -> tensor<2x4x1xi64>
// SMALL:         %[[RM:.*]] = nn.reduce_max %[[CM]] [1] keepdim : tensor<2x4x1xf32> -> tensor<2x1x1xf32>
// SMALL:         %[[RB:.*]] = nn.broadcast %[[RM]]
// SMALL:         %[[HIT2:.*]] = nn.compare eq, %[[CM]], %[[RB]]
// SMALL:         %[[D1:.*]] = nn.select %[[HIT2]], %[[CI]], %{{.*}} : tensor<2x4x1xi64>
// SMALL:         %[[NAN2:.*]] = nn.compare ne, %[[CM]], %[[CM]]
// SMALL:         %[[D2:.*]] = nn.select %[[NAN2]], %[[CI]], %[[D1]]
// SMALL:         %[[RI:.*]] = nn.reduce_min %[[D2]] [1] keepdim : tensor<2x4x1xi64> -> tensor<2x1x1xi64>
// SMALL:         %[[Y:.*]] = nn.reshape %[[RI]] : tensor<2x1x1xi64> -> tensor<2x1xi64>
// SMALL:         func.return %[[Y]]
func.func @argmax_rows(%x: tensor<2x16xf32>) -> tensor<2x1xi64> {
  %m = nn.reduce_max %x [1] keepdim : tensor<2x16xf32> -> tensor<2x1xf32>
  %r = nn.constant dense<[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]> : tensor<16xi64>
  %rr = nn.reshape %r : tensor<16xi64> -> tensor<1x16xi64>
  %i = nn.broadcast %rr : tensor<1x16xi64> -> tensor<2x16xi64>
  %p = nn.constant 16 : tensor<2x16xi64>
  %mb = nn.broadcast %m : tensor<2x1xf32> -> tensor<2x16xf32>
  %hit = nn.compare eq, %x, %mb : tensor<2x16xf32>
  %c = nn.select %hit, %i, %p : tensor<2x16xi64>
  %n = nn.compare ne, %x, %x : tensor<2x16xf32>
  %d = nn.select %n, %i, %c : tensor<2x16xi64>
  %y = nn.reduce_min %d [1] keepdim : tensor<2x16xi64> -> tensor<2x1xi64>
  func.return %y : tensor<2x1xi64>
}
