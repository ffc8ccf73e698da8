"""Breadth rows, per system: wall (do_bench median, us), kernels (count, us), each kernel,
and the largest error against eager in f64 relative to the output's scale.
argv: cases, systems. FUSEOPT_CUDA_COLSTATS=1: the CUDA target's column_statistics on."""
import copy, os, sys, dataclasses, torch
from triton.testing import do_bench
from benchmarks.breadth.__main__ import select_cases
from benchmarks.host_overhead import make_system
from benchmarks.timing import profile_kernels
if os.environ.get("FUSEOPT_CUDA_TARGET"):  # e.g. "warp_per_row=True"
    import fuseopt.backends.cuda.backend as b
    kw = {k: eval(v) for k, v in (p.split("=") for p in os.environ["FUSEOPT_CUDA_TARGET"].split(","))}
    b.CUDA = dataclasses.replace(b.CUDA, **kw)
    print("# CUDA target with", kw)

dev, dt = torch.device("cuda"), torch.bfloat16
systems = sys.argv[2].split(",")
for _, w, s in select_cases(sys.argv[1].split(","), False):
    model = w.make_model(s.dims, dt, dev, 0).eval()
    inputs = w.make_inputs(s.dims, dt, dev, 1)
    with torch.no_grad():
        ref = copy.deepcopy(model).double()(*[x.double() if x.is_floating_point() else x for x in inputs])
    for name in systems:
        torch._dynamo.reset()
        with torch.no_grad():
            fn = make_system(name, model, inputs)
            out = fn(*inputs)
            r, o = (ref[0], out[0]) if isinstance(ref, tuple) else (ref, out)
            err = ((o.double() - r.double()).abs().max() / r.double().abs().max().clamp_min(1e-12)).item()
            for _ in range(3):
                fn(*inputs)
            wall = do_bench(lambda: fn(*inputs), warmup=25, rep=200, return_mode="median") * 1e3
            prof = profile_kernels(lambda: fn(*inputs), dev, 5, 12)
        print(f"== {w.name} {s.label} {name}: wall {wall:.1f} us, {prof.kernels} kernels {prof.kernel_us:.1f} us, rel err {err:.1e}", flush=True)
        for k, us, n in prof.top:
            print(f"   {us:8.1f} x{n:3.0f} {k[:100]}")
