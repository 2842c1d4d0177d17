"""Write the fixtures that `src/bytecode/` tests against.

Run with each supported CPython (torch must be importable); files are suffixed with the
version (`_311`, `_312`, `_313`):

    .venv/bin/python ci/extract_code_fixtures.py
    .venv312/bin/python ci/extract_code_fixtures.py
    .venv313/bin/python ci/extract_code_fixtures.py

Outputs, under src/bytecode/test_data/ (shown for 3.11):

* opcodes_311.json: the `dis` tables (opmap, _inline_cache_entries, hasjrel) and
  `dis.stack_effect` sampled over a few opargs, one opcode per line so the Rust test can read it
  without a JSON library.
* snippets_311.txt: the small functions in `SNIPPETS`, same format as code_311.txt, for the
  disassembly snapshots.
* code_311.txt: every code object (recursively through co_consts) of a few stdlib and
  torch.nn modules, one per line, tab separated:
  `qualname  firstlineno  stacksize  co_code  co_exceptiontable  co_linetable` (bytes as hex).
"""

import dis
import importlib
import json
import pathlib
import sys
import types

OUT = pathlib.Path(__file__).resolve().parent.parent / "src" / "bytecode" / "test_data"

MODULES = [
    "json.decoder",
    "json.encoder",
    "functools",
    "collections",
    "dataclasses",
    "enum",
    "re._parser",
    "re._compiler",
    "inspect",
    "typing",
    "asyncio.tasks",
    "contextlib",
    "torch.nn.modules.linear",
    "torch.nn.modules.conv",
    "torch.nn.modules.batchnorm",
    "torch.nn.modules.activation",
    "torch.nn.modules.container",
    "torch.nn.modules.module",
]

SNIPPETS = """
def simple(x, y):
    if x > y:
        return x - y
    for i in range(y):
        x += i
    return x

def guarded(d, k):
    try:
        return d[k]
    except KeyError:
        return None

def matcher(point):
    match point:
        case (0, 0):
            return "origin"
        case {"x": x, **rest} if x > 0:
            return rest
        case [first, *others]:
            return others
        case str() | bytes():
            return "text"
        case _:
            return None

async def asynchronous(lock, items):
    async with lock:
        async for item in items:
            await item
    return [x async for x in items]

def groups():
    try:
        raise ExceptionGroup("g", [ValueError(1)])
    except* ValueError as e:
        print(e)
    finally:
        print("done")

def managed(path):
    with open(path) as f, open(path) as g:
        yield from zip(f, g)

class Modern:
    def modern(self, xs):
        # 3.12: inlined comprehensions (PEP 709), BINARY_SLICE/STORE_SLICE, LOAD_SUPER_ATTR,
        # CALL_INTRINSIC_1 (unary +), RETURN_CONST.
        ys = [x * 2 for x in xs if x]
        zs = {k: v for k, v in zip(xs, ys)}
        head = xs[1:3]
        xs[0:1] = ys[:1]
        super().method(head)
        if not xs:
            return None
        return +ys[0], zs, xs[0] <= head[0] != 3

def wide(x):
    # More than 256 constants and names: LOAD_CONST and LOAD_GLOBAL need EXTENDED_ARG.
    table = {""" + ", ".join(f"{i}: n{i}" for i in range(300)) + """}
    while x:
        x -= 1
        if x in table:
            continue
        f"{x!r:>{x}}"
    return table
"""

SAMPLE_ARGS = [0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 255, 256, 257, 1023]


def stack_effects(op):
    """`dis.stack_effect` for (arg, jump) samples; None where `dis` rejects the input."""
    args = SAMPLE_ARGS if op >= dis.HAVE_ARGUMENT else [None]
    rows = []
    for arg in args:
        for jump in (False, True):
            try:
                effect = dis.stack_effect(op, arg, jump=jump)
            except ValueError:
                effect = None
            rows.append([0 if arg is None else arg, jump, effect])
    return rows


VER = f"{sys.version_info[0]}{sys.version_info[1]}"


def write_opcodes():
    lines = []
    for name, op in sorted(dis.opmap.items(), key=lambda kv: kv[1]):
        if op >= 256 or name.startswith("INSTRUMENTED_") or name == "ENTER_EXECUTOR":
            # pseudo-instructions, instrumented opcodes and executors never appear in co_code
            continue
        # A list indexed by opcode up to 3.12, a dict by name (without zeros) from 3.13.
        caches = dis._inline_cache_entries
        entry = {
            "name": name,
            "opcode": op,
            "cache": caches.get(name, 0) if isinstance(caches, dict) else caches[op],
            "jrel": op in dis.hasjrel,
            "effects": stack_effects(op),
        }
        lines.append(json.dumps(entry, separators=(",", ":")))
    text = "[\n" + ",\n".join(lines) + "\n]\n"
    (OUT / f"opcodes_{VER}.json").write_text(text)
    return len(lines)


def iter_code(code, prefix):
    name = f"{prefix}:{code.co_qualname}"
    yield name, code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from iter_code(const, prefix)


def row(name, code):
    return "\t".join(
        [
            name,
            str(code.co_firstlineno),
            str(code.co_stacksize),
            code.co_code.hex(),
            code.co_exceptiontable.hex(),
            code.co_linetable.hex(),
        ]
    )


def write_code():
    rows = []
    for modname in MODULES:
        module = importlib.import_module(modname)
        source = pathlib.Path(module.__file__).read_text()
        top = compile(source, module.__file__, "exec")
        rows.extend(row(name, code) for name, code in iter_code(top, modname))
    (OUT / f"code_{VER}.txt").write_text("\n".join(rows) + "\n")
    return len(rows)


def write_snippets():
    top = compile(SNIPPETS, "<snippets>", "exec")
    rows = [row(name, code) for name, code in iter_code(top, "snippets")]
    (OUT / f"snippets_{VER}.txt").write_text("\n".join(rows) + "\n")


def main():
    assert sys.version_info[:2] in ((3, 11), (3, 12), (3, 13)), "fixtures are for CPython 3.11 to 3.13"
    OUT.mkdir(parents=True, exist_ok=True)
    n_ops = write_opcodes()
    n_code = write_code()
    write_snippets()
    print(f"wrote {n_ops} opcodes and {n_code} code objects to {OUT}")


if __name__ == "__main__":
    main()
