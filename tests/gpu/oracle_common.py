"""oracle_common.py - what the oracle cases share (tests/gpu/oracle_decode.py,
oracle_extend.py, oracle_moe.py; run by oracle_gpu.sh): the frameworks' own
kernels, from their released packages, run on the same inputs without the
shim and under `sm120 run --mode reroute --target sm120`.

A case is one framework launch (an oracle_*.py file builds it) and says what
the shim must do with it: "reroute" by a named rule, or "refuse" (a
configuration the rule does not claim: logit cap on, a sliding window, zero
points, ...) with a text the shim's reason must contain.
  run     each rerouted case launched eagerly, then captured in a CUDA graph
          and replayed on other inputs of the same shapes (outputs NaN before
          every launch); each refused case launched once: without the shim
          it must run and write finite outputs, under the shim it must fail
          (Triton's OutOfResources when refused at load, a CUDA error when
          refused at launch) and leave the context usable.  Saves OUT.pt
          (inputs and outputs) and OUT.pt.json (the cases and what happened).
  check   inputs identical between the runs; each rerouted output against
          float64 computed from the same quantised operands: the shim's
          error within 2 x the framework kernel's own error + 1 bf16 ulp of
          the largest |reference|; prints one "# table | ..." line per output.
  logcheck (python3 tests/gpu/oracle_common.py logcheck OUT.pt.json LOG...,
          no torch) the shim's JSON log against the cases run: per kernel,
          exactly two rerouted launches by the case's rule for each rerouted
          case (eager and capture; replays do not pass the hooks), one
          refusal with the case's reason for each refused one, at load or
          at launch as it happened, and nothing else refused.
Prints "ok - ..." / "not ok - ..." lines.
"""
import json
import math
import os
import sys

def shim_active():
    return "sm120shim" in os.environ.get("LD_PRELOAD", "")


def bf16_ulp(x):
    """The spacing of bf16 numbers at magnitude x (8 significant bits)."""
    if not (x > 0 and math.isfinite(x)):
        return 2.0 ** -133
    return 2.0 ** (math.floor(math.log2(x)) - 7)


class Case:
    """One framework launch.  @meta: name, rule (the rule that must reroute
    it, or that refuses it), kernel@release (as "kernel"), dtype, shape,
    expect ("reroute" or "refuse"), reason (text of the refusal), launches
    (over-limit launches of the kernel per call).  @make(seed) gives the
    inputs (a dict: tensors on the GPU and plain values); @bind(inputs)
    gives a Bound: callable (the framework's call), poison() (outputs to
    NaN), inputs() and outputs() (CPU copies of what the reference needs and
    of what the launch wrote)."""

    def __init__(self, make, bind, **meta):
        meta.setdefault("reason", "")
        meta.setdefault("launches", 1)
        self.make, self.bind, self.meta = make, bind, meta

    @property
    def name(self):
        return self.meta["name"]


def _copy_into(dst, src):
    for k, v in src.items():
        if hasattr(v, "copy_"):
            dst[k].copy_(v)


def _refusal(bound):
    """Launch @bound expecting the shim to refuse it: "load", "launch" or
    "ran", and the message."""
    import torch
    from triton.runtime.errors import OutOfResources
    try:
        bound()
        torch.cuda.synchronize()
        return "ran", ""
    except OutOfResources as e:
        return "load", str(e).splitlines()[0] if str(e) else repr(e)
    except RuntimeError as e:
        msg = str(e).splitlines()[0] if str(e) else repr(e)
        return ("launch" if "CUDA" in msg or "cuda" in msg else "error"), msg


def run(cases, out, seed_base):
    """Launch @cases (see the file's comment) and save OUT and OUT.json."""
    import torch
    shim = shim_active()
    who = "shim" if shim else "no shim"
    saved, manifest, bad = {}, [], 0
    for i, case in enumerate(cases):
        meta = dict(case.meta)
        inp = case.make(seed_base + 2 * i)
        bound = case.bind(inp)
        if meta["expect"] == "reroute":
            try:
                bound.poison()
                bound()
                torch.cuda.synchronize()
                saved[f"{case.name}/eager"] = (bound.inputs(), bound.outputs())
                # The same launch captured in a graph (compiled and, under the
                # shim, rerouted once above), replayed on other values of the
                # same shapes.
                graph = torch.cuda.CUDAGraph()
                bound.poison()
                with torch.cuda.graph(graph):
                    bound()
                _copy_into(inp, case.make(seed_base + 2 * i + 1))
                bound.poison()
                graph.replay()
                torch.cuda.synchronize()
                saved[f"{case.name}/graph"] = (bound.inputs(), bound.outputs())
                meta["outcome"] = "ran"
            except Exception as e:  # noqa: BLE001  (reported; the other cases go on)
                meta["outcome"] = "failed"
                bad += 1
                print(f"not ok - {case.name} ({who}): {type(e).__name__}: "
                      f"{str(e).splitlines()[0] if str(e) else ''}")
        elif not shim:
            bound.poison()
            bound()
            torch.cuda.synchronize()
            finite = all(bool(torch.isfinite(t.float()).all()) for t in bound.outputs().values())
            meta["outcome"] = "ran"
            bad += not finite
            print(f"{'ok' if finite else 'not ok'} - {case.name} ({who}): the framework's kernel "
                  f"runs this configuration and writes finite outputs (the shim must refuse it)")
        else:
            meta["outcome"], meta["message"] = _refusal(bound)
            how = {"load": "refused at load (Triton raised OutOfResources)",
                   "launch": "refused at launch"}.get(meta["outcome"], "NOT refused: it "
                                                       + meta["outcome"])
            good = meta["outcome"] in ("load", "launch")
            bad += not good
            print(f"{'ok' if good else 'not ok'} - {case.name} ({who}): {how}"
                  + (f": {meta['message'][:160]}" if meta["message"] else ""))
            total = torch.ones(1024, device="cuda").sum().item()
            torch.cuda.synchronize()
            bad += total != 1024
            print(f"{'ok' if total == 1024 else 'not ok'} - {case.name} ({who}): the context "
                  f"still works after the refusal")
            print(f"# table | {meta['rule']} | {meta['kernel']} | {meta['dtype']} | "
                  f"{meta['shape']} | eager | refused ({meta['reason']}) | - | -")
        manifest.append(meta)
    torch.save(saved, out)
    with open(out + ".json", "w") as f:
        json.dump(manifest, f)
    n = sum(m["expect"] == "reroute" for m in manifest)
    print(f"ok - run ({who}): {n} rerouted cases saved eager and in a graph, "
          f"{len(manifest) - n} refused cases run")
    return bad


def _same(a, b):
    """@a and @b equal, tensors bit for bit (NaN poison and FP8 included)."""
    import torch
    if not (torch.is_tensor(a) and torch.is_tensor(b)):
        return a == b
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    ints = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
    return torch.equal(a.contiguous().view(ints), b.contiguous().view(ints))


def check(plain_path, shim_path, reference, framework):
    """The rerouted outputs of @shim_path against float64 (@reference(meta,
    inputs) -> {output: float64 tensor}) next to @framework's own error."""
    import torch
    plain, shim = torch.load(plain_path), torch.load(shim_path)
    metas = {m["name"]: m for m in json.load(open(shim_path + ".json"))}
    bad = 0
    for key in sorted(set(plain) | set(shim)):
        if key not in plain or key not in shim:
            print(f"not ok - {key}: saved by one run only")
            bad += 1
            continue
        name, mode = key.rsplit("/", 1)
        meta = metas[name]
        (pin, pout), (sin, sout) = plain[key], shim[key]
        same = set(pin) == set(sin) and all(_same(pin[k], sin[k]) for k in pin)
        ref = reference(meta, pin)
        for out in ref:
            big = ref[out].abs().max().item()
            fw = (pout[out].double() - ref[out]).abs().max().item()
            ours = (sout[out].double() - ref[out]).abs().max().item()
            tol = 2 * fw + bf16_ulp(big)
            good = same and math.isfinite(ours) and math.isfinite(fw) and ours <= tol
            bad += not good
            ratio = ours / fw if fw else float("inf")
            label = f"{name} {mode}" + ("" if len(ref) == 1 else f" {out}")
            print(f"{'ok' if good else 'not ok'} - {meta['kernel']} {label}: rerouted by "
                  f"{meta['rule']}, max |err| {ours:.3g} vs float64, {framework}'s own {fw:.3g} "
                  f"(ratio {ratio:.2f}), passes under 2 x {framework} + 1 bf16 ulp = {tol:.3g}"
                  + ("" if same else "; the inputs differ between the runs"))
            shape = meta["shape"] + ("" if len(ref) == 1 else f" ({out})")
            print(f"# table | {meta['rule']} | {meta['kernel']} | {meta['dtype']} | {shape} | "
                  f"{mode} | {ours:.3g} | {fw:.3g} | {ratio:.2f}")
    return bad


def logcheck(manifest_path, logs):
    """The shim's JSON logs @logs against the cases of @manifest_path."""
    try:
        cases = json.load(open(manifest_path))
    except (OSError, ValueError) as e:
        print(f"not ok - {manifest_path}: no record of the cases run under the shim ({e})")
        return 1
    events = [json.loads(line) for path in logs for line in open(path) if line.strip()]
    kernels = sorted({c["kernel"].split("@")[0] for c in cases})
    bad = 0
    for kernel in kernels:
        mine = [c for c in cases if c["kernel"].split("@")[0] == kernel]
        want = []
        for c in mine:
            if c["expect"] == "reroute":
                want += [("launch", "reroute", c["rule"])] * (2 * c["launches"])
            elif c.get("outcome") == "launch":
                want += [("launch", "refuse", None)] * c["launches"]
            else:
                want += [("triton_load", "refuse", None)]
        seen = [e for e in events if e.get("kernel") == kernel and
                (e.get("event") == "launch" or
                 (e.get("event") == "triton_load" and e.get("action") == "refuse"))]
        got = [(e["event"], e.get("action"), e.get("rule") if e.get("action") == "reroute"
                else None) for e in seen]
        missing = [c["name"] for c in mine if c["expect"] == "refuse" and not any(
            c["reason"].lower() in (e.get("reason") or "").lower()
            for e in seen if e.get("action") == "refuse")]
        rules = {c["rule"] for c in mine}
        admits = [e for e in events if e.get("kernel") == kernel and
                  e.get("event") == "triton_load" and e.get("action") == "admit"]
        stray = [e.get("rule") for e in admits if e.get("rule") not in rules]
        good = sorted(got, key=str) == sorted(want, key=str) and not missing and not stray
        bad += not good
        count = lambda items: {f"{a[0]} {a[1]} {a[2] or ''}".strip(): items.count(a)
                               for a in sorted(set(items), key=str)}
        bundled = sorted({e.get("rerouted_to") for e in seen if e.get("rerouted_to")})
        print(f"{'ok' if good else 'not ok'} - {kernel}: the shim's log holds exactly what its "
              f"{len(mine)} cases call for: {count(want)} (rerouted to {', '.join(bundled)})"
              + ("" if good else f"; got {count(got)}"
                 + (f"; no refusal naming: {missing}" if missing else "")
                 + (f"; admitted at load by {stray}" if stray else "")))
        for e in seen:
            if e.get("action") == "refuse" and not good:
                print(f"#   {e['event']} refused: {e.get('reason')}")
    other = [e for e in events if e.get("action") == "refuse" and e.get("kernel") not in kernels]
    for e in other[:5]:
        print(f"# refused, not one of the cases: {e.get('event')} {e.get('kernel')}: "
              f"{e.get('reason')}")
    bad += bool(other)
    print(f"{'not ok' if other else 'ok'} - no other kernel was refused "
          f"({len(other)} other refusals in {len(logs)} log files)")
    return bad


def main(argv, groups, reference, framework, seed_base):
    """The command line of an oracle_*.py file: run OUT GROUP... | check PLAIN SHIM."""
    if len(argv) >= 4 and argv[1] == "run" and all(g in groups for g in argv[3:]):
        cases = [c for g in argv[3:] for c in groups[g]()]
        sys.exit(1 if run(cases, argv[2], seed_base) else 0)
    if len(argv) == 4 and argv[1] == "check":
        sys.exit(1 if check(argv[2], argv[3], reference, framework) else 0)
    sys.exit(f"usage: {argv[0]} run OUT GROUP... (groups: {', '.join(groups)}) | "
             f"check PLAIN.pt SHIM.pt")


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "logcheck":
        sys.exit(1 if logcheck(sys.argv[2], sys.argv[3:]) else 0)
    sys.exit(__doc__)
