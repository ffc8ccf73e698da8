// RUN: fuse-opt %s | fuse-opt | filecheck %s --check-prefix=IR
// RUN: fuse-opt %s --pipeline standard -t triton | filecheck %s --check-prefix=TRITON
// RUN: fuse-opt %s --pipeline standard -t cuda | filecheck %s --check-prefix=CUDA
// RUN: fuse-opt %s -p nn-fuse,nn-widen-intermediates | filecheck %s --check-prefix=WIDE

// The rounding ops round-trip. Triton: floats through helpers (eager's floor division
// over libdevice's fmod and div_rn, truncation of an IEEE quotient), integers through
// `//` and `%` (C's); a bf16 truncating division rounds its quotient to bf16 first.
// The CUDA backend: libm's floorf / ceilf / truncf / fmodf and the prelude's
// fo_floor_div and fo_remainder; C's `/` and `%` on integers.
// IR:      nn.floor %{{.*}} : tensor<8x64xf32>
// IR:      nn.ceil
// IR:      nn.trunc
// IR:      nn.floor_div %{{.*}}, %{{.*}} : tensor<8x64xf32>
// IR:      nn.trunc_div
// IR:      nn.remainder
// IR:      nn.fmod
// IR:      nn.floor_div %{{.*}}, %{{.*}} : tensor<8x64xi64>
// IR:      nn.trunc_div %{{.*}}, %{{.*}} : tensor<8x64xbf16>

// TRITON:     def fuseopt_floor_div(a, b):
// TRITON:         mod = fuseopt_fmod(a, b)
// TRITON:         div = tl.div_rn(a - mod, b)
// TRITON:     def fuseopt_fmod(a, b):
// TRITON:             return fuseopt_libdevice.fmod(a, b)
// TRITON:     @triton.jit
// TRITON:     tl.floor(
// TRITON:     tl.ceil(
// TRITON:     fuseopt_trunc(
// TRITON:     fuseopt_floor_div(
// TRITON:     fuseopt_trunc(tl.div_rn(
// TRITON:     fuseopt_remainder(
// TRITON:     fuseopt_fmod(
// TRITON:     fuseopt_floor_div_int(
// TRITON:     = {{.*}} // {{.*}}
// TRITON:     = {{.*}} % {{.*}}
// TRITON:     fuseopt_trunc(fuseopt_widen_bf16(fuseopt_bf16(tl.div_rn(

// CUDA:      fo_floor_div(float a, float b)
// CUDA:      floorf(
// CUDA:      ceilf(
// CUDA:      truncf(
// CUDA:      fo_floor_div(
// CUDA:      truncf({{.*}} / {{.*}})
// CUDA:      fo_remainder(
// CUDA:      fmodf(
// CUDA:      fo_floordiv(

// Widening keeps a bf16 truncating division in bf16 (its quotient rounds to bf16 before
// it is truncated), reading its operands rounded; the other rounding ops compute in f32
// on operands rounded to bf16 first, as eager reads them.
// WIDE-LABEL: func.func @f
// WIDE:       nn.trunc_div %{{.*}}, %{{.*}} : tensor<8x64xbf16>
// WIDE-LABEL: func.func @widened
// WIDE:       %[[W:.*]] = nn.exp %{{.*}} : tensor<8x64xf32>
// WIDE:       %[[N:.*]] = nn.cast %[[W]] : tensor<8x64xf32> -> tensor<8x64xbf16>
// WIDE:       nn.trunc_div %[[N]], %{{.*}} : tensor<8x64xbf16>
// WIDE:       %[[Q:.*]] = nn.cast %{{.*}} : tensor<8x64xbf16> -> tensor<8x64xf32>
// WIDE:       nn.floor_div %[[Q]], %{{.*}} : tensor<8x64xf32>
// WIDE-LABEL: func.func @rounded_operand
// WIDE:       %[[E:.*]] = nn.exp %{{.*}} : tensor<8x64xf32>
// WIDE:       %[[R:.*]] = nn.cast %[[E]] : tensor<8x64xf32> -> tensor<8x64xbf16>
// WIDE:       %[[B:.*]] = nn.cast %[[R]] : tensor<8x64xbf16> -> tensor<8x64xf32>
// WIDE:       nn.floor %[[B]] : tensor<8x64xf32>
func.func @f(%x: tensor<8x64xf32>, %y: tensor<8x64xf32>, %i: tensor<8x64xi64>, %j: tensor<8x64xi64>, %h: tensor<8x64xbf16>, %g: tensor<8x64xbf16>) -> (tensor<8x64xf32>, tensor<8x64xi64>, tensor<8x64xbf16>) {
  %0 = nn.floor %x : tensor<8x64xf32>
  %1 = nn.ceil %0 : tensor<8x64xf32>
  %2 = nn.trunc %1 : tensor<8x64xf32>
  %3 = nn.floor_div %2, %y : tensor<8x64xf32>
  %4 = nn.trunc_div %3, %y : tensor<8x64xf32>
  %5 = nn.remainder %4, %y : tensor<8x64xf32>
  %6 = nn.fmod %5, %y : tensor<8x64xf32>
  %7 = nn.floor_div %i, %j : tensor<8x64xi64>
  %8 = nn.trunc_div %7, %j : tensor<8x64xi64>
  %9 = nn.fmod %8, %j : tensor<8x64xi64>
  %10 = nn.trunc_div %h, %g : tensor<8x64xbf16>
  func.return %6, %9, %10 : tensor<8x64xf32>, tensor<8x64xi64>, tensor<8x64xbf16>
}

func.func @widened(%h: tensor<8x64xbf16>, %g: tensor<8x64xbf16>) -> tensor<8x64xbf16> {
  %0 = nn.exp %h : tensor<8x64xbf16>
  %1 = nn.trunc_div %0, %g : tensor<8x64xbf16>
  %2 = nn.floor_div %1, %g : tensor<8x64xbf16>
  func.return %2 : tensor<8x64xbf16>
}

func.func @rounded_operand(%h: tensor<8x64xbf16>) -> tensor<8x64xbf16> {
  %0 = nn.exp %h : tensor<8x64xbf16>
  %1 = nn.floor %0 : tensor<8x64xbf16>
  func.return %1 : tensor<8x64xbf16>
}
