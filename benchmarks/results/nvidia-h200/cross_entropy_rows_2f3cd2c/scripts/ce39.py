"""Cross-entropy / softmax rows: kernel us and wall per system, error vs f64.
argv: systems (comma list; fuseopt-triton@max_row_block=8192@... adds options).
FASTEXP=1: fuseopt_exp patched to tl.exp (ex2.approx) for this process."""
import os, sys, torch, torch.nn.functional as F
from triton.testing import do_bench
from benchmarks.timing import profile_kernels
if os.environ.get("FASTEXP") == "1":
    import fuseopt.backends.triton.op_table as ot
    for k, v in list(ot.__dict__.items()):
        if isinstance(v, dict) and "fuseopt_exp" in v:
            v["fuseopt_exp"] = v["fuseopt_exp"].replace("return fuseopt_libdevice.exp(x)", "return tl.exp(x)")
            print("# patched fuseopt_exp in", k)
import fuseopt
dev, dt = torch.device("cuda"), torch.bfloat16

class CE(torch.nn.Module):
    def forward(self, x, t): return F.cross_entropy(x, t)
class SM(torch.nn.Module):
    def forward(self, x): return torch.softmax(x, -1)
class LSM(torch.nn.Module):
    def forward(self, x): return torch.log_softmax(x.float(), -1)

class RED(torch.nn.Module):
    def __init__(self, f): super().__init__(); self.f = f
    def forward(self, x): return self.f(x)
REDS = {"sum": lambda x: x.sum(-1), "amax": lambda x: x.amax(-1), "lse": lambda x: torch.logsumexp(x.float(), -1), "argmax": lambda x: x.argmax(-1)}
CASES = [("ce", R, C) for R, C in ((8192, 32000), (65536, 1000), (8, 128256), (4096, 128256), (16384, 50257), (2048, 151936))]
CASES += [("softmax", 8192, 32000), ("softmax", 4096, 16384), ("softmax", 32768, 8192), ("softmax", 1024, 131072), ("logsoftmax", 8192, 32000)]
CASES += [(k, R, C) for k in REDS for R, C in ((8192, 32000), (4096, 16384), (16384, 8192))]
only = os.environ.get("ONLY")
systems = sys.argv[1].split(",")
for kind, R, C in CASES:
    if only and kind + f"{R}x{C}" not in only.split(","):
        continue
    g = torch.Generator(device=dev).manual_seed(0)
    x = (torch.randn(R, C, device=dev, generator=g) * 4).to(dt)
    if kind == "ce":
        t = torch.randint(0, C, (R,), device=dev, generator=g)
        t[::7] = -100
        model, inputs = CE(), (x, t)
        ref = F.cross_entropy(x.double(), t)
    else:
        model = SM() if kind == "softmax" else LSM() if kind == "logsoftmax" else RED(REDS[kind])
        inputs = (x,)
        ref = model(x.double())
    gb = R * C * 2 / 1e9
    for name in systems:
        sysname, *opts = name.split("@")
        opts = {k: int(v) for k, v in (o.split("=") for o in opts)}
        torch._dynamo.reset()
        with torch.no_grad():
            if sysname == "torch.compile":
                fn = torch.compile(model)
            elif sysname == "eager":
                fn = model
            else:
                fn = fuseopt.compile(model, inputs, backend=sysname.removeprefix("fuseopt-"), **opts)
            out = fn(*inputs)
            err = ((out.double() - ref.double()).abs().max() / ref.double().abs().max().clamp_min(1e-12)).item()
            for _ in range(3):
                fn(*inputs)
            wall = do_bench(lambda: fn(*inputs), warmup=25, rep=200, return_mode="median") * 1e3
            prof = profile_kernels(lambda: fn(*inputs), dev, 5, 12)
        print(f"== {kind} {R}x{C} {name}: wall {wall:.1f} us, {prof.kernels} kernels {prof.kernel_us:.1f} us ({gb/prof.kernel_us*1e6:.0f} GB/s), rel err {err:.1e}", flush=True)
        for k, us, n in prof.top:
            print(f"   {us:8.1f} x{n:3.0f} {k[:90]}")
