"""Host time per call (no synchronization, 50 calls) of breadth rows whose wall minus
kernel time is larger for fuseopt than torch.compile; cProfile of fuseopt's calls."""
import cProfile, io, pstats, sys, time, torch
from benchmarks.breadth.__main__ import select_cases
from benchmarks.host_overhead import make_system
from benchmarks.timing import profile_kernels

dev, dt = torch.device("cuda"), torch.bfloat16
systems = sys.argv[2].split(",")
for _, w, s in select_cases(sys.argv[1].split(","), False):
    model = w.make_model(s.dims, dt, dev, 0).eval()
    inputs = w.make_inputs(s.dims, dt, dev, 1)
    for name in systems:
        torch._dynamo.reset()
        with torch.no_grad():
            fn = make_system(name, model, inputs)
            for _ in range(5):
                fn(*inputs)
            prof = profile_kernels(lambda: fn(*inputs), dev, 5, 6)
            best = []
            for _ in range(5):
                torch.cuda.synchronize()
                t = time.perf_counter()
                for _ in range(30):
                    fn(*inputs)
                best.append((time.perf_counter() - t) / 30 * 1e6)
                torch.cuda.synchronize()
            print(f"== {w.name} {s.label} {name}: host {min(best):.1f} us/call (min of 5x30), "
                  f"{prof.kernels} kernels {prof.kernel_us:.1f} us")
            for k, us, n in prof.top:
                print(f"   {us:8.1f} x{n:3.0f} {k[:100]}")
            if name.startswith("fuseopt") and "-p" in sys.argv:
                p = cProfile.Profile()
                p.enable()
                for _ in range(30):
                    fn(*inputs)
                p.disable()
                torch.cuda.synchronize()
                out = io.StringIO()
                pstats.Stats(p, stream=out).sort_stats("tottime").print_stats(18)
                print("\n".join(out.getvalue().splitlines()[4:32]))
