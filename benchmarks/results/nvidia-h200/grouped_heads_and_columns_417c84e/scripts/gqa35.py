"""SDPA with grouped-query heads: repeated K/V (the copy) vs enable_gqa, per backend (kernel us)."""
import torch, torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend
from triton.testing import do_bench
dev, dt = "cuda", torch.bfloat16
print(torch.__version__)
for (b, h, kvh, L, S, d, causal) in [(1,16,4,2048,2048,128,True),(1,12,2,2048,2048,128,True),(4,32,8,2048,2048,128,True),(8,16,4,1,4096,128,False),(8,32,8,1,4096,128,False)]:
    q = torch.randn(b, h, L, d, device=dev, dtype=dt)
    k = torch.randn(b, kvh, S, d, device=dev, dtype=dt)
    v = torch.randn(b, kvh, S, d, device=dev, dtype=dt)
    rep = h // kvh
    kr = k.repeat_interleave(rep, 1); vr = v.repeat_interleave(rep, 1)
    ref = F.scaled_dot_product_attention(q.double(), kr.double(), vr.double(), is_causal=causal and L > 1)
    c = causal and L > 1
    row = [f"b{b} h{h} kv{kvh} L{L} S{S} d{d} causal={c}"]
    t_copy = do_bench(lambda: (k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)), warmup=20, rep=100, return_mode="median") * 1e3
    row.append(f"repeat K+V {t_copy:.1f}")
    for name, be in [("default", None), ("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION), ("efficient", SDPBackend.EFFICIENT_ATTENTION)]:
        for gqa in (False, True):
            args = (q, k, v) if gqa else (q, kr, vr)
            f = lambda: F.scaled_dot_product_attention(*args, is_causal=c, enable_gqa=gqa)
            try:
                if be is None:
                    out = f(); t = do_bench(f, warmup=20, rep=100, return_mode="median") * 1e3
                else:
                    with sdpa_kernel([be]):
                        out = f(); t = do_bench(f, warmup=20, rep=100, return_mode="median") * 1e3
                err = (out.double() - ref).abs().max().item()
                row.append(f"{name}{'-gqa' if gqa else ''} {t:.1f} (err {err:.1e})")
            except Exception as e:
                row.append(f"{name}{'-gqa' if gqa else ''} n/a ({str(e).splitlines()[0][:60]})")
    print(" | ".join(row), flush=True)
