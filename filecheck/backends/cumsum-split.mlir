// RUN: fuse-opt %s --pipeline standard | filecheck %s --check-prefix=TILE
// RUN: fuse-opt %s --pipeline standard -t triton | filecheck %s --check-prefix=TRITON

// A few long lines (3 of 5000) would give a scan kernel one program: the scan is split
// across programs. The first kernel sums each chunk of 1024 into a [lines, chunks]
// buffer; the second gives each chunk a program that adds the partial sums before it
// (a masked load of the line's partials: positions - chunk < 0) and scans its chunk
// from there.
// TILE:        tile.kernel @main_cumsum_partials grid 1 (%{{.*}}: memref<3x5000xf32>, %{{.*}}: memref<3x5xf32>) {{.*}}schedule = "scan"
// TILE:        tile.reduce sum %{{.*}} axis 1 : tensor<1x1024xf32> -> tensor<1xf32>
// TILE:        tile.kernel @main_cumsum grid 1 (%{{.*}}: memref<3x5000xf32>, %{{.*}}: memref<3x5xf32>, %{{.*}}: memref<3x5000xf32>)
// TILE:        tile.load %{{.*}} : memref<3x5xf32> -> tensor<1x8xf32>
// TILE:        tile.iota
// TILE:        nn.compare lt
// TILE:        nn.cumsum %{{.*}} axis 1 : tensor<1x1024xf32> -> tensor<1x1024xf32>
// TILE-LABEL:  func.func @main
// TILE-NEXT:   %[[P:.*]] = tile.alloc : memref<3x5xf32>
// TILE-NEXT:   tile.launch @main_cumsum_partials grid [15] (%{{.*}}, %[[P]])
// TILE-NEXT:   tile.launch @main_cumsum grid [15] (%{{.*}}, %[[P]], %{{.*}})
// TRITON:      tl.associative_scan(x_1, 1, fuseopt_add)
func.func @main(%x: tensor<3x5000xf32>) -> tensor<3x5000xf32> {
  %r = nn.cumsum %x axis 1 : tensor<3x5000xf32> -> tensor<3x5000xf32>
  func.return %r : tensor<3x5000xf32>
}
