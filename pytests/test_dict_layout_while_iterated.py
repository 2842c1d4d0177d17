"""Loops over a dict whose body changes the dict's keys while keeping its size, with a graph
break in the body, compared with eager (the value, the dict's final order, and the error CPython
raises, if any). CPython's dict iterator walks the entry table by position, so what it yields
after `del d[k]; d[k] = v` depends on the table's holes and resizes:

- the replay wrote a changed dict back as `clear()` + its items, which compacted the table, and
  the real iterator over it (continued in a resume function, or stepped by the loop driver)
  skipped keys (Note [dict rewrites keep the layout] in src/py/mod.rs);
- a change of the keys of a dict that an iterator from outside the frame walks is now a graph
  break, so Python makes it on the real table (Note [dicts walked by iterators from outside the
  frame] in src/symbolic/side_effects.rs)."""

import pytest
import torch

import dynamo

BACKENDS = ["eager", "inductor"]


def move_to_end(x, d):
    for k, v in d.items():
        x = x + v
        print(k)
        del d[k]
        d[k] = v
    return x


def move_to_end_by_pop(x, d):
    for k in d:
        x = x + d[k]
        print(k)
        d[k] = d.pop(k)
    return x


def values_then_move(x, d):
    n = 0
    for v in d.values():
        x = x * 2 + v
        n += 1
        print(n)
        k = next(iter(d))
        d[k] = d.pop(k)
    return x


def temporary_key(x, d):
    for k in d:
        x = x + d[k]
        print(k)
        d["tmp"] = 1
        del d["tmp"]
    return x


def move_one_then_break(x, d):
    for k in d:
        x = x + d[k]
        print(k)
        if k == "b":
            d["a"] = d.pop("a")
    return x


def grow_and_shrink(x, d):
    for k in d:
        x = x + d[k]
        print(k)
        d[k + "!"] = 0
        del d[k]
    return x


CASES = [move_to_end, move_to_end_by_pop, values_then_move, temporary_key, move_one_then_break, grow_and_shrink]


def _outcome(fn, n_keys):
    d = {chr(ord("a") + i): i + 1 for i in range(n_keys)}
    try:
        r = fn(torch.zeros(1), d)
        return ("ok", r.tolist(), list(d.items()))
    except RuntimeError as e:
        return ("raised", str(e), list(d.items()))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("n_keys", [3, 4, 9])
@pytest.mark.parametrize("fn", CASES)
def test_changing_keys_of_a_dict_while_iterating_it(backend, n_keys, fn, capsys):
    want = _outcome(fn, n_keys)
    eager_out = capsys.readouterr().out
    dynamo.reset()
    got = _outcome(dynamo.optimize(backend)(fn), n_keys)
    assert got == want
    assert capsys.readouterr().out == eager_out
