"""shim_torch.py - a real PyTorch + Triton process under the shim (GPU).

Run as: python3 shim_torch.py MODE OUTDIR
  work     cuBLAS matmul, elementwise ops, a Triton matmul whose tiles fit
           SM120, and a CUDA graph capture + replay; saves the results to
           OUTDIR/MODE.pt so runs with and without the shim can be compared
  big      a Triton kernel whose tiles need 131072 B of shared memory:
           prints OK or the OutOfResources message
  matmul   bf16 and fp64 matmuls (cuBLAS / cuBLASLt pick their Hopper kernels
           on an H100/H200: 147456-213268 B of shared memory), plain, batched
           and with a bias; saves them to OUTDIR/matmul.TAG.pt (TAG: argv[3])
"""
import os
import sys

import torch
import triton
import triton.language as tl


@triton.jit
def mm(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pm, pn = tl.program_id(0), tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        x = tl.load(a + rm[:, None] * K + (k + rk)[None, :])
        y = tl.load(b + (k + rk)[:, None] * N + rn[None, :])
        acc += tl.dot(x, y)
    tl.store(c + rm[:, None] * N + rn[None, :], acc.to(tl.bfloat16))


def triton_mm(a, b, BM, BN, BK, stages):
    c = torch.empty(a.shape[0], b.shape[1], device="cuda", dtype=torch.bfloat16)
    mm[(a.shape[0] // BM, b.shape[1] // BN)](a, b, c, a.shape[0], b.shape[1], a.shape[1],
                                             BM=BM, BN=BN, BK=BK, num_warps=8, num_stages=stages)
    return c


def work(out):
    g = torch.Generator(device="cuda").manual_seed(7)
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16, generator=g)
    b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16, generator=g)
    r = {}
    r["cublas"] = a @ b                                   # cuBLAS picks large-tile kernels
    r["elementwise"] = torch.nn.functional.silu(a) * b + 1
    r["softmax"] = torch.softmax(a.float(), dim=-1)
    r["triton"] = triton_mm(a[:512, :512].contiguous(), b[:512, :512].contiguous(), 64, 64, 64, 2)
    static_in = a[:1024, :1024].clone()
    graph = torch.cuda.CUDAGraph()
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        for _ in range(2):  # warm up before capture
            y = torch.relu(static_in @ static_in) * 2
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(graph):
        y = torch.relu(static_in @ static_in) * 2
    static_in.copy_(b[:1024, :1024])
    graph.replay()
    torch.cuda.synchronize()
    r["graph"] = y.clone()
    torch.save({k: v.cpu() for k, v in r.items()}, os.path.join(out, f"{sys.argv[1]}.pt"))
    print("work done")


def matmul(out, tag):
    g = torch.Generator(device="cuda").manual_seed(11)
    r = {}
    for dt in (torch.bfloat16, torch.float64):
        name = str(dt).split(".")[-1]
        a = torch.randn(4096, 4096, device="cuda", dtype=dt, generator=g)
        b = torch.randn(4096, 4096, device="cuda", dtype=dt, generator=g)
        bias = torch.randn(4096, device="cuda", dtype=dt, generator=g)
        r[name] = a @ b
        r[name + "_bmm"] = torch.bmm(a.view(16, 256, 4096), b[:, :512].expand(16, 4096, 512))
        r[name + "_linear"] = torch.nn.functional.linear(a[:1000], b, bias)
    torch.cuda.synchronize()
    torch.save({k: v.cpu() for k, v in r.items()}, os.path.join(out, f"matmul.{tag}.pt"))
    print("matmul done")


def big():
    a = torch.randn(256, 256, device="cuda", dtype=torch.bfloat16)
    try:
        triton_mm(a, a, 128, 128, 64, 4)
        torch.cuda.synchronize()
        print("OK")
    except triton.runtime.errors.OutOfResources as e:
        print("OutOfResources:", e)


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "big":
        big()
    elif mode == "matmul":
        matmul(sys.argv[2], sys.argv[3])
    else:
        work(sys.argv[2])
