"""layout.py - the include graph of the tree, checked against its architecture.

    python3 tools/build/layout.py [--map]

Reads every quoted #include of core/, shim/, tools/, engine/ and kernels/
(C, CUDA and assembly sources) and checks, printing one TAP line each:
  1. layering: core/ includes only core/ and kernels/ headers; tools/ and
     engine/ include no shim/ header; kernels/ include only kernels/;
  2. no include cycle between components (a component is a directory:
     core/image, shim/state, engine/model, ...);
  3. every quoted include names a file that exists.
--map prints the component graph instead (component -> what it includes).
Exit 0 when all hold, 1 otherwise.
"""
import os
import re
import sys

ROOTS = ("core", "shim", "tools", "engine", "kernels")
EXTS = (".c", ".h", ".cu", ".cuh", ".S")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
# What each top directory may include besides itself.
ALLOWED = {"core": {"kernels"}, "shim": {"core", "kernels"}, "tools": {"core", "kernels", "engine"},
           "engine": {"core", "kernels"}, "kernels": set()}


def sources(top):
    for root in ROOTS:
        for d, _, files in os.walk(os.path.join(top, root)):
            for f in sorted(files):
                if f.endswith(EXTS):
                    yield os.path.relpath(os.path.join(d, f), top)


def component(path):
    return os.path.dirname(path)


def edges(top):
    """(file, included file or None if missing, the include text) for every quoted include."""
    for f in sources(top):
        with open(os.path.join(top, f), errors="replace") as fh:
            for name in INCLUDE.findall(fh.read()):
                target = os.path.normpath(os.path.join(os.path.dirname(f), name))
                yield f, (target if os.path.isfile(os.path.join(top, target)) else None), name


def cycles(graph):
    """The strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop()
                on.discard(w)
                scc.append(w)
                if w == v:
                    break
            if len(scc) > 1:
                out.append(sorted(scc))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main(argv):
    top = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    all_edges = list(edges(top))
    graph, layering, missing = {}, [], []
    for f, target, name in all_edges:
        if target is None:
            missing.append(f"{f}: \"{name}\"")
            continue
        a, b = component(f), component(target)
        if a != b:
            graph.setdefault(a, set()).add(b)
        src, dst = f.split("/")[0], target.split("/")[0]
        if dst not in ROOTS or (dst != src and dst not in ALLOWED[src]):
            layering.append(f"{f} includes {target}")
    if "--map" in argv:
        for a in sorted(graph):
            print(f"{a} -> {', '.join(sorted(graph[a]))}")
        return 0
    loops = cycles(graph)
    checks = [
        (not layering, "layering: core/ below shim/; tools/ and engine/ on core/ and kernels/ only",
         layering),
        (not loops, "no include cycle between components", [" <-> ".join(c) for c in loops]),
        (not missing, "every quoted include exists", missing),
    ]
    print(f"1..{len(checks)}")
    for ok, what, bad in checks:
        print(f"{'ok' if ok else 'not ok'} - layout: {what}")
        for b in bad[:10]:
            print(f"#   {b}")
    return 0 if all(ok for ok, _, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
