// A gated RMSNorm, as in Mamba-style and Llama-style blocks: rms_norm(x, w) * silu(g).
// Run the standard pipeline on it:
//   fuse-opt fuseopt/examples/rmsnorm_silu_gate.mlir --pipeline standard
func.func @rmsnorm_silu_gate(%x: tensor<2048x5120xbf16>, %w: tensor<5120xbf16>, %g: tensor<2048x5120xbf16>) -> tensor<2048x5120xbf16> {
  %n = nn.rms_norm %x weight %w {eps = 1.0e-06 : f64} : tensor<2048x5120xbf16>, tensor<5120xbf16> -> tensor<2048x5120xbf16>
  %s = nn.silu %g : tensor<2048x5120xbf16>
  %y = nn.mul %n, %s : tensor<2048x5120xbf16>
  func.return %y : tensor<2048x5120xbf16>
}
