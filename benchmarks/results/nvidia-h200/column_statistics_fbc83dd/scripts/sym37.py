"""Why test_every_graph_of_symbolic_sizes_packs fails on this torch: the packs per ATen
graph, the Dynamo graphs and the merge decisions."""
import logging, sys, torch
sys.path.insert(0, "tests")
import fuseopt
from fuseopt.frontends.fx import dynamo_backend, merged_linears
from test_merged_linears import Block
print("torch", torch.__version__)
replaced = []
orig_pack = dynamo_backend.pack_at_run_time
def spy_pack(*a):
    r = orig_pack(*a); replaced.append(r)
    print("pack_at_run_time ->", r, "signatures:", a[1] if len(a) > 1 else None)
    print(a[0].graph if hasattr(a[0], "graph") else a[0])
    return r
dynamo_backend.pack_at_run_time = spy_pack
orig_merge = dynamo_backend.merge_linears
def spy_merge(gm, ex):
    print("== dynamo graph, example inputs:", [getattr(e, "shape", e) for e in ex])
    print(gm.graph)
    r = orig_merge(gm, ex); print("merge_linears ->", r); return r
dynamo_backend.merge_linears = spy_merge
logging.getLogger("fuseopt").setLevel(logging.DEBUG); logging.basicConfig()
torch.manual_seed(12)
model = Block(bias=True).eval()
compiled = fuseopt.compile(model, backend="interpret", dynamic=True, symbolic="dynamic")
with torch.no_grad():
    for b, s in ((2, 5), (3, 7)):
        x = torch.randn(b, s, 16)
        print("max err", (compiled(x) - model(x)).abs().max().item())
print("replaced", replaced)
