// RUN: fuse-opt %s | fuse-opt | filecheck %s
// RUN: fuse-opt %s --print-op-generic | fuse-opt | filecheck %s
// RUN: fuse-opt %s --print-op-generic | filecheck %s --check-prefix=GENERIC

// CHECK-LABEL: func.func @unary
func.func @unary(%x: tensor<4x8xf32>, %h: tensor<4x8xbf16>, %i: tensor<4xi64>) -> tensor<4x8xf32> {
  // CHECK: %{{.*}} = nn.neg %{{.*}} : tensor<4x8xf32>
  // GENERIC: "nn.neg"(%{{.*}}) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %0 = nn.neg %x : tensor<4x8xf32>
  // CHECK-NEXT: nn.abs %{{.*}} : tensor<4xi64>
  %1 = nn.abs %i : tensor<4xi64>
  // CHECK-NEXT: nn.exp %{{.*}} : tensor<4x8xbf16>
  %2 = nn.exp %h : tensor<4x8xbf16>
  // CHECK-NEXT: nn.log
  %3 = nn.log %x : tensor<4x8xf32>
  // CHECK-NEXT: nn.sqrt
  %4 = nn.sqrt %x : tensor<4x8xf32>
  // CHECK-NEXT: nn.rsqrt
  %5 = nn.rsqrt %x : tensor<4x8xf32>
  // CHECK-NEXT: nn.reciprocal
  %6 = nn.reciprocal %x : tensor<4x8xf32>
  // CHECK-NEXT: nn.tanh
  %7 = nn.tanh %x : tensor<4x8xf32>
  // CHECK-NEXT: nn.sigmoid
  %8 = nn.sigmoid %x : tensor<4x8xf32>
  // CHECK-NEXT: nn.relu %{{.*}} : tensor<4xi64>
  %9 = nn.relu %i : tensor<4xi64>
  // CHECK-NEXT: nn.gelu %{{.*}} : tensor<4x8xf32>
  %10 = nn.gelu %x : tensor<4x8xf32>
  // CHECK-NEXT: nn.gelu %{{.*}} {approximate = "tanh"} : tensor<4x8xf32>
  // GENERIC: "nn.gelu"(%{{.*}}) {approximate = "tanh"} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %11 = nn.gelu %x {approximate = "tanh"} : tensor<4x8xf32>
  // CHECK-NEXT: nn.silu
  %12 = nn.silu %x : tensor<4x8xf32>
  // CHECK-NEXT: nn.erf
  %13 = nn.erf %x : tensor<4x8xf32>
  // CHECK-NEXT: nn.sin
  %14 = nn.sin %x : tensor<4x8xf32>
  // CHECK-NEXT: nn.cos
  %15 = nn.cos %x : tensor<4x8xf32>
  func.return %15 : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @binary
func.func @binary(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>, %i: tensor<3xi64>) -> tensor<4x8xf32> {
  // CHECK: nn.add %{{.*}}, %{{.*}} : tensor<4x8xf32>
  // GENERIC: "nn.add"(%{{.*}}, %{{.*}}) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %0 = nn.add %a, %b : tensor<4x8xf32>
  // CHECK-NEXT: nn.sub
  %1 = nn.sub %0, %b : tensor<4x8xf32>
  // CHECK-NEXT: nn.mul %{{.*}}, %{{.*}} : tensor<3xi64>
  %2 = nn.mul %i, %i : tensor<3xi64>
  // CHECK-NEXT: nn.div
  %3 = nn.div %1, %b : tensor<4x8xf32>
  // CHECK-NEXT: nn.max
  %4 = nn.max %3, %b : tensor<4x8xf32>
  // CHECK-NEXT: nn.min
  %5 = nn.min %4, %b : tensor<4x8xf32>
  // CHECK-NEXT: nn.pow
  %6 = nn.pow %5, %b : tensor<4x8xf32>
  func.return %6 : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @compare_select_cast
func.func @compare_select_cast(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x8xbf16> {
  // CHECK: %[[M:.*]] = nn.compare lt, %{{.*}}, %{{.*}} : tensor<4x8xf32>
  // GENERIC: "nn.compare"(%{{.*}}, %{{.*}}) {predicate = "lt"} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xi1>
  %m = nn.compare lt, %a, %b : tensor<4x8xf32>
  // CHECK-NEXT: nn.compare ge
  %n = nn.compare ge, %a, %b : tensor<4x8xf32>
  // CHECK-NEXT: nn.select %[[M]], %{{.*}}, %{{.*}} : tensor<4x8xf32>
  %s = nn.select %m, %a, %b : tensor<4x8xf32>
  // CHECK-NEXT: nn.cast %{{.*}} : tensor<4x8xf32> -> tensor<4x8xbf16>
  %c = nn.cast %s : tensor<4x8xf32> -> tensor<4x8xbf16>
  // CHECK-NEXT: nn.cast %{{.*}} : tensor<4x8xi1> -> tensor<4x8xf16>
  %d = nn.cast %n : tensor<4x8xi1> -> tensor<4x8xf16>
  func.return %c : tensor<4x8xbf16>
}
