"""Row reductions on the CUDA backend whose vector width the per-row outputs narrowed:
wall (do_bench median), kernels and their time, exact or close to eager. argv: systems."""
import sys, torch
import torch.nn.functional as F
from triton.testing import do_bench
from benchmarks.host_overhead import make_system
from benchmarks.timing import profile_kernels

class M(torch.nn.Module):
    def __init__(self, fn):
        super().__init__(); self.fn = fn
    def forward(self, *x):
        return self.fn(*x)

CASES = {
    "argmax_last 8192x32000": (lambda x: x.argmax(-1), (8192, 32000)),
    "amax_last 8192x32000": (lambda x: x.amax(-1), (8192, 32000)),
    "max_dim 4096x128256": (lambda x: x.max(-1), (4096, 128256)),
    "sum_last 16383x4096": (lambda x: x.sum(-1), (16383, 4096)),
    "cross_entropy 8191x32000": (lambda x, t: F.cross_entropy(x, t), (8191, 32000)),
}
dev, dt = torch.device("cuda"), torch.bfloat16
for label, (fn, shape) in CASES.items():
    g = torch.Generator(device=dev).manual_seed(0)
    x = torch.randn(*shape, device=dev, generator=g).to(dt)
    args = (x,) if "cross" not in label else (x, torch.randint(0, shape[1], (shape[0],), device=dev, generator=g))
    ref = fn(*args)
    for name in sys.argv[1].split(","):
        torch._dynamo.reset()
        with torch.no_grad():
            f = make_system(name, M(fn).eval(), args)
            out = f(*args)
            outs = out if isinstance(out, tuple) else (out,)
            refs = ref if isinstance(ref, tuple) else (ref,)
            same = all(torch.allclose(o.float(), r.float(), rtol=1e-2, atol=1e-2) if o.is_floating_point() else bool((o == r).all()) for o, r in zip(outs, refs))
            for _ in range(3): f(*args)
            wall = do_bench(lambda: f(*args), warmup=25, rep=200, return_mode="median") * 1e3
            prof = profile_kernels(lambda: f(*args), dev, 5, 12)
        gb = x.numel() * x.element_size() / 1e9
        print(f"== {label} {name}: wall {wall:.1f} us, {prof.kernels} kernels {prof.kernel_us:.1f} us "
              f"({gb / (prof.kernel_us * 1e-6):.0f} GB/s read), correct {same}", flush=True)
        for k, us, n in prof.top[:3]:
            print(f"   {us:8.1f} x{n:3.0f} {k[:90]}")
