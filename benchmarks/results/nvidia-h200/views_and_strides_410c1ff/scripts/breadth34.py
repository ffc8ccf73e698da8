"""Per-kernel times of a few breadth rows where fuseopt-triton's kernel time trails
torch.compile's; and variants of the even/odd-column product kernel."""
import sys, torch, triton, triton.language as tl
from triton.testing import do_bench
from benchmarks.breadth.__main__ import select_cases
from benchmarks.host_overhead import make_system
from benchmarks.timing import profile_kernels

dev, dt = torch.device("cuda"), torch.bfloat16
for _, w, s in select_cases(sys.argv[1].split(","), False):
    model = w.make_model(s.dims, dt, dev, 0).eval()
    inputs = w.make_inputs(s.dims, dt, dev, 1)
    for name in ("torch.compile", "fuseopt-triton"):
        torch._dynamo.reset()
        with torch.no_grad():
            fn = make_system(name, model, inputs)
            for _ in range(3):
                fn(*inputs)
            prof = profile_kernels(lambda: fn(*inputs), dev, 5, 12)
        print(f"== {w.name} {s.label} {name}: {prof.kernels} kernels {prof.kernel_us:.1f} us")
        for k, us, n in prof.top:
            print(f"   {us:8.1f} x{n:3.0f} {k[:110]}")
        if name == "fuseopt-triton":
            for r in getattr(fn, "kernels", []):
                print("   --", r.name, r.launch)

@triton.jit
def strided(x_ptr, o_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    a = tl.load(x_ptr + offs * 2).to(tl.float32)
    b = tl.load(x_ptr + 1 + offs * 2).to(tl.float32)
    tl.store(o_ptr + offs, (a * b).to(tl.bfloat16))

@triton.jit
def paired(x_ptr, o_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    both = tl.load(x_ptr + offs[:, None] * 2 + tl.arange(0, 2)[None, :]).to(tl.float32)
    a, b = tl.split(both)
    tl.store(o_ptr + offs, (a * b).to(tl.bfloat16))

x = torch.randn(8192, 8192, device=dev, dtype=dt)
want = x[:, ::2] * x[:, 1::2]
n = want.numel()
for kern in (strided, paired):
    for block in (512, 1024, 2048):
        for warps in (2, 4, 8):
            o = torch.empty_like(want)
            f = lambda: kern[(n // block,)](x, o, BLOCK=block, num_warps=warps)
            f(); torch.cuda.synchronize()
            assert torch.equal(o, want)
            print(f"{kern.fn.__name__:8s} block {block:5d} warps {warps}: {do_bench(f, return_mode='median') * 1e3:.1f} us")
