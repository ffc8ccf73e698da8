"""Llama decode under reduce-overhead: which graphs replay whole (and why not), us per
call over 200 back-to-back calls."""
import logging, sys, time, torch
from benchmarks.host_overhead import instance_shapes
import fuseopt
class Catch(logging.Handler):
    def emit(self, r):
        m = r.getMessage()
        if "not one CUDA graph" in m: print("  ", m)
logging.getLogger("fuseopt").addHandler(Catch()); logging.getLogger("fuseopt").setLevel(logging.DEBUG)
for backend in sys.argv[1].split(","):
    for workload, s in instance_shapes("--models", "llama:decode"):
        torch._dynamo.reset()
        model = workload.make_model(s.dims, torch.bfloat16, torch.device("cuda"), 0).eval()
        inputs = workload.make_inputs(s.dims, torch.bfloat16, torch.device("cuda"), 1)
        with torch.no_grad():
            want = model(*inputs)
            fn = fuseopt.compile(model, inputs, backend=backend, mode="reduce-overhead")
            for _ in range(10): got = fn(*inputs)
            torch.cuda.synchronize()
            t = time.perf_counter()
            for _ in range(200): fn(*inputs)
            torch.cuda.synchronize()
            us = (time.perf_counter() - t) / 200 * 1e6
        print(f"== {backend}: {us:.1f} us/call, whole graphs {list(fn.record.whole_graphs)}, max err {(got.float()-want.float()).abs().max().item():.3g}", flush=True)
