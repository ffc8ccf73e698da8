// The command line as mlir-opt users expect it: --help lists the passes and their
// options, an unknown pass gets a "did you mean", an option value that needs quotes
// says so, --time-passes prints rounded times, and mlir-opt's flag names work.
// RUN: fuse-opt --help | filecheck %s --check-prefix=HELP
// RUN: not fuse-opt %s -p 'nn-decompose,nn-fuze' 2>&1 | filecheck %s --check-prefix=MEAN
// RUN: not fuse-opt %s -p 'nn-fuse{dot=g.dot}' 2>&1 | filecheck %s --check-prefix=QUOTE
// RUN: fuse-opt %s -p 'nn-decompose,cse' --time-passes -o %t.mlir 2>&1 | filecheck %s --check-prefix=TIME
// RUN: fuse-opt %s -p 'nn-decompose,cse' --mlir-timing -o %t.mlir 2>&1 | filecheck %s --check-prefix=TIME
// RUN: fuse-opt %s -p 'nn-decompose,cse' --mlir-print-ir-after-all -o %t.mlir 2>&1 | filecheck %s --check-prefix=AFTER
// RUN: fuse-opt %s --mlir-print-op-generic | filecheck %s --check-prefix=GENERIC
// RUN: fuse-opt --version | filecheck %s --check-prefix=VERSION

// HELP:      passes and their options
// HELP:      canonicalize {{ +}}Applies all canonicalization patterns.
// HELP:      nn-fuse {{ +}}Group nn ops into nn.fusion regions
// HELP:        max-recompute: int = 8 {{ +}}The most non-view ops a group may evaluate
// HELP:        dot: str = "" {{ +}}Write the fused graph as Graphviz DOT to this file
// HELP:      convert-nn-to-tile {{ +}}Tile nn.fusion groups into tile.kernels
// HELP:        block: int | None = none {{ +}}Elements per program
// HELP:      tile-promote
// HELP:        shared-bytes: int = {{[0-9]+ +}}Shared memory one program may use

// MEAN: fuse-opt: error: Unrecognized passes: ['nn-fuze'] (did you mean 'nn-fuse'?); fuse-opt --help lists the passes

// QUOTE:      fuse-opt: error: pass-pipeline:1:14: Unknown token (quote the value: dot="g.dot")
// QUOTE-NEXT: nn-fuse{dot=g.dot}
// QUOTE-NEXT: {{^  +\^$}}

// TIME:      pass timing (wall clock):
// TIME-NEXT: {{^ +[0-9]+\.[0-9] ms  nn-decompose$}}
// TIME-NEXT: {{^ +[0-9]+\.[0-9] ms  cse$}}
// TIME-NEXT: {{^ +[0-9]+\.[0-9] ms  total$}}

// AFTER:      IR Dump After nn-decompose
// AFTER-NEXT: builtin.module {
// AFTER:      nn.rsqrt
// AFTER:      IR Dump After cse
// AFTER-NEXT: builtin.module {

// GENERIC: "func.func"() <{

// VERSION: {{^fuse-opt [0-9]+\.[0-9]+\.[0-9]+$}}

func.func @norm(%x: tensor<4x8xf32>, %w: tensor<8xf32>) -> tensor<4x8xf32> {
  %0 = nn.rms_norm %x weight %w {eps = 1.0e-06 : f64} : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  func.return %0 : tensor<4x8xf32>
}
