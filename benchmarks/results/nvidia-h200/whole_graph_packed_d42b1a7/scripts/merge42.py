"""Llama decode under reduce-overhead, merged linears on or off: whole graphs, us per
call over 200 back-to-back calls (min of 3 rounds), kernel us, weights copied."""
import sys, time, torch
from benchmarks.host_overhead import instance_shapes
from benchmarks.timing import profile_kernels
import collections
import fuseopt
from fuseopt.backends import cuda_graphs
counts = collections.Counter()
_orig = cuda_graphs.GraphBook.choose
def _choose(self, key, pointers):
    d = _orig(self, key, pointers)
    counts[(getattr(self, "tag", "region"), d.kind)] += 1
    return d
cuda_graphs.GraphBook.choose = _choose
backend, merge, entry = sys.argv[1], sys.argv[2] == "merge", sys.argv[3]
for workload, s in instance_shapes("--models", entry):
    model = workload.make_model(s.dims, torch.bfloat16, torch.device("cuda"), 0).eval()
    inputs = workload.make_inputs(s.dims, torch.bfloat16, torch.device("cuda"), 1)
    with torch.no_grad():
        want = model(*inputs)
        if backend == "torch.compile":
            fn = torch.compile(model, mode="reduce-overhead")
        else:
            fn = fuseopt.compile(model, inputs, backend=backend, mode="reduce-overhead", merge_linears=merge)
        for _ in range(10): got = fn(*inputs)
        torch.cuda.synchronize()
        if backend != "torch.compile":
            for n, w in fn.record.whole_graphs.items(): w.book.tag = n
        counts.clear()
        rounds = []
        for _ in range(3):
            t = time.perf_counter()
            for _ in range(200): fn(*inputs)
            torch.cuda.synchronize()
            rounds.append((time.perf_counter() - t) / 200 * 1e6)
        try:
            p = profile_kernels(lambda: fn(*inputs), torch.device("cuda"), 5)
            k = f"{p.kernels} kernels, {p.kernel_us:.1f} us"
        except Exception as e:
            k = repr(e)
    print("   decisions over 600 calls:", dict(sorted(counts.items())))
    err = (got.float() - want.float()).abs().max().item()
    copied = ""
    if backend != "torch.compile":
        copied = {n: sorted({sum(b.numel() for b in g.buffers) for pool in w.graphs.values() for g in pool}) for n, w in fn.record.whole_graphs.items()}
    print(f"== {entry} {backend} merge={merge}: us/call rounds {[round(r,1) for r in rounds]} min {min(rounds):.1f}; {k}; err {err:.3g}; elements copied per whole graph {copied}", flush=True)
