"""One model instance, several systems in one process: do_bench wall (L2 flushed), kernel
count and time (torch.profiler), host time per call without synchronization, and the
error against eager. A system is `name[/nomerge][ mode]`: `/nomerge` compiles with
merge_linears=False. Each system gets a fresh model (same seed)."""
import sys, time, torch
from triton.testing import do_bench
from benchmarks.host_overhead import instance_shapes
from benchmarks.timing import profile_kernels
import fuseopt

entry, names = sys.argv[1], sys.argv[2].split(",")
dev, dt = torch.device("cuda"), torch.bfloat16

def logits(out):
    if hasattr(out, "logits"): return out.logits
    if hasattr(out, "last_hidden_state"): return out.last_hidden_state
    return out[0] if isinstance(out, tuple | list) else out

for workload, s in instance_shapes("--models", entry):
    for name in names:
        torch._dynamo.reset()
        model = workload.make_model(s.dims, dt, dev, 0).eval()
        inputs = workload.make_inputs(s.dims, dt, dev, 1)
        system, _, mode = name.partition(" ")
        mode = mode or "default"
        system, _, flag = system.partition("/")
        with torch.no_grad():
            ref = logits(model(*inputs)).float()
            t0 = time.perf_counter()
            if system == "eager": fn = model
            elif system == "torch.compile": fn = torch.compile(model, mode=mode)
            else:
                fn = fuseopt.compile(model, inputs, backend=system.removeprefix("fuseopt-"), mode=mode,
                                     merge_linears=flag != "nomerge")
            call = lambda: fn(*inputs)
            for _ in range(5):
                out = call()
            torch.cuda.synchronize()
            compile_s = time.perf_counter() - t0
            err = ((logits(out).float() - ref).norm() / ref.norm()).item()
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
        print(f"== {entry} {name}: wall {wall:.0f} us, kernels {prof.kernels} / {prof.kernel_us:.0f} us, "
              f"host per call {min(hosts):.0f} us, rel err vs eager {err:.2e}, compile+5 calls {compile_s:.0f} s", flush=True)
        del fn, model
