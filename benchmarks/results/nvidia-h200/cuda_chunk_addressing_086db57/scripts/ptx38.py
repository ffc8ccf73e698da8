"""Print/compile the CUDA kernels of a torch reduction; count PTX instructions."""
import sys, os, re, dataclasses, subprocess, torch, fuseopt
import fuseopt.backends.cuda.backend as b
if os.environ.get("T"):
    kw = {k: eval(v) for k, v in (p.split("=") for p in os.environ["T"].split(","))}
    b.CUDA = dataclasses.replace(b.CUDA, **kw)
FN = {"var_middle": lambda x: x.var(1), "amax_first": lambda x: x.amax(0), "sum_middle": lambda x: x.sum(1),
      "var_columns": lambda x: x.var(0), "sum_rows": lambda x: x.sum(-1), "sum_first": lambda x: x.sum(0),
      "softmax": lambda x: torch.softmax(x.float(), -1).to(x.dtype),
      "layer_norm": lambda x: torch.nn.functional.layer_norm(x, x.shape[-1:])}
fn = FN[sys.argv[1]]
shape = tuple(int(s) for s in sys.argv[2].split("x"))
class M(torch.nn.Module):
    def forward(self, x): return fn(x)
x = torch.randn(shape, dtype=torch.bfloat16)
c = fuseopt.compile(M(), (x,), backend="interpret")
show = "-s" in sys.argv
for r in c.regions:
    compiled = b.CudaBackend().compile(r.imported.clone(), r.func_name, {})
    for k in compiled.cuda_kernels:
        src = k.source
        if show: print(src)
        open("/tmp/k38.cu", "w").write(src)
        subprocess.run(["nvcc", "-arch=sm_90", "-ptx", "-o", "/tmp/k38.ptx", "/tmp/k38.cu"], check=True)
        ptx = open("/tmp/k38.ptx").read()
        body = [l.strip() for l in ptx.splitlines() if re.match(r"\s+[a-z@]", l) and not l.strip().startswith((".reg", ".loc", "//"))]
        kinds = {}
        for l in body:
            op = l.split()[0] if not l.startswith("@") else l.split()[1]
            op = op.split(".")[0]
            kinds[op] = kinds.get(op, 0) + 1
        top = sorted(kinds.items(), key=lambda kv: -kv[1])[:14]
        print(k.c_name, src.split("launch:")[1].splitlines()[0] if "launch:" in src else "", "ptx instr", len(body), top)
