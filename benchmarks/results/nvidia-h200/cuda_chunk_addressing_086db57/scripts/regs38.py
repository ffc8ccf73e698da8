import sys, re, subprocess, torch, fuseopt
import fuseopt.backends.cuda.backend as b
FN = {"var_middle": lambda x: x.var(1), "amax_first": lambda x: x.amax(0), "sum_middle": lambda x: x.sum(1),
      "var_columns": lambda x: x.var(0), "sum_last": lambda x: x.sum(-1), "sum_first": lambda x: x.sum(0),
      "softmax": lambda x: torch.softmax(x.float(), -1).to(x.dtype),
      "layer_norm": lambda x: torch.nn.functional.layer_norm(x, x.shape[-1:]), "gelu": lambda x: torch.nn.functional.gelu(x) * 2}
cases = [("var_middle","1024x64x512"),("var_middle","64x1024x1024"),("amax_first","1024x64x512"),("amax_first","64x1024x1024"),
         ("sum_middle","64x1024x1024"),("sum_first","1024x64x512"),("var_columns","65536x1024"),("sum_last","64x1024x1024"),
         ("softmax","4096x4096"),("layer_norm","8192x4096"),("gelu","8192x8192")]
for name, sh in cases:
    shape = tuple(int(s) for s in sh.split("x"))
    class M(torch.nn.Module):
        def forward(self, x): return FN[name](x)
    c = fuseopt.compile(M(), (torch.randn(shape, dtype=torch.bfloat16),), backend="interpret")
    for r in c.regions:
        for k in b.CudaBackend().compile(r.imported.clone(), r.func_name, {}).cuda_kernels:
            open("/tmp/r38.cu", "w").write(k.source)
            out = subprocess.run(["nvcc", "-arch=sm_90", "-cubin", "-O3", "-Xptxas", "-v", "-o", "/dev/null", "/tmp/r38.cu"], capture_output=True, text=True).stderr
            regs = re.findall(r"Used (\d+) registers", out); sp = re.findall(r"(\d+) bytes spill stores", out)
            lb = re.search(r"__launch_bounds__\(([^)]*)\)", k.source).group(1)
            print(f"{name} {sh} {k.c_name} threads {k.threads} lb ({lb}) regs {regs} spill {sp} two-bodies {'FO_ALIGNED' in k.source}", flush=True)
