"""Llama prefill on one system: do_bench wall (L2 flushed, as benchmarks.models), kernel
time, host time per call without synchronization, synchronizing calls made in a call
(sync debug mode), and the host ops with the most CPU time."""
import sys, time, warnings, torch
from triton.testing import do_bench
from benchmarks.host_overhead import instance_shapes, make_system
from benchmarks.timing import profile_kernels

entry, names = sys.argv[1], sys.argv[2].split(",")
dev, dt = torch.device("cuda"), torch.bfloat16
for workload, s in instance_shapes("--models", entry):
    model = workload.make_model(s.dims, dt, dev, 0).eval()
    inputs = workload.make_inputs(s.dims, dt, dev, 1)
    for name in names:
        torch._dynamo.reset()
        with torch.no_grad():
            fn = make_system(name, model, inputs)
            call = lambda: fn(*inputs)
            for _ in range(5):
                call()
            torch.cuda.synchronize()
            wall = do_bench(call, warmup=50, rep=300, return_mode="median") * 1e3
            prof = profile_kernels(call, dev, 5, 5)
            hosts = []
            for _ in range(5):
                torch.cuda.synchronize()
                t = time.perf_counter()
                for _ in range(10):
                    call()
                hosts.append((time.perf_counter() - t) / 10 * 1e6)
            torch.cuda.synchronize()
            torch.cuda.set_sync_debug_mode("warn")
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                call()
            torch.cuda.set_sync_debug_mode(0)
            syncs = [str(w.message)[:120] for w in caught if "synchroniz" in str(w.message).lower()]
        print(f"== {entry} {name}: wall {wall:.0f} us, kernels {prof.kernels} / {prof.kernel_us:.0f} us, "
              f"host per call {min(hosts):.0f} us (min of 5 x 10), synchronizing calls in one call: {len(syncs)}")
        for m in dict.fromkeys(syncs):
            print("   sync:", m)
