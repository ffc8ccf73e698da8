// RUN: fuse-opt %s --split-input-file -p nn-gather-picks,canonicalize,cse | filecheck %s

// nll_loss's pick of each row's target class, written as a one-hot sum (the index
// vector compared with the broadcast target), becomes the log-probability's
// computation at the target: the logits gathered there (nn.take at row * classes +
// target, the target clamped into range) less the row's max and log-sum, selected to 0
// where the target is outside [0, classes) as the one-hot sum gives.
// CHECK-LABEL: func.func @nll_pick
// CHECK-NOT:     nn.compare eq, %{{.*}} : tensor<4x10xi64>
// CHECK:         %[[VALID:.*]] = nn.select %{{.*}}, %{{.*}}, %{{.*}} : tensor<4xi1>
// CHECK:         %[[T:.*]] = nn.select %[[VALID]], %t, %{{.*}} : tensor<4xi64>
// CHECK:         %[[POS:.*]] = nn.add %{{.*}}, %[[T]] : tensor<4xi64>
// CHECK:         %[[FLAT:.*]] = nn.reshape %x : tensor<4x10xf32> -> tensor<40xf32>
// CHECK:         %[[XT:.*]] = nn.take %[[FLAT]], %[[POS]] : tensor<40xf32>, tensor<4xi64> -> tensor<4xf32>
// CHECK:         %[[M:.*]] = nn.reshape %m : tensor<4x1xf32> -> tensor<4xf32>
// CHECK:         %[[D:.*]] = nn.sub %[[XT]], %[[M]] : tensor<4xf32>
// CHECK:         %[[P:.*]] = nn.select %[[VALID]], %[[D]], %{{.*}} : tensor<4xf32>
// CHECK-NOT:     nn.sum
// CHECK:         func.return %[[P]]
func.func @nll_pick(%x: tensor<4x10xf32>, %t: tensor<4xi64>, %m: tensor<4x1xf32>) -> tensor<4xf32> {
  %mb = nn.broadcast %m : tensor<4x1xf32> -> tensor<4x10xf32>
  %d = nn.sub %x, %mb : tensor<4x10xf32>
  %iota = nn.constant dense<[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]> : tensor<10xi64>
  %row = nn.reshape %iota : tensor<10xi64> -> tensor<1x10xi64>
  %classes = nn.broadcast %row : tensor<1x10xi64> -> tensor<4x10xi64>
  %tc = nn.reshape %t : tensor<4xi64> -> tensor<4x1xi64>
  %tb = nn.broadcast %tc : tensor<4x1xi64> -> tensor<4x10xi64>
  %hit = nn.compare eq, %classes, %tb : tensor<4x10xi64>
  %zero = nn.constant 0.0 : tensor<4x10xf32>
  %sel = nn.select %hit, %d, %zero : tensor<4x10xf32>
  %p = nn.sum %sel [1] : tensor<4x10xf32> -> tensor<4xf32>
  func.return %p : tensor<4xf32>
}

// -----

// A class weight broadcast over the rows is read at each row's target from the weight
// itself (the comparison's operands in either order; keepdim keeps the unit axis).
// CHECK-LABEL: func.func @weight_pick
// CHECK:         %[[W:.*]] = nn.take %w, %{{.*}} : tensor<10xf32>, tensor<4xi64> -> tensor<4xf32>
// CHECK:         %[[P:.*]] = nn.select %{{.*}}, %[[W]], %{{.*}} : tensor<4xf32>
// CHECK:         nn.reshape %[[P]] : tensor<4xf32> -> tensor<4x1xf32>
func.func @weight_pick(%w: tensor<10xf32>, %t: tensor<4xi64>) -> tensor<4x1xf32> {
  %wr = nn.reshape %w : tensor<10xf32> -> tensor<1x10xf32>
  %wb = nn.broadcast %wr : tensor<1x10xf32> -> tensor<4x10xf32>
  %iota = nn.constant dense<[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]> : tensor<10xi64>
  %row = nn.reshape %iota : tensor<10xi64> -> tensor<1x10xi64>
  %classes = nn.broadcast %row : tensor<1x10xi64> -> tensor<4x10xi64>
  %tc = nn.reshape %t : tensor<4xi64> -> tensor<4x1xi64>
  %tb = nn.broadcast %tc : tensor<4x1xi64> -> tensor<4x10xi64>
  %hit = nn.compare eq, %tb, %classes : tensor<4x10xi64>
  %zero = nn.constant 0.0 : tensor<4x10xf32>
  %sel = nn.select %hit, %wb, %zero : tensor<4x10xf32>
  %p = nn.sum %sel [1] keepdim : tensor<4x10xf32> -> tensor<4x1xf32>
  func.return %p : tensor<4x1xf32>
}

// -----

// Left alone: a picked value computed through a transpose (a view nn-fuse keeps in
// registers: a gather would have to read it from memory), and a comparison with
// something other than the index vector.
// CHECK-LABEL: func.func @unchanged
// CHECK-NOT:     nn.take
// CHECK:         nn.sum %{{.*}} [1] : tensor<4x4xf32> -> tensor<4xf32>
// CHECK:         nn.sum %{{.*}} [1] : tensor<4x4xf32> -> tensor<4xf32>
func.func @unchanged(%x: tensor<4x4xf32>, %t: tensor<4xi64>, %u: tensor<4x4xi64>) -> (tensor<4xf32>, tensor<4xf32>) {
  %e = nn.exp %x : tensor<4x4xf32>
  %v = nn.transpose %e [1, 0] : tensor<4x4xf32> -> tensor<4x4xf32>
  %iota = nn.constant dense<[0, 1, 2, 3]> : tensor<4xi64>
  %row = nn.reshape %iota : tensor<4xi64> -> tensor<1x4xi64>
  %classes = nn.broadcast %row : tensor<1x4xi64> -> tensor<4x4xi64>
  %tc = nn.reshape %t : tensor<4xi64> -> tensor<4x1xi64>
  %tb = nn.broadcast %tc : tensor<4x1xi64> -> tensor<4x4xi64>
  %hit = nn.compare eq, %classes, %tb : tensor<4x4xi64>
  %zero = nn.constant 0.0 : tensor<4x4xf32>
  %sel = nn.select %hit, %v, %zero : tensor<4x4xf32>
  %p = nn.sum %sel [1] : tensor<4x4xf32> -> tensor<4xf32>
  %hit2 = nn.compare eq, %u, %tb : tensor<4x4xi64>
  %sel2 = nn.select %hit2, %x, %zero : tensor<4x4xf32>
  %q = nn.sum %sel2 [1] : tensor<4x4xf32> -> tensor<4xf32>
  func.return %p, %q : tensor<4xf32>, tensor<4xf32>
}
