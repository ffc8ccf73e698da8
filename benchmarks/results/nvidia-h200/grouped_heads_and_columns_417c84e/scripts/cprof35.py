"""cProfile of 20 calls of one model-suite instance per system: the Python functions with
the most own time (host work of a call), after warm-up."""
import cProfile, io, pstats, sys, time, torch
from benchmarks.host_overhead import instance_shapes, make_system
dev, dt = torch.device("cuda"), torch.bfloat16
for workload, s in instance_shapes("--models", sys.argv[1]):
    model = workload.make_model(s.dims, dt, dev, 0).eval()
    inputs = workload.make_inputs(s.dims, dt, dev, 1)
    for name in sys.argv[2].split(","):
        torch._dynamo.reset()
        with torch.no_grad():
            fn = make_system(name, model, inputs)
            for _ in range(10):
                fn(*inputs)
            torch.cuda.synchronize()
            hosts = []
            for _ in range(5):
                torch.cuda.synchronize(); t = time.perf_counter()
                for _ in range(10):
                    fn(*inputs)
                hosts.append((time.perf_counter() - t) / 10 * 1e6)
            torch.cuda.synchronize()
            pr = cProfile.Profile()
            pr.enable()
            for _ in range(20):
                fn(*inputs)
            pr.disable()
            torch.cuda.synchronize()
        out = io.StringIO()
        st = pstats.Stats(pr, stream=out); st.sort_stats("tottime").print_stats(35)
        print(f"===== {sys.argv[1]} {name}: host {min(hosts):.0f} us a call (min of 5 x 10); cProfile of 20 calls")
        print("\n".join(out.getvalue().splitlines()[:60]))
