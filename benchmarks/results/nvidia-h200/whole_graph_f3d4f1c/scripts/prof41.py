"""Llama decode under reduce-overhead, per system: us per call over 200 back-to-back
calls, and a torch.profiler trace of 5 replayed calls: kernel time per call, GPU busy
span per call, the kernels by total time and the memcpy/memset work."""
import sys, time, torch
from collections import defaultdict
from torch.profiler import profile, ProfilerActivity
from benchmarks.host_overhead import instance_shapes, make_system
for name in sys.argv[2].split(","):
    for workload, s in instance_shapes("--models", sys.argv[1]):
        torch._dynamo.reset()
        model = workload.make_model(s.dims, torch.bfloat16, torch.device("cuda"), 0).eval()
        inputs = workload.make_inputs(s.dims, torch.bfloat16, torch.device("cuda"), 1)
        with torch.no_grad():
            fn = make_system(name, model, inputs)
            for _ in range(10): fn(*inputs)
            torch.cuda.synchronize()
            for rep in range(2):
                t = time.perf_counter()
                for _ in range(200): fn(*inputs)
                torch.cuda.synchronize()
                us = (time.perf_counter() - t) / 200 * 1e6
                print(f"== {sys.argv[1]} {name}: {us:.1f} us/call (launch-inclusive, 200 calls)")
            with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
                for _ in range(5): fn(*inputs)
                torch.cuda.synchronize()
        ev = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        tot = defaultdict(float); cnt = defaultdict(int)
        for e in ev:
            tot[e.name] += e.device_time_total; cnt[e.name] += 1
        if ev:
            start = min(e.time_range.start for e in ev); end = max(e.time_range.end for e in ev)
            print(f"   device events {len(ev)/5:.0f}/call, busy {sum(tot.values())/5:.1f} us/call, span {(end-start)/5:.1f} us/call")
        for k, v in sorted(tot.items(), key=lambda kv: -kv[1])[:14]:
            print(f"   {v/5:8.1f} us/call  x{cnt[k]/5:.0f}  {k[:110]}")
        mem = {k: v for k, v in tot.items() if "emcpy" in k or "emset" in k or "Memcpy" in k}
        print(f"   memcpy/memset: {mem}")
