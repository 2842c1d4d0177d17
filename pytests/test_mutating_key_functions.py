"""A key function that mutates the container being sorted or scanned behaves as in CPython:
`list.sort` empties the list while it runs and raises `ValueError('list modified during sort')`
(Note [list modified during sort] in src/symbolic/variables/lists.rs); `min`/`max` scan the
live list and see what the key appends (breaker5 findings 35, 36)."""

import pytest
import torch

import dynamo

BACKENDS = ["eager", "inductor"]

BODIES = {
    "sort_appends": """
    l = [2, 1]
    try:
        l.sort(key=lambda v: (l.append(9), v)[1])
        r = 'sorted'
    except ValueError as e:
        r = 'ValueError: ' + str(e)
    out = (r, l)""",
    "sort_reverse_appends": """
    l = [1, 3, 2]
    try:
        l.sort(key=lambda v: (l.append(v), -v)[1], reverse=True)
        r = 'sorted'
    except ValueError as e:
        r = 'ValueError: ' + str(e)
    out = (r, l)""",
    "sort_append_then_pop": """
    l = [2, 1]
    def key(v):
        l.append(v)
        l.pop()
        return v
    try:
        l.sort(key=key)
        r = 'sorted'
    except ValueError as e:
        r = 'ValueError: ' + str(e)
    out = (r, l)""",
    "sort_key_sees_empty_list": """
    l = [3, 1, 2]
    seen = []
    l.sort(key=lambda v: (seen.append(len(l)), v)[1])
    out = (seen, l)""",
    "sort_key_raises_keeps_order": """
    l = [3, 1, 2]
    def key(v):
        l.append(0)
        if v == 2:
            raise KeyError(v)
        return v
    try:
        l.sort(key=key)
        r = 'sorted'
    except KeyError as e:
        r = 'KeyError: ' + str(e)
    out = (r, l)""",
    "sorted_copies_first": """
    l = [2, 1]
    r = sorted(l, key=lambda v: (l.append(9), v)[1])
    out = (r, l)""",
    "max_appends": """
    l = [1, 2]
    def key(v):
        if len(l) < 6:
            l.append(-1)
        return v
    out = (max(l, key=key), l)""",
    "min_appends": """
    l2 = [1, 2]
    def key2(v):
        if len(l2) < 6:
            l2.append(9)
        return v
    out = (min(l2, key=key2), l2)""",
    "max_pops": """
    l = [1, 5, 2, 7]
    def key(v):
        if len(l) > 2:
            l.pop()
        return v
    out = (max(l, key=key), l)""",
    "max_dict_grows": """
    d = {1: 1, 2: 2}
    def key(k):
        d[k + 10] = 0
        return k
    try:
        r = max(d, key=key)
    except RuntimeError as e:
        r = 'RuntimeError: ' + str(e)
    out = (r, sorted(d))""",
    "any_over_generator_appending": """
    l = [0, 0]
    def gen():
        for v in l:
            if len(l) < 5:
                l.append(1)
            yield v
    out = (any(gen()), sum(v for v in l), l)""",
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(BODIES))
def test_mutating_key_matches_eager(name, backend):
    ns = {}
    exec(f"def f(x):\n    y = x + 1{BODIES[name]}\n    return y * 2, out\n", ns)
    f = ns["f"]
    want = f(torch.ones(1))
    dynamo.reset()
    got = dynamo.optimize(backend)(f)(torch.ones(1))
    assert got[1] == want[1]
    assert torch.equal(got[0], want[0])
    c = dynamo.counters()
    assert c["graphs"] == 1 and c["graph_breaks"] == 0, c
