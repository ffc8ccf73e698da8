"""Where a default-mode call leaves the GPU idle: for each system, a torch.profiler
trace of 3 calls after warm-up (each call synchronized), the time from the call's start
to its first kernel, and the longest gaps between kernels with the CPU ops that ran
during them."""
import sys, time, torch
from torch.profiler import profile, ProfilerActivity
from benchmarks.host_overhead import instance_shapes, make_system
inst = sys.argv[1]
for name in sys.argv[2].split(","):
    for workload, s in instance_shapes("--models", inst):
        torch._dynamo.reset()
        model = workload.make_model(s.dims, torch.bfloat16, torch.device("cuda"), 0).eval()
        inputs = workload.make_inputs(s.dims, torch.bfloat16, torch.device("cuda"), 1)
        with torch.no_grad():
            fn = make_system(name, model, inputs)
            for _ in range(5): fn(*inputs)
            torch.cuda.synchronize()
            walls = []
            for _ in range(20):
                torch.cuda.synchronize(); t = time.perf_counter(); fn(*inputs); torch.cuda.synchronize()
                walls.append((time.perf_counter() - t) * 1e6)
            walls.sort()
            with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
                for _ in range(3):
                    with torch.profiler.record_function("CALL"):
                        fn(*inputs)
                    torch.cuda.synchronize()
        evs = prof.events()
        calls = [e for e in evs if e.name == "CALL" and e.device_type == torch.autograd.DeviceType.CPU]
        gpu = sorted([e for e in evs if e.device_type == torch.autograd.DeviceType.CUDA], key=lambda e: e.time_range.start)
        cpu = [e for e in evs if e.device_type == torch.autograd.DeviceType.CPU and e.name != "CALL"]
        print(f"== {inst} {name}: synchronized call wall median {walls[10]:.1f} us (min {walls[0]:.1f})")
        for c in calls[-1:]:
            ks = [k for k in gpu if k.time_range.start >= c.time_range.start]
            if not ks: continue
            first = ks[0].time_range.start - c.time_range.start
            busy = sum(k.time_range.end - k.time_range.start for k in ks)
            span = max(k.time_range.end for k in ks) - c.time_range.start
            print(f"   call start -> first kernel {first:.1f} us; kernels {len(ks)}, busy {busy:.1f}, start->last end {span:.1f}, host call {c.time_range.end - c.time_range.start:.1f}")
            gaps = []
            end = ks[0].time_range.end
            for prev, k in zip(ks, ks[1:]):
                g = k.time_range.start - max(end, prev.time_range.end)
                end = max(end, k.time_range.end)
                if g > 3: gaps.append((g, prev, k))
            gaps.sort(key=lambda t: -t[0])
            print(f"   gaps > 3 us: {len(gaps)}, total {sum(g for g, *_ in gaps):.1f} us")
            for g, prev, k in gaps[:8]:
                lo, hi = prev.time_range.end, k.time_range.start
                during = sorted({e.name for e in cpu if e.time_range.start < hi and e.time_range.end > lo and (e.time_range.end - e.time_range.start) < 5000})
                print(f"   {g:7.1f} us after {prev.name[:40]} before {k.name[:40]}; cpu: {', '.join(during)[:300]}")
            # CPU ops in the lead-in
            lead = sorted({e.name for e in cpu if e.time_range.start >= c.time_range.start and e.time_range.start < ks[0].time_range.start})
            print(f"   lead-in cpu ops: {', '.join(lead)[:400]}")
