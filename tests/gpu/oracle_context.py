"""oracle_context.py - SGLang's own context_attention_fwd (prefill_attention.py),
from its released packages (0.5.8, 0.5.9, 0.5.23), as the oracle for rule
sglang-context-attention (GPU; run by tests/gpu/oracle_context.sh).

The kernel files come from the wheels unpacked by tests/oracle/fetch.sh;
nothing of SGLang is committed.  On capability > 8 SGLang compiles BLOCK 128
x 128, 8 warps; at head size 256 in bf16 that is 131072 B on an H100/H200
(163840 B on sm_120), over SM120's 101376 B: under
`sm120 run --mode reroute --target sm120` the shim reroutes it to
attn_extend_256_bf16 (ATTN_EXTEND_START_LEN | ATTN_EXTEND_SKIP_PREFIX).

Rerouted cases, every scalar distinct (only 0.5.23's host function takes
sm_scale; 0.5.8 and 0.5.9 pass 1/sqrt(head size), 1/16): SGLang 0.5.23, a
vision tower's call (non-causal, 16 heads, q/k/v views of one packed qkv
tensor, sequences 1, 333, 1025 and 64 tokens at starts with gaps, sm_scale
0.0371) and causal GQA (12 q heads over 3 kv heads, q/k/v with a padded head
stride, sm_scale 0.05); SGLang 0.5.9 as VisionTritonAttention calls it
(cu_seqlens, batch + 1 entries, as B_Start_Loc); SGLang 0.5.8 causal.  Every element no sequence owns (gap rows, head padding) is NaN in
q, k and v, and o is NaN before each launch: a read past a sequence shows,
and the rows no sequence owns must still be NaN after it.  Refused cases:
head size 192 (BLOCK_DMODEL 256, masked: no bundled kernel; refused when
Triton loads it, OutOfResources as on the card) and head size 256 in fp16
(refused at launch: the bundled kernel reads bf16).

Run as: python3 tests/gpu/oracle_context.py MODE ...
  run OUT.pt       each rerouted case launched eagerly, then captured in a
                   CUDA graph and replayed on new inputs of the same shapes;
                   each refused case once; saves inputs, outputs and, in
                   OUT.pt.json, the cases and what happened.
  check PLAIN.pt SHIM.pt
                   inputs identical; over the rows the sequences own, each
                   output against float64: the shim's max |error| within
                   2 x SGLang's own + 1 bf16 ulp at the largest |reference|
                   (SGLang and the bundled kernel both round P to bf16 for
                   P.V: the same precision class); the other rows NaN in both.
  logcheck OUT.pt.json LOG...
                   the shim's JSON log: two rerouted launches (eager and
                   capture; replays do not pass the hooks) per rerouted case by
                   sglang-context-attention to attn_extend_256_bf16, one
                   refusal per refused case with its reason, nothing else
                   refused.
Prints "ok - ..." / "not ok - ..." lines.
"""
import glob
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "oracle"))
sys.path.insert(0, HERE)
from oracle_common import bf16_ulp, shim_active  # noqa: E402

RULE, BUNDLED = "sglang-context-attention", "attn_extend_256_bf16"
PATHS = {"0.5.8": "sglang/srt/layers/attention/triton_ops/prefill_attention.py",
         "0.5.9": "sglang/srt/layers/attention/triton_ops/prefill_attention.py",
         "0.5.23": "sglang/kernels/ops/attention/prefill_attention.py"}

# name: release, q heads, kv heads, head size, lengths, gaps before each
# sequence (None: cu_seqlens, as VisionTritonAttention passes it), causal,
# sm_scale (None: the release's default 1/sqrt(d)), layout ("packed": views of
# one qkv tensor; "padded": head stride d + 8), dtype, expect, reason.
CASES = [
    dict(name="vit-d256", release="0.5.23", hq=16, hkv=16, d=256, lens=[1, 333, 1025, 64],
         gaps=[3, 0, 5, 2], causal=False, scale=0.0371, layout="packed", dtype="bfloat16",
         expect="reroute"),
    dict(name="causal-gqa-d256", release="0.5.23", hq=12, hkv=3, d=256, lens=[77, 1, 530, 129],
         gaps=[0, 7, 1, 0], causal=True, scale=0.05, layout="padded", dtype="bfloat16",
         expect="reroute"),
    dict(name="vit-d256-0.5.9", release="0.5.9", hq=8, hkv=8, d=256, lens=[200, 1000],
         gaps=None, causal=False, scale=None, layout="plain", dtype="bfloat16",
         expect="reroute"),
    dict(name="causal-d256-0.5.8", release="0.5.8", hq=4, hkv=4, d=256, lens=[300, 17],
         gaps=[1, 4], causal=True, scale=None, layout="plain", dtype="bfloat16",
         expect="reroute"),
    dict(name="vit-d192", release="0.5.23", hq=16, hkv=16, d=192, lens=[333, 64], gaps=None,
         causal=False, scale=0.0371, layout="plain", dtype="bfloat16", expect="refuse",
         reason="compiled with Lk 192"),
    dict(name="vit-d256-fp16", release="0.5.9", hq=16, hkv=16, d=256, lens=[333, 64], gaps=None,
         causal=False, scale=None, layout="plain", dtype="float16", expect="refuse",
         reason="Q is *fp16"),
]


def starts_of(case):
    """Each sequence's first row, and the rows in all (gaps included)."""
    starts, row = [], 0
    for n, gap in zip(case["lens"], case["gaps"] or [0] * len(case["lens"])):
        row += gap
        starts.append(row)
        row += n
    return starts, row + 3


def make(case, seed):
    """Inputs of @case: q, k, v (views as the layout says), the index arrays
    and o, every element no sequence owns NaN."""
    import torch
    dt = getattr(torch, case["dtype"])
    g = torch.Generator(device="cuda").manual_seed(seed)
    starts, rows = starts_of(case)
    hq, hkv, d = case["hq"], case["hkv"], case["d"]
    owned = torch.zeros(rows, dtype=torch.bool, device="cuda")
    for s, n in zip(starts, case["lens"]):
        owned[s:s + n] = True

    def tensor(heads, amp, width=d):
        t = torch.randn(rows, heads, width, generator=g, device="cuda") * amp
        t[~owned] = float("nan")
        t[..., d:] = float("nan")
        return t.to(dt)

    if case["layout"] == "packed":
        qkv = torch.cat([tensor(hq, 2.0), tensor(hkv, 1.0), tensor(hkv, 1.0)], dim=1)
        q, k, v = qkv[:, :hq], qkv[:, hq:hq + hkv], qkv[:, hq + hkv:]
    elif case["layout"] == "padded":
        q, k, v = (tensor(h, a, d + 8)[..., :d] for h, a in ((hq, 2.0), (hkv, 1.0), (hkv, 1.0)))
    else:
        q, k, v = tensor(hq, 2.0), tensor(hkv, 1.0), tensor(hkv, 1.0)
    if case["gaps"] is None:
        cu = torch.tensor(starts + [starts[-1] + case["lens"][-1]], dtype=torch.int32,
                          device="cuda")
        start, lens = cu, (cu[1:] - cu[:-1]).contiguous()
    else:
        start = torch.tensor(starts, dtype=torch.int32, device="cuda")
        lens = torch.tensor(case["lens"], dtype=torch.int32, device="cuda")
    o = torch.full((rows, hq, d), float("nan"), dtype=dt, device="cuda")
    return dict(q=q, k=k, v=v, start=start, lens=lens, o=o, owned=owned)


def launch(mod, case, inp):
    """SGLang's call, as its callers make it (sm_scale only where given: 0.5.23)."""
    extra = {} if case["scale"] is None else {"sm_scale": case["scale"]}
    mod.context_attention_fwd(inp["q"], inp["k"], inp["v"], inp["o"], inp["start"], inp["lens"],
                              max(case["lens"]), is_causal=case["causal"], **extra)


def saved(inp):
    return {k: v.cpu().clone() for k, v in inp.items()}


def run(out):
    import torch
    import frameworks
    from triton.runtime.errors import OutOfResources
    who = "shim" if shim_active() else "no shim"
    mods = {r: frameworks.load("sglang", r, p) for r, p in PATHS.items()}
    result, manifest, bad = {}, [], 0
    for i, case in enumerate(CASES):
        meta = dict(case)
        mod = mods[case["release"]]
        inp = make(case, 100 + 2 * i)
        if case["expect"] == "reroute":
            launch(mod, case, inp)
            torch.cuda.synchronize()
            result[f"{case['name']}/eager"] = saved(inp)
            graph = torch.cuda.CUDAGraph()
            inp["o"].fill_(float("nan"))
            with torch.cuda.graph(graph):
                launch(mod, case, inp)
            fresh = make(case, 101 + 2 * i)
            for k in ("q", "k", "v"):
                inp[k].copy_(fresh[k])
            inp["o"].fill_(float("nan"))
            graph.replay()
            torch.cuda.synchronize()
            result[f"{case['name']}/graph"] = saved(inp)
            meta["outcome"] = "ran"
        elif not shim_active():
            launch(mod, case, inp)
            torch.cuda.synchronize()
            o = inp["o"][inp["owned"]]
            finite = bool(torch.isfinite(o.float()).all())
            meta["outcome"] = "ran"
            bad += not finite
            print(f"{'ok' if finite else 'not ok'} - {case['name']} ({who}): SGLang's kernel runs "
                  f"it and writes finite outputs (the shim must refuse it)")
        else:
            try:
                launch(mod, case, inp)
                torch.cuda.synchronize()
                meta["outcome"], msg = "ran", ""
            except OutOfResources as e:
                meta["outcome"], msg = "load", str(e).splitlines()[0]
            except RuntimeError as e:
                meta["outcome"], msg = "launch", str(e).splitlines()[0]
            good = meta["outcome"] in ("load", "launch")
            bad += not good
            print(f"{'ok' if good else 'not ok'} - {case['name']} ({who}): refused at "
                  f"{meta['outcome']}: {msg[:160]}")
            total = torch.ones(1024, device="cuda").sum().item()
            torch.cuda.synchronize()
            bad += total != 1024
            print(f"{'ok' if total == 1024 else 'not ok'} - {case['name']} ({who}): the context "
                  f"still works after the refusal")
        manifest.append(meta)
    torch.save(result, out)
    with open(out + ".json", "w") as f:
        json.dump(manifest, f)
    print(f"ok - run ({who}): {len(result)} rerouted launches saved (eager and graph)")
    return bad


def reference(case, inp):
    """float64 on the GPU: each sequence's softmax(q k^T sm_scale) v, kv head
    h // (hq / hkv), causal within the sequence when the case is."""
    import torch
    scale = case["scale"] if case["scale"] is not None else 1.0 / math.sqrt(case["d"])
    scale = torch.tensor(scale, dtype=torch.float32).item()  # as Triton passes it
    q, k, v = (inp[n].cuda().double() for n in ("q", "k", "v"))
    group = case["hq"] // case["hkv"]
    o = torch.full(q.shape, float("nan"), dtype=torch.float64, device="cuda")
    starts, _ = starts_of(case)
    for s, n in zip(starts, case["lens"]):
        qs = q[s:s + n]
        ks = k[s:s + n].repeat_interleave(group, dim=1)
        vs = v[s:s + n].repeat_interleave(group, dim=1)
        sc = torch.einsum("qhd,khd->hqk", qs, ks) * scale
        if case["causal"]:
            sc = sc.masked_fill(torch.ones(n, n, dtype=torch.bool, device="cuda").triu(1),
                                float("-inf"))
        o[s:s + n] = torch.einsum("hqk,khd->qhd", torch.softmax(sc, dim=-1), vs)
    return o


def same(a, b):
    import torch
    ints = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(
        a.contiguous().view(ints), b.contiguous().view(ints))


def check(plain_path, shim_path):
    import torch
    plain, shim = torch.load(plain_path), torch.load(shim_path)
    cases = {c["name"]: c for c in CASES}
    bad = 0
    for key in sorted(set(plain) | set(shim)):
        if key not in plain or key not in shim:
            print(f"not ok - {key}: saved by one run only")
            bad += 1
            continue
        name, mode = key.rsplit("/", 1)
        case, pin, sin = cases[name], plain[key], shim[key]
        inputs_same = all(same(pin[k], sin[k]) for k in ("q", "k", "v", "start", "lens"))
        owned = pin["owned"]
        ref = reference(case, pin).cpu()[owned]
        fw_o, our_o = pin["o"][owned].double(), sin["o"][owned].double()
        big = ref.abs().max().item()
        fw = (fw_o - ref).abs().max().item()
        ours = (our_o - ref).abs().max().item()
        tol = 2 * fw + bf16_ulp(big)
        good = inputs_same and math.isfinite(ours) and math.isfinite(fw) and ours <= tol
        bad += not good
        print(f"{'ok' if good else 'not ok'} - {name} {mode} ({case['release']}, {case['hq']}/"
              f"{case['hkv']} heads of {case['d']}, {'causal' if case['causal'] else 'non-causal'}"
              f"): rerouted max |err| {ours:.3g} vs float64, SGLang's own {fw:.3g} (ratio "
              f"{ours / fw if fw else float('inf'):.2f}), passes under 2 x SGLang + 1 bf16 ulp = "
              f"{tol:.3g}" + ("" if inputs_same else "; the inputs differ between the runs"))
        untouched = all(bool(torch.isnan(r["o"][~owned].float()).all()) for r in (pin, sin))
        bad += not untouched
        print(f"{'ok' if untouched else 'not ok'} - {name} {mode}: the rows no sequence owns "
              f"are still NaN in both runs")
    return bad


def logcheck(manifest_path, logs):
    events = [json.loads(line) for f in logs for line in open(f)]
    manifest = json.load(open(manifest_path))
    bad = 0
    launches = [e for e in events if e.get("event") == "launch" and e.get("kernel") == "_fwd_kernel"]
    rerouted = [e for e in launches if e.get("action") == "reroute"]
    want = 2 * sum(m["expect"] == "reroute" for m in manifest)
    good = len(rerouted) == want and all(e.get("rule") == RULE and e.get("rerouted_to") == BUNDLED
                                         for e in rerouted)
    bad += not good
    print(f"{'ok' if good else 'not ok'} - {len(rerouted)} _fwd_kernel launches rerouted by "
          f"{RULE} to {BUNDLED} (expected {want}: eager and capture of each rerouted case); "
          f"{sorted({(e.get('rule'), e.get('rerouted_to')) for e in rerouted}, key=str)}")
    refusals = [e for e in events if e.get("action") == "refuse"]
    for m in manifest:
        if m["expect"] != "refuse":
            continue
        mine = [e for e in refusals if m["reason"] in (e.get("reason") or "")]
        good = len(mine) == 1 and m.get("outcome") in ("load", "launch")
        bad += not good
        print(f"{'ok' if good else 'not ok'} - {m['name']}: one refusal ({m.get('outcome')}) "
              f"with the reason '{m['reason']}' in the log (found {len(mine)})")
    others = [e for e in refusals if not any(m["expect"] == "refuse" and m["reason"] in
                                             (e.get("reason") or "") for m in manifest)]
    for e in others[:3]:
        print(f"# refused: {e.get('event')} {e.get('kernel')}: {e.get('reason')}")
    bad += bool(others)
    print(f"{'ok' if not others else 'not ok'} - nothing else refused ({len(others)} other "
          f"refusals)")
    return bad


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "run":
        sys.exit(1 if run(sys.argv[2]) else 0)
    elif len(sys.argv) == 4 and sys.argv[1] == "check":
        sys.exit(1 if check(sys.argv[2], sys.argv[3]) else 0)
    elif len(sys.argv) >= 4 and sys.argv[1] == "logcheck":
        sys.exit(1 if logcheck(sys.argv[2], sys.argv[3:]) else 0)
    else:
        sys.exit(__doc__)
