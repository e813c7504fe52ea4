"""moe_smem.py - the shared memory Triton gives the frameworks' real fused-MoE
kernels, compiled without a GPU: the oracle for core/limits/triton_smem.c.

    python3 tests/oracle/moe_smem.py [--source SRC] [--arch SM] CASE...
    python3 tests/oracle/moe_smem.py --check TABLE [--arch SM] [--limit N]

SRC is a framework release whose kernel file is read (default sglang-0.5.9):
sglang-0.5.8, sglang-0.5.9 (fused_moe_triton/fused_moe_triton_kernels.py),
sglang-0.5.23 (kernels/ops/moe/fused_moe_triton_kernels.py, the layout of
main), vllm-0.33.0 (fused_moe/fused_moe.py).  The file comes from the oracle
directory that tests/oracle/fetch.sh fills ($SM120_ORACLE), else straight
from the release's wheel in ${SM120_ORACLE_CACHE:-~/.cache/sm120-oracle}.
Only the file's @triton.jit functions are taken (with the module's imports
of triton): the framework itself is never imported.

SM is the architecture Triton compiles for (120, 121 or 90; a stub driver answers
it, no GPU is touched).  A CASE is one configuration, comma-separated:

    DTYPE,BMxBNxBK,WARPS,STAGES[,block=NxK][,pc][,tma|tmab][,swap][,nov3][,k=K]

DTYPE is bf16, float32, fp8_w8a8, int8_w8a8, int8_w8a16 (fused_moe_kernel) or
int4_w4a16 (fused_moe_kernel_gptq_awq, group 128); block= gives 128x128-style
block scales, pc per-channel scales, tma SGLang's tensor-descriptor loads of
A and B (its _down configs' USE_TMA), tmab of B alone (USE_TMA in an
up-projection config, SGLang main), swap the swap_ab layout the frameworks
choose on sm_90 for fp8 with BLOCK_SIZE_M < 64 and BLOCK_SIZE_N >= 64, nov3
a compile with DISABLE_MMA_V3=1 (no wgmma on sm_90: the dot stays on
mma.sync, as in the benchmarks that keep Hopper to SM120's instructions), k=K
the K of an int4_w4a16 case (fused_moe_kernel_gptq_awq compiles N and K in,
and a K of one BLOCK_SIZE_K step compiles unpipelined).  The arguments are
those the framework's host code passes (K 7168 unless k= says, N 512, top_k
8, 256 experts, strides of 1 where the framework's are 1), so Triton
specialises as in a serving process.  One line per case on stdout:

    SRC  SM  KERNEL  DTYPE  FLAGS  BM  BN  BK  WARPS  STAGES  SHARED

SHARED is Triton's metadata.shared: the dynamic shared memory of a launch.
--check TABLE re-measures the rows of a table in that format (# comments)
for one architecture (--arch, default 120; --limit N: N rows spread over
it) and exits 1 when one differs, naming it.
"""
import ast
import atexit
import glob
import importlib.util
import os
import sys
import tempfile
import zipfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import frameworks  # noqa: E402
import launches  # noqa: E402

KERNEL_FILES = {
    "sglang-0.5.8": "sglang/srt/layers/moe/fused_moe_triton/fused_moe_triton_kernels.py",
    "sglang-0.5.9": "sglang/srt/layers/moe/fused_moe_triton/fused_moe_triton_kernels.py",
    "sglang-0.5.23": "sglang/kernels/ops/moe/fused_moe_triton_kernels.py",
    "vllm-0.33.0": "vllm/model_executor/layers/fused_moe/fused_moe.py",
}
# (A, B) element types per config-file dtype (bf16: the files without a dtype part).
DTYPES = {
    "bf16": ("bfloat16", "bfloat16"),
    "fp8_w8a8": ("float8_e4m3fn", "float8_e4m3fn"),
    "int8_w8a8": ("int8", "int8"),
    "int8_w8a16": ("bfloat16", "int8"),
    "int4_w4a16": ("bfloat16", "uint8"),
    "float32": ("float32", "float32"),
}
for _name, _size in (("int8", 1), ("uint8", 1)):
    launches.DTYPES[_name] = launches.DType(_name, _size)
# The shapes of the stand-in launch (Kimi K2 at TP8-like sizes).
TOKENS, TOP_K, EXPERTS, N, K = 512, 8, 256, 512, 7168


def kernel_source(src):
    """The text of @src's kernel file: the unpacked oracle copy, else the wheel."""
    name, version = src.split("-", 1)
    path = KERNEL_FILES[src]
    unpacked = os.path.join(frameworks.oracle_dir(), src, path)
    if os.path.isfile(unpacked):
        return open(unpacked).read()
    cache = os.environ.get("SM120_ORACLE_CACHE", os.path.expanduser("~/.cache/sm120-oracle"))
    wheels = sorted(glob.glob(os.path.join(cache, f"{name}-{version}-*.whl")))
    if not wheels:
        raise FileNotFoundError(f"{unpacked} is missing and no {name}-{version} wheel is in "
                                f"{cache}: run `pip download --no-deps --dest {cache} "
                                f"{name}=={version}` where the package registry is reachable")
    return zipfile.ZipFile(wheels[0]).read(path).decode()


def jit_module(src, _cache={}):
    """@src's @triton.jit functions as a module of their own (a file Triton can
    read the source of), with the kernel file's triton imports."""
    if src in _cache:
        return _cache[src]
    tree = ast.parse(kernel_source(src))
    keep = [n for n in tree.body
            if (isinstance(n, (ast.Import, ast.ImportFrom)) and
                all(a.name.split(".")[0] == "triton" or (getattr(n, "module", "") or "")
                    .startswith("triton") for a in n.names))
            or (isinstance(n, ast.FunctionDef) and
                any(ast.unparse(d) in ("triton.jit", "jit") for d in n.decorator_list))]
    text = "import triton\nimport triton.language as tl\n" + "\n\n".join(
        ast.unparse(n) for n in keep) + "\n"
    fd, path = tempfile.mkstemp(prefix=f"moe_{src.replace('.', '_').replace('-', '_')}_",
                                suffix=".py")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    atexit.register(os.unlink, path)
    spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3], path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    _cache[src] = mod
    return mod


def parse_case(text):
    """CASE -> dict; ValueError naming the part that is wrong."""
    parts = text.split(",")
    if len(parts) < 4:
        raise ValueError(f"case '{text}': give DTYPE,BMxBNxBK,WARPS,STAGES[,flags]")
    dtype, tile, warps, stages = parts[:4]
    if dtype not in DTYPES:
        raise ValueError(f"case '{text}': dtype '{dtype}' is not one of {', '.join(DTYPES)}")
    bm, bn, bk = (int(x) for x in tile.split("x"))
    case = dict(dtype=dtype, bm=bm, bn=bn, bk=bk, warps=int(warps), stages=int(stages),
                block=None, pc=False, tma=False, tmab=False, swap=False, nov3=False, k=None)
    for flag in parts[4:]:
        if flag.startswith("block="):
            case["block"] = tuple(int(x) for x in flag[6:].split("x"))
        elif flag.startswith("k=") and dtype == "int4_w4a16":
            case["k"] = int(flag[2:])
        elif flag in ("pc", "tma", "tmab", "swap", "nov3"):
            case[flag] = True
        else:
            raise ValueError(f"case '{text}': unknown flag '{flag}' "
                             f"(block=NxK, pc, tma, tmab, swap, nov3; k=K for int4_w4a16)")
    return case


def flags_text(c):
    f = [f"block={c['block'][0]}x{c['block'][1]}"] if c["block"] else []
    f += [k for k in ("pc", "tma", "tmab", "swap", "nov3") if c[k]]
    f += [f"k={c['k']}"] if c["k"] else []
    return ",".join(f) or "-"


def fused_moe_args(c, params):
    """Every argument fused_moe_kernel may take, by name, as the host passes it."""
    T = launches.Tensor
    adt, bdt = DTYPES[c["dtype"]]
    bm, block = c["bm"], c["block"]
    em = TOKENS * TOP_K + EXPERTS * (bm - 1)
    a = T((TOKENS, K), adt)
    b = T((EXPERTS, N, K), bdt)
    out = T((TOKENS, TOP_K, N), "float32" if c["dtype"] == "float32" else "bfloat16")
    quant = c["dtype"] in ("fp8_w8a8", "int8_w8a8")
    if quant and block:
        a_scale = T((TOKENS, -(-K // block[1])), "float32")
        b_scale = T((EXPERTS, -(-N // block[0]), -(-K // block[1])), "float32")
    elif quant and c["pc"]:
        a_scale, b_scale = T((TOKENS, 1), "float32"), T((EXPERTS, N, 1), "float32")
    elif quant:
        a_scale, b_scale = T((1,), "float32"), T((EXPERTS,), "float32")
    elif c["dtype"] == "int8_w8a16":
        a_scale, b_scale = None, T((EXPERTS, N), "float32")
    else:
        a_scale = b_scale = None
    a_desc = b_desc = None
    if c["tma"] or c["tmab"]:
        from triton.tools.tensor_descriptor import TensorDescriptor
        b_desc = TensorDescriptor(b, b.shape, b.stride(), [1, c["bn"], c["bk"]])
        if c["tma"]:
            a_desc = TensorDescriptor(a, a.shape, a.stride(), [bm, c["bk"]])
    st = lambda t, i: t.stride(i) if t is not None and t.ndim > i else 0  # noqa: E731
    three = lambda t, i: t.stride(i) if t is not None and t.ndim == 3 else 0  # noqa: E731
    two = lambda t, i: t.stride(i) if t is not None and t.ndim == 2 else 0  # noqa: E731
    values = dict(
        a_ptr=a, a_desc=a_desc, b_ptr=b, b_desc=b_desc, bias_ptr=None, b_bias_ptr=None,
        c_ptr=out, a_scale_ptr=a_scale, b_scale_ptr=b_scale,
        topk_weights_ptr=T((TOKENS, TOP_K), "float32"),
        sorted_token_ids_ptr=T((em,), "int32"), expert_ids_ptr=T((em // bm,), "int32"),
        num_tokens_post_padded_ptr=T((1,), "int32"), add_mask_ptr=None,
        N=N, K=K, EM=em, num_valid_tokens=TOKENS * TOP_K,
        stride_am=a.stride(0), stride_ak=a.stride(1), stride_be=b.stride(0),
        stride_bk=b.stride(2), stride_bn=b.stride(1), stride_bias_e=0, stride_bias_n=0,
        stride_cm=out.stride(1), stride_cn=out.stride(2),
        stride_asm=two(a_scale, 0), stride_ask=two(a_scale, 1),
        stride_bse=st(b_scale, 0) if b_scale is not None and b_scale.ndim >= 2 else 0,
        stride_bsk=three(b_scale, 2),
        stride_bsn=st(b_scale, 1) if b_scale is not None and b_scale.ndim >= 2 else 0,
        stride_bbe=0, stride_bbn=0,
        group_n=block[0] if block else 0, group_k=block[1] if block else 0,
        naive_block_assignment=False,
        BLOCK_SIZE_M=bm, BLOCK_SIZE_N=c["bn"], BLOCK_SIZE_K=c["bk"], GROUP_SIZE_M=16,
        SPLIT_K=1, MUL_ROUTED_WEIGHT=False, top_k=TOP_K, compute_type=compute(c["dtype"]),
        use_fp8_w8a8=c["dtype"] == "fp8_w8a8", use_int8_w8a8=c["dtype"] == "int8_w8a8",
        use_int8_w8a16=c["dtype"] == "int8_w8a16", per_channel_quant=c["pc"],
        even_Ks=K % c["bk"] == 0, c_sorted=c["tma"], filter_expert=True,
        swap_ab=c["swap"], SWAP_AB=c["swap"], HAS_BIAS=False, USE_TD=False,
        FUSE_ADD_TO_OUTPUT=False, MASK_OUTPUT=False, LORA_PRESERVE_BASE=False,
        FUSE_SUM_ALL_REDUCE=False, ROUTER_TOPK=TOP_K)
    return pick(values, params)


def gptq_awq_args(c, params):
    """fused_moe_kernel_gptq_awq's arguments: INT4 weights packed two to a byte
    along K, group 128 scales, no zero points; K the case's k= (compiled in)
    or 7168."""
    T = launches.Tensor
    bm, group, k = c["bm"], 128, c["k"] or K
    em = TOKENS * TOP_K + EXPERTS * (bm - 1)
    a = T((TOKENS, k), "bfloat16")
    b = T((EXPERTS, N, k // 2), "uint8")
    out = T((TOKENS, TOP_K, N), "bfloat16")
    b_scale = T((EXPERTS, N, -(-k // group)), "bfloat16")
    values = dict(
        a_ptr=a, b_ptr=b, c_ptr=out, b_scale_ptr=b_scale, b_zp_ptr=None,
        topk_weights_ptr=T((TOKENS, TOP_K), "float32"),
        sorted_token_ids_ptr=T((em,), "int32"), expert_ids_ptr=T((em // bm,), "int32"),
        num_tokens_post_padded_ptr=T((1,), "int32"),
        N=N, K=k, EM=em, num_valid_tokens=TOKENS * TOP_K,
        stride_am=a.stride(0), stride_ak=a.stride(1), stride_be=b.stride(0),
        stride_bk=b.stride(2), stride_bn=b.stride(1), stride_cm=out.stride(1),
        stride_cn=out.stride(2), stride_bse=b_scale.stride(0), stride_bsk=b_scale.stride(2),
        stride_bsn=b_scale.stride(1), stride_bze=0, stride_bzk=0, stride_bzn=0,
        block_k_diviable=k % c["bk"] == 0, group_size=group,
        BLOCK_SIZE_M=bm, BLOCK_SIZE_N=c["bn"], BLOCK_SIZE_K=c["bk"], GROUP_SIZE_M=16,
        SPLIT_K=1, MUL_ROUTED_WEIGHT=False, top_k=TOP_K, compute_type=compute(c["dtype"]), has_zp=False,
        use_int4_w4a16=True, use_int8_w8a16=False, even_Ks=k % c["bk"] == 0,
        filter_expert=True)
    return pick(values, params)


def pick(values, params):
    """The arguments of a kernel with parameters @params (name, has default)."""
    missing = [p for p, has_default in params if p not in values and not has_default]
    if missing:
        raise KeyError(f"the kernel takes {', '.join(missing)}, which moe_smem.py does not "
                       f"know: add them to its argument table")
    return {p: values[p] for p, _ in params if p in values}


def compute(dtype):
    """The frameworks' compute_type: the output's dtype (bf16 models, fp32 for float32)."""
    import triton.language as tl
    return tl.float32 if dtype == "float32" else tl.bfloat16


def set_mma_v3(fn, allowed, _filled={}):
    """Compile @fn's next kernels with MMA v3 allowed or not (DISABLE_MMA_V3):
    Triton reads the variable at each compile and keys its file cache on it,
    but not a JIT function's in-memory cache, which is dropped where it was
    filled under the other setting.  That is per function (_filled: id ->
    the setting): one process compiles several sources' kernels, and a
    function whose cache is not dropped when another's setting changed hands
    back the other variant (18 nov3 rows of the measured table read as their
    wgmma sizes in one --check run before this)."""
    if allowed:
        os.environ.pop("DISABLE_MMA_V3", None)
    else:
        os.environ["DISABLE_MMA_V3"] = "1"
    if _filled.get(id(fn), allowed) != allowed:
        for kernel_cache, *_ in fn.device_caches.values():
            kernel_cache.clear()
    _filled[id(fn)] = allowed


def measure(src, arch, c):
    """(kernel name, Triton's metadata.shared) for case @c of @src on sm_@arch."""
    mod = jit_module(src)
    gptq = c["dtype"] == "int4_w4a16"
    fn = mod.fused_moe_kernel_gptq_awq if gptq else mod.fused_moe_kernel
    params = [(p.name, p.has_default) for p in fn.params]
    args = (gptq_awq_args if gptq else fused_moe_args)(c, params)
    set_mma_v3(fn, not c["nov3"])
    kernel = fn.run(grid=(1,), warmup=True, num_warps=c["warps"], num_stages=c["stages"],
                    **args)
    return fn.__name__, kernel.metadata.shared


def row(src, arch, c):
    name, shared = measure(src, arch, c)
    return (f"{src}\t{arch}\t{name}\t{c['dtype']}\t{flags_text(c)}\t{c['bm']}\t{c['bn']}\t"
            f"{c['bk']}\t{c['warps']}\t{c['stages']}\t{shared}")


def setup(arch):
    launches.stub_torch((arch // 10, arch % 10))
    launches.install_stub_driver(arch)


def check(table, arch, limit):
    """Re-measure the rows of @table for sm_@arch (at most @limit, spread
    evenly over them); 1 if one differs.  One process compiles for one
    architecture: the stub driver answers one target."""
    rows = [l.rstrip("\n").split("\t") for l in open(table)
            if l.strip() and not l.startswith("#")]
    rows = [r for r in rows if int(r[1]) == arch]
    if limit and len(rows) > limit:
        rows = [rows[i * len(rows) // limit] for i in range(limit)]
    setup(arch)
    bad = 0
    for src, _, _, dtype, flags, bm, bn, bk, warps, stages, shared in rows:
        text = ",".join([dtype, f"{bm}x{bn}x{bk}", warps, stages] +
                        ([] if flags == "-" else flags.split(",")))
        got = measure(src, arch, parse_case(text))[1]
        bad += got != int(shared)
        print(f"{'ok' if got == int(shared) else 'DIFFERS'}\t{src}\tsm_{arch}\t{text}\t"
              f"table {shared}\tTriton {got}", flush=True)
    return 1 if bad else 0


def main(argv):
    src, arch, table, limit, cases = "sglang-0.5.9", 120, None, 0, []
    it = iter(argv)
    for a in it:
        if a == "--source":
            src = next(it)
        elif a == "--arch":
            arch = int(next(it))
        elif a == "--check":
            table = next(it)
        elif a == "--limit":
            limit = int(next(it))
        elif a.startswith("-"):
            sys.exit(__doc__)
        else:
            cases.append(a)
    if src not in KERNEL_FILES:
        sys.exit(f"moe_smem.py: unknown --source {src}: use one of {', '.join(KERNEL_FILES)}")
    if table:
        return check(table, arch, limit)
    if not cases:
        sys.exit(__doc__)
    setup(arch)
    failed = 0
    for text in cases:
        try:
            print(row(src, arch, parse_case(text)), flush=True)
        except Exception as e:  # one case's failure is reported, the others still run
            failed += 1
            print(f"moe_smem.py: {src} sm_{arch} {text}: {type(e).__name__}: {e}",
                  file=sys.stderr, flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
