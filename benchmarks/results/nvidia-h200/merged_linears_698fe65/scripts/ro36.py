"""Llama decode under reduce-overhead, merged linears on and off: the CUDA-graph
decisions (replay / record / plain) per call after warm-up, and cProfile's top host
functions over 20 calls."""
import cProfile, pstats, io, sys, time, torch
from collections import Counter
from benchmarks.host_overhead import instance_shapes
import fuseopt
from fuseopt.backends import cuda_graphs
decisions = Counter()
orig = cuda_graphs.GraphBook.choose
def choose(self, key, pointers):
    d = orig(self, key, pointers); decisions[d.kind] += 1; return d
cuda_graphs.GraphBook.choose = choose
for workload, s in instance_shapes("--models", "llama:decode"):
    for merge in (True, False):
        torch._dynamo.reset()
        model = workload.make_model(s.dims, torch.bfloat16, torch.device("cuda"), 0).eval()
        inputs = workload.make_inputs(s.dims, torch.bfloat16, torch.device("cuda"), 1)
        with torch.no_grad():
            fn = fuseopt.compile(model, inputs, backend="triton", mode="reduce-overhead", merge_linears=merge)
            for _ in range(10): fn(*inputs)
            torch.cuda.synchronize()
            decisions.clear()
            pr = cProfile.Profile(); pr.enable()
            for _ in range(20): fn(*inputs)
            pr.disable(); torch.cuda.synchronize()
        out = io.StringIO(); pstats.Stats(pr, stream=out).sort_stats("tottime").print_stats(18)
        print(f"== merge={merge}: decisions over 20 calls {dict(decisions)}")
        print("\n".join(l[:150] for l in out.getvalue().splitlines()[:40]))
