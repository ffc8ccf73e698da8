"""One breadth row on one system, for ncu: argv case, shape label, system."""
import os, sys, dataclasses, torch
if os.environ.get("FUSEOPT_CUDA_TARGET"):  # e.g. "warp_per_row=True"
    import fuseopt.backends.cuda.backend as b
    kw = {k: eval(v) for k, v in (p.split("=") for p in os.environ["FUSEOPT_CUDA_TARGET"].split(","))}
    b.CUDA = dataclasses.replace(b.CUDA, **kw)
from benchmarks.breadth.__main__ import select_cases
from benchmarks.host_overhead import make_system
dev, dt = torch.device("cuda"), torch.bfloat16
for _, w, s in select_cases([sys.argv[1]], False):
    if s.label != sys.argv[2]:
        continue
    model = w.make_model(s.dims, dt, dev, 0).eval()
    inputs = w.make_inputs(s.dims, dt, dev, 1)
    with torch.no_grad():
        fn = make_system(sys.argv[3], model, inputs)
        for _ in range(3):
            fn(*inputs)
        torch.cuda.synchronize()
