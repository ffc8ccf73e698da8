"""One model instance, several systems compiled in one process, then measured in
interleaved rounds (each round: every system once), so that drift of the host over the
process's life falls on all alike. Per system: median over rounds of the do_bench wall
(L2 flushed) and of host us per call (min of 3 x 10 unsynchronized calls), kernels per
call and kernel us (torch.profiler), error against eager; with --top, its longest
kernels. A system is `name[/nomerge][ mode]` (`/nomerge`: merge_linears=False)."""
import statistics, sys, time, torch
from triton.testing import do_bench
from benchmarks.host_overhead import instance_shapes
from benchmarks.timing import profile_kernels
import fuseopt

entry, names = sys.argv[1], sys.argv[2].split(",")
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
top = "--top" in sys.argv
dev, dt = torch.device("cuda"), torch.bfloat16

def logits(out):
    if hasattr(out, "logits"): return out.logits
    if hasattr(out, "last_hidden_state"): return out.last_hidden_state
    return out[0] if isinstance(out, tuple | list) else out

for workload, s in instance_shapes("--models", entry):
    systems = {}
    for name in names:
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
            call = (lambda fn, inputs: lambda: fn(*inputs))(fn, inputs)
            for _ in range(5):
                out = call()
            torch.cuda.synchronize()
            err = ((logits(out).float() - ref).norm() / ref.norm()).item()
            prof = profile_kernels(call, dev, 5, 14)
        systems[name] = dict(call=call, err=err, prof=prof, walls=[], hosts=[], compile=time.perf_counter() - t0)
    with torch.no_grad():
        for _ in range(rounds):
            for name, m in systems.items():
                call = m["call"]
                m["walls"].append(do_bench(call, warmup=10, rep=100, return_mode="median") * 1e3)
                hosts = []
                for _ in range(3):
                    torch.cuda.synchronize()
                    t = time.perf_counter()
                    for _ in range(10):
                        call()
                    hosts.append((time.perf_counter() - t) / 10 * 1e6)
                torch.cuda.synchronize()
                m["hosts"].append(min(hosts))
    for name, m in systems.items():
        p = m["prof"]
        print(f"== {entry} {name}: wall {statistics.median(m['walls']):.0f} us (rounds {min(m['walls']):.0f}-{max(m['walls']):.0f}), "
              f"kernels {p.kernels} / {p.kernel_us:.0f} us, host per call {statistics.median(m['hosts']):.0f} us, "
              f"rel err vs eager {m['err']:.2e}, compile+5 calls {m['compile']:.0f} s", flush=True)
        if top:
            for n, us, k in p.top:
                print(f"     {us:8.1f} us  x{k:4.1f}  {n[:110]}")
