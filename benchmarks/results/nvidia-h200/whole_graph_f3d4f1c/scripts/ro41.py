"""Model-suite instances under reduce-overhead: the CUDA-graph decisions per call after
warm-up (whole graphs and regions), what the whole graphs recorded, us per call over
200 back-to-back calls, and cProfile's top host functions over 20 calls."""
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
instance = sys.argv[1]
for backend in sys.argv[2].split(","):
    for workload, s in instance_shapes("--models", instance):
        torch._dynamo.reset()
        model = workload.make_model(s.dims, torch.bfloat16, torch.device("cuda"), 0).eval()
        inputs = workload.make_inputs(s.dims, torch.bfloat16, torch.device("cuda"), 1)
        with torch.no_grad():
            want = model(*inputs)
            fn = fuseopt.compile(model, inputs, backend=backend, mode="reduce-overhead")
            for _ in range(10): got = fn(*inputs)
            torch.cuda.synchronize()
            err = (got.float() - want.float()).abs().max().item()
            decisions.clear()
            pr = cProfile.Profile(); pr.enable()
            for _ in range(20): fn(*inputs)
            pr.disable(); torch.cuda.synchronize()
            t = time.perf_counter()
            for _ in range(200): fn(*inputs)
            torch.cuda.synchronize()
            us = (time.perf_counter() - t) / 200 * 1e6
        wholes = getattr(fn.record, "whole_graphs", {})
        print(f"== {instance} {backend}: {us:.1f} us/call; max abs err vs eager {err:.3g}; "
              f"decisions over 20 calls {dict(decisions)}; {len(fn.regions)} regions, "
              f"{len(fn.fallbacks)} fallbacks")
        for name, w in wholes.items():
            inst = [g for pool in w.graphs.values() for g in pool]
            print(f"   whole {name}: broken={w.broken} instances={len(inst)} copied={[len(g.copied) for g in inst]} pinned={[len(g.pinned) for g in inst]}")
        out = io.StringIO(); pstats.Stats(pr, stream=out).sort_stats("tottime").print_stats(12)
        print("\n".join(l[:150] for l in out.getvalue().splitlines()[:30]))
