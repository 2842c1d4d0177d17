"""``DYNAMO_DEBUG_DIR=path``: readable dumps of every stage, per converted frame.

The directory gets one folder per run, ``run_<date>_<time>-pid<pid>``, holding ``index.md`` (a
table with one row per conversion: function, file and line, the graph's ops, graph break or
failure, folder) and one folder per conversion, ``NNNN_<function>``, with:

- ``original_bytecode.txt`` / ``transformed_bytecode.txt``: ``dis`` listings of the frame's
  code and of the code dynamo generated for it (the call of the compiled graph, the rebuilding
  of the results, the resume call after a graph break);
- ``graph.txt``: the captured graph in dynamo's notation, with each value's dtype and shape;
- ``fx_graph.py``: the ``torch.fx.GraphModule`` handed to the backend (its Python code);
- ``guards.txt``: the guards the cached code runs under;
- for the ``inductor`` backend: ``inductor_ir_pre_fusion.txt`` (the lowered IR, one buffer a
  line), ``inductor_ir_post_fusion.txt`` (the schedule: kernels with the nodes fused into each,
  fallbacks to torch's kernels and why), ``kernel_ir.txt`` (each kernel's loop IR) and
  ``llvm_ir.ll`` (the kernels' LLVM IR after optimization);
- ``summary.txt``: the graph break or the reason the frame runs eagerly, if any.

The variable is read once, at import; unset, nothing here runs (``ENABLED`` is False and the
Rust side never calls ``dump_frame``).
"""

from __future__ import annotations

import dis
import os
import re
import threading
import time

DIR = os.environ.get("DYNAMO_DEBUG_DIR") or None
ENABLED = DIR is not None

_lock = threading.Lock()
_pending: list[dict] = []  # what backends produced during the conversion in progress
_state = {"n": 0, "run_dir": None}


def record_backend(gm, compiled) -> None:
    """Queues the backend's artifacts for the frame being converted (called by ``optimize``'s
    callback after the backend returned ``compiled`` for ``gm``)."""
    item = {"fx_code": _fx_code(gm), "ops": _ops(gm)}
    for key, attr in (("inductor_ir_pre_fusion.txt", "ir_pre_fusion"), ("inductor_ir_post_fusion.txt", "plan"),
                      ("kernel_ir.txt", "kernel_ir"), ("llvm_ir.ll", "llvm_ir")):
        text = getattr(compiled, attr, None)
        if isinstance(text, str):
            item[key] = text
    with _lock:
        _pending.append(item)


def _fx_code(gm) -> str:
    try:
        return gm.print_readable(print_output=False)
    except Exception:  # older torch: no print_readable
        return gm.code


def _ops(gm) -> list[str]:
    out = []
    for n in gm.graph.nodes:
        if n.op in ("call_function", "call_method", "call_module"):
            t = n.target
            out.append(t if isinstance(t, str) else getattr(t, "__name__", str(t)))
    return out


def _run_dir() -> str:
    if _state["run_dir"] is None:
        stamp = time.strftime("%Y%m%d_%H%M%S")
        d = os.path.join(DIR, f"run_{stamp}-pid{os.getpid()}")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "index.md"), "w") as f:
            f.write("# dynamo debug dump\n\n"
                    "One row per frame conversion; each folder holds the frame's original and "
                    "transformed bytecode, captured graph, guards and the backend's IR.\n\n"
                    "| # | function | file:line | graph ops | graph break / eager because | folder |\n"
                    "| --- | --- | --- | --- | --- | --- |\n")
        _state["run_dir"] = d
    return _state["run_dir"]


def _listing(code) -> str:
    head = f"# {code.co_qualname} ({code.co_filename}:{code.co_firstlineno})\n"
    try:
        return head + dis.Bytecode(code).dis()
    except Exception as e:  # a listing must never stop compilation
        return head + f"(dis failed: {e})\n"


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def dump_frame(code, transformed, gm, graph_text, guards, graph_break, failure) -> None:
    """Writes one conversion's folder and its ``index.md`` row (called from the frame hook, with
    the hook off). ``transformed`` and ``gm`` are None when the frame was not converted
    (``failure`` says why) or captured no graph."""
    with _lock:
        pending = list(_pending)
        _pending.clear()
        n = _state["n"]
        _state["n"] += 1
        run = _run_dir()
    name = f"{n:04d}_{re.sub(r'[^A-Za-z0-9_.]+', '_', code.co_qualname)[:80]}"
    d = os.path.join(run, name)
    os.makedirs(d, exist_ok=True)
    files = {"original_bytecode.txt": _listing(code)}
    if transformed is not None:
        files["transformed_bytecode.txt"] = _listing(transformed)
    if graph_text:
        files["graph.txt"] = graph_text
    if guards:
        files["guards.txt"] = guards
    ops: list[str] = []
    for i, item in enumerate(pending):
        suffix = "" if i == 0 else f".{i}"
        ops.extend(item["ops"])
        files["fx_graph" + suffix + ".py"] = item["fx_code"]
        for key in ("inductor_ir_pre_fusion.txt", "inductor_ir_post_fusion.txt", "kernel_ir.txt", "llvm_ir.ll"):
            if key in item:
                stem, ext = os.path.splitext(key)
                files[stem + suffix + ext] = item[key]
    if not pending and gm is not None:
        files["fx_graph.py"] = _fx_code(gm)
        ops = _ops(gm)
    why = failure if failure else (f"graph break: {graph_break}" if graph_break else "")
    if why:
        files["summary.txt"] = why + "\n"
    for fname, text in files.items():
        with open(os.path.join(d, fname), "w") as f:
            f.write(text if text.endswith("\n") else text + "\n")
    counts: dict[str, int] = {}
    for op in ops:
        counts[op] = counts.get(op, 0) + 1
    op_cell = ", ".join(f"{k}" + (f" x{v}" if v > 1 else "") for k, v in counts.items()) or "(no graph)"
    row = (f"| {n} | {_cell(code.co_qualname)} | {_cell(code.co_filename)}:{code.co_firstlineno} | {_cell(op_cell)} "
           f"| {_cell(why)[:300]} | [{name}]({name}/) |\n")
    with _lock, open(os.path.join(run, "index.md"), "a") as f:
        f.write(row)
