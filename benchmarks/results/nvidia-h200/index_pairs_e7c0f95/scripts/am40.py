"""argmax/argmin/max.dim rows per system: wall (do_bench median, us), kernels (count, us),
each kernel; exact match against eager (indices). argv: systems [case names]."""
import sys, torch
from triton.testing import do_bench
from benchmarks.host_overhead import make_system
from benchmarks.timing import profile_kernels

class F(torch.nn.Module):
    def __init__(self, fn):
        super().__init__(); self.fn = fn
    def forward(self, x):
        return self.fn(x)

CASES = {
    "argmax_last 8192x32000": (lambda x: x.argmax(-1), (8192, 32000)),
    "argmax_last 1048576x64": (lambda x: x.argmax(-1), (1 << 20, 64)),
    "argmax_first 4096x8192": (lambda x: x.argmax(0), (4096, 8192)),
    "argmin_first 65536x1024": (lambda x: x.argmin(0), (65536, 1024)),
    "argmax_middle 64x1024x1024": (lambda x: x.argmax(1), (64, 1024, 1024)),
    "argmax_flat 67108864": (lambda x: x.argmax(), (1 << 26,)),
    "argmax_flat 1000003": (lambda x: x.argmax(), (1000003,)),
    "max_dim 4096x128256": (lambda x: x.max(-1), (4096, 128256)),
    "argmax_last 8x128256": (lambda x: x.argmax(-1), (8, 128256)),
    "argmax_last 3x1000": (lambda x: x.argmax(-1), (3, 1000)),
}
dev, dt = torch.device("cuda"), torch.bfloat16
systems = sys.argv[1].split(",")
names = sys.argv[2].split(",") if len(sys.argv) > 2 and sys.argv[2] else list(CASES)
for label in names:
    fn, shape = CASES[label]
    g = torch.Generator(device=dev).manual_seed(0)
    x = torch.randn(*shape, device=dev, generator=g).to(dt)
    ref = fn(x)
    model = F(fn).eval()
    for name in systems:
        torch._dynamo.reset()
        with torch.no_grad():
            if "@" in name:  # fuseopt-triton@statistics_row_block=32768: backend options
                import fuseopt
                system, _, opts = name.partition("@")
                kw = {k: int(v) for k, v in (p.split("=") for p in opts.split(","))}
                f = fuseopt.compile(model, (x,), backend=system.removeprefix("fuseopt-"), **kw)
            else:
                f = make_system(name, model, (x,))
            out = f(x)
            outs = out if isinstance(out, tuple) else (out,)
            refs = ref if isinstance(ref, tuple) else (ref,)
            same = all(bool((o == r).all()) for o, r in zip(outs, refs))
            for _ in range(3):
                f(x)
            wall = do_bench(lambda: f(x), warmup=25, rep=200, return_mode="median") * 1e3
            prof = profile_kernels(lambda: f(x), dev, 5, 12)
        gb = x.numel() * x.element_size() / 1e9
        print(f"== {label} {name}: wall {wall:.1f} us, {prof.kernels} kernels {prof.kernel_us:.1f} us "
              f"({gb / (prof.kernel_us * 1e-6):.0f} GB/s read), exact {same}", flush=True)
        for k, us, n in prof.top:
            print(f"   {us:8.1f} x{n:3.0f} {k[:100]}")
