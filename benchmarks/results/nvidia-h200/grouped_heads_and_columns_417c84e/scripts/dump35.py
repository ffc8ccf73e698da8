"""Which fuseopt-cuda kernels are copies ("copy" in the name) in a model-suite instance:
their region's nn function (as imported) and the kernel source."""
import sys, torch
from benchmarks.host_overhead import instance_shapes
import fuseopt
dev, dt = torch.device("cuda"), torch.bfloat16
for workload, s in instance_shapes("--models", sys.argv[1]):
    model = workload.make_model(s.dims, dt, dev, 0).eval()
    inputs = workload.make_inputs(s.dims, dt, dev, 1)
    with torch.no_grad():
        c = fuseopt.compile(model, inputs, backend=sys.argv[2])
        for _ in range(3):
            c(*inputs)
    print("graphs:", [g.name for g in c.graphs], "regions:", len(c.regions), "kernels:", len(c.kernels))
    shown = set()
    for k in c.kernels:
        if "copy" in k.name or "broadcast" in k.name:
            print(f"== kernel {k.name} region {k.region} ops {k.ops} schedule {k.schedule} launch {k.launch}")
            if k.region not in shown:
                shown.add(k.region)
                for r in c.regions:
                    if r.func_name == k.region:
                        print(str(r.imported)[-6000:])
            print((k.source or "")[:3000])
