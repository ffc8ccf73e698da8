"""GPT-2 / Llama prefill, default mode: per-call host time (GPU drained first), wall of
back-to-back calls, cumulative cProfile and the longest GPU gaps in one call."""
import cProfile, io, pstats, sys, time, torch
from benchmarks.host_overhead import instance_shapes, make_system
name, entry = sys.argv[1], sys.argv[2]
for workload, s in instance_shapes("--models", entry):
    model = workload.make_model(s.dims, torch.bfloat16, torch.device("cuda"), 0).eval()
    inputs = workload.make_inputs(s.dims, torch.bfloat16, torch.device("cuda"), 1)
    with torch.no_grad():
        fn = make_system(name, model, inputs)
        for _ in range(5): fn(*inputs)
        torch.cuda.synchronize()
        host = []
        for _ in range(30):
            torch.cuda.synchronize(); t = time.perf_counter(); fn(*inputs); host.append(time.perf_counter() - t)
        torch.cuda.synchronize()
        host.sort()
        t = time.perf_counter()
        for _ in range(100): fn(*inputs)
        torch.cuda.synchronize()
        wall = (time.perf_counter() - t) / 100
        print(f"== {name} {entry}: host us a call (GPU drained) median {host[15]*1e6:.0f} min {host[0]*1e6:.0f}; back-to-back {wall*1e6:.0f} us", flush=True)
        pr = cProfile.Profile(); pr.enable()
        for _ in range(20): fn(*inputs)
        pr.disable(); torch.cuda.synchronize()
        out = io.StringIO(); pstats.Stats(pr, stream=out).sort_stats("cumtime").print_stats(35); print(out.getvalue()[:9000])
        from torch.profiler import profile, ProfilerActivity
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(3): fn(*inputs)
            torch.cuda.synchronize()
        ev = sorted([e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA and e.device_time_total > 0], key=lambda e: e.time_range.start)
        gaps = sorted(((b.time_range.start - a.time_range.end, a.name[:50], b.name[:50]) for a, b in zip(ev, ev[1:])), reverse=True)[:8]
        for g in gaps: print(f"   gap {g[0]:.1f} us after {g[1]} before {g[2]}")
        cpu = {}
        for e in prof.key_averages():
            if e.self_cpu_time_total > 0: cpu[e.key] = e.self_cpu_time_total / 3
        for k, v in sorted(cpu.items(), key=lambda kv: -kv[1])[:15]: print(f"   cpu {v:8.1f} us  {k[:70]}")
