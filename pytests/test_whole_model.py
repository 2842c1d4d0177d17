"""Whole-model capture (issue: real models in one graph): the Python kinds that library code of
real models runs, each run eagerly and compiled and compared, with graph and break counts that
show the code was captured; and tiny transformers models with break counts that may only go down.
"""

import pytest
import torch

import dynamo

from test_python_kinds import check


# ----- AttributeError raised inside the trace, caught by getattr(o, name, default) / hasattr ----

class AliasConfig:
    """Like transformers' PretrainedConfig: a Python __getattribute__ that maps aliases and
    defers to object.__getattribute__ through super()."""

    attribute_map = {"hidden": "hidden_size"}

    def __init__(self):
        self.hidden_size = 4

    def __getattribute__(self, key):
        if key != "attribute_map" and key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        return super().__getattribute__(key)


class Mixin:
    def __getattribute__(self, key):
        spec = super().__getattribute__("__dict__").get("_spec")
        if spec is not None:
            raise KeyError(key)
        return super().__getattribute__(key)


class LayeredConfig(Mixin, AliasConfig):
    pass


class Plain:
    def __init__(self):
        self.a = 1


@pytest.mark.parametrize("cls", [AliasConfig, LayeredConfig, Plain])
def test_getattr_default_on_missing_attribute(cls):
    cfg = cls()

    def f(x):
        a = getattr(cfg, "vision_feature_layer", None)
        b = getattr(cfg, "hidden", 7) if cls is not Plain else cfg.a
        c = hasattr(cfg, "is_causal")
        return x + (0 if a is None else 100) + b + (10 if c else 0)

    check(f, torch.ones(3), graphs=1, breaks=0)


def test_getattr_missing_attribute_guarded():
    """The absence is guarded: setting the attribute afterwards recompiles and reads it."""
    cfg = AliasConfig()

    def f(x):
        return x + getattr(cfg, "scale", 1)

    dynamo.reset()
    opt = dynamo.optimize("eager")(f)
    x = torch.ones(2)
    assert torch.equal(opt(x), x + 1)
    cfg.scale = 5
    assert torch.equal(opt(x), x + 5)
    assert dynamo.counters()["graph_breaks"] == 0


def test_attribute_error_inside_try_runs_the_handler():
    """An AttributeError the trace raises under a try block of an inlined frame is left to
    Python (its handler runs eagerly), never skipped."""
    cfg = AliasConfig()

    def lookup(o):
        try:
            return o.missing
        except AttributeError:
            return -1

    def f(x):
        return x + lookup(cfg)

    check(f, torch.ones(2), graphs=1)


def test_missing_attribute_without_default_raises_as_eager():
    cfg = AliasConfig()

    def f(x):
        return x + getattr(cfg, "missing")

    check(f, torch.ones(2), graphs=0)


def test_new_object_missing_attribute_default():
    class Box:
        def __init__(self, v):
            self.v = v

    def f(x):
        b = Box(x)
        return b.v + getattr(b, "w", 1) + (2 if hasattr(b, "v") else 0)

    check(f, torch.ones(2), graphs=1, breaks=0)


# ----- __slots__ members, collections.abc subclasses built in the frame, str(cls) ------------

class Slotted:
    __slots__ = ("name", "kind")

    def __init__(self, name):
        self.name = name


SLOTTED = Slotted("w")


def test_slot_member_read_and_empty_slot():
    """A `__slots__` member reads the slot (dataclasses' `Field.name`); an empty one raises
    AttributeError, which getattr's default catches."""
    def f(x):
        return x + len(SLOTTED.name) + getattr(SLOTTED, "kind", 3)

    check(f, torch.ones(2), graphs=1, breaks=0)


def test_dataclass_fields_of_a_global_instance():
    import dataclasses

    @dataclasses.dataclass
    class Cfg:
        a: int = 1
        b: float = 2.0

    cfg = Cfg()

    def f(x):
        return x + sum(getattr(cfg, fl.name) for fl in dataclasses.fields(cfg))

    check(f, torch.ones(2), graphs=1)


def test_abc_sequence_subclass_built_in_the_frame():
    import collections.abc

    class View(collections.abc.Sequence):
        def __init__(self, n):
            self._n = n

        def __len__(self):
            return self._n

        def __getitem__(self, i):
            return i

    def f(x):
        v = View(3)
        return x + len(v) + v[2] + isinstance(v, collections.abc.Sequence)

    check(f, torch.ones(2), graphs=1, breaks=0)


def test_str_of_a_class():
    def f(x):
        return x + len(str(torch.nn.Linear)) + len(repr(Slotted))

    check(f, torch.ones(2), graphs=1, breaks=0)


# ----- a graph break on every loop iteration: one shared resume function -----------------------

def lstm_loop(cell, xs):
    h = torch.zeros(2, 16)
    c = torch.zeros(2, 16)
    outs = []
    for x in xs:
        h, c = cell(x, (h, c))
        outs.append(h)
        print(len(outs))  # a graph break on every iteration
    return torch.stack(outs)


@pytest.mark.filterwarnings("ignore:dynamo. cache_size_limit:UserWarning")
@pytest.mark.parametrize("steps", [12, 24, 48])
def test_break_per_iteration_compiles_a_bounded_number_of_graphs(steps, capsys):
    """A break inside a loop continues in a resume function of the original code, shared by
    every iteration (not a resume function of the previous resume function, whose prologue
    grew with the trip count and made compile time quadratic): the compiles stay bounded by
    the recompile limit whatever the length, and the result is eager's."""
    torch.manual_seed(0)
    cell = torch.nn.LSTMCell(8, 16)
    xs = [torch.randn(2, 8) for _ in range(steps)]
    ref = lstm_loop(cell, xs)
    dynamo.reset()
    with torch.no_grad():
        out = dynamo.optimize("eager")(lstm_loop)(cell, xs)
        torch.testing.assert_close(out, ref.detach())
    printed = capsys.readouterr().out.split()
    assert printed == [str(i) for i in range(1, steps + 1)] * 2
    c = dynamo.counters()
    assert c["graphs"] >= 2
    assert c["compiles"] <= 10, c


def test_cache_limit_warning_as_error_surfaces(recwarn):
    """With warnings turned into errors, the cache-limit warning is raised as the UserWarning
    (it used to come out as `SystemError: error return without exception set`)."""
    import warnings

    def f(x, n):
        return x + n

    dynamo.reset()
    opt = dynamo.optimize("eager")(f)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(UserWarning, match="cache_size_limit"):
            for n in range(20):
                opt(torch.ones(1), n)


# ----- staticmethod / classmethod of an nn.Module class ---------------------------------------

class Bucketer(torch.nn.Module):
    """Like T5Attention: a staticmethod called through `self` with keyword arguments."""

    scale = 3

    @staticmethod
    def bucket(pos, bidirectional=True, num_buckets=32):
        return pos % num_buckets + (1 if bidirectional else 0)

    @classmethod
    def factor(cls, x):
        return x * cls.scale

    def forward(self, x):
        return self.factor(self.bucket(x, bidirectional=False, num_buckets=4))


def test_module_staticmethod_and_classmethod_through_self():
    m = Bucketer()
    check(lambda x: m(x), torch.arange(10.0), graphs=1, breaks=0)


def test_type_of_tensors():
    """`type(t)`: a graph input keeps its exact class (Parameter), a computed tensor is a Tensor
    (transformers' `infer_framework_from_repr` reads `str(type(x))`)."""
    lin = torch.nn.Linear(2, 2)

    def f(x):
        y = x * 2
        return y + len(str(type(y))) + (1 if type(lin.weight) is torch.nn.Parameter else 0) + (type(x) is torch.Tensor)

    check(f, torch.ones(2), graphs=1, breaks=0)


# ----- dict subclasses: dict's read methods on the instance's storage ---------------------------

class Registry(dict):
    """Like transformers' `_CanRecordRegistry`: a dict subclass keyed by class names whose own
    `get` defers to `super().get`."""

    def __setitem__(self, k, v):
        super().__setitem__(str(k), v)

    def get(self, k):
        return super().get(str(k)) or {}


REGISTRY = Registry()
REGISTRY[torch.nn.Linear] = {"a": 1}


def test_dict_subclass_super_get_reads_storage():
    def f(x):
        d = REGISTRY.get(torch.nn.Linear)
        e = REGISTRY.get(torch.nn.ReLU)
        return x + len(d) + len(e) + len(list(REGISTRY.keys())) + ("a" in d)

    check(f, torch.ones(2), graphs=1, breaks=0)
    # The storage is guarded: a new entry recompiles and is seen.
    opt = dynamo.optimize("eager")(f)
    REGISTRY[torch.nn.ReLU] = {"b": 2, "c": 3}
    try:
        assert torch.equal(opt(torch.ones(2)), f(torch.ones(2)))
    finally:
        del REGISTRY[str(torch.nn.ReLU)]


# ----- exceptions the trace raises, handled by try/except of inlined frames ---------------------

class Seq:
    def __init__(self, items):
        self._items = items

    def __getitem__(self, i):
        if i >= len(self._items):
            raise IndexError("list index out of range")
        return self._items[i]


def first_missing(seq):
    i = 0
    try:
        while True:
            seq[i]
            i += 1
    except IndexError:
        return i


def lookup(d, k):
    try:
        return d[k]
    except (KeyError, TypeError) as e:
        return len(str(e))


def safe_attr(o):
    try:
        return o.missing
    except AttributeError:
        return -1
    finally:
        pass


def reraises(x):
    try:
        raise ValueError("bad")
    except KeyError:
        return x


@pytest.mark.parametrize("case", ["index", "key", "attr", "uncaught"])
def test_except_clauses_in_inlined_frames(case):
    s = Seq([1, 2, 3])
    cfg = AliasConfig()

    def f(x):
        if case == "index":
            return x + first_missing(s)
        if case == "key":
            return x + lookup({"a": 1}, "b") + lookup({"a": 1}, "a")
        if case == "attr":
            return x + safe_attr(cfg)
        return reraises(x)

    if case == "uncaught":
        # The ValueError leaves the trace: the call runs in Python and raises as in eager.
        check(f, torch.ones(2), graphs=0)
    else:
        check(f, torch.ones(2), graphs=1, breaks=0)


def test_sequence_protocol_iteration_of_abc_sequence():
    """`collections.abc.Sequence.__iter__` steps `self[i]` until IndexError."""
    import collections.abc

    class View(collections.abc.Sequence):
        def __init__(self, n):
            self._n = n

        def __len__(self):
            return self._n

        def __getitem__(self, i):
            if i >= self._n:
                raise IndexError("out of range")
            return i * 2

    def f(x):
        return x + sum(v for v in View(3)) + len([v for v in View(2)])

    check(f, torch.ones(2), graphs=1, breaks=0)


# ----- tiny transformers models: graph and break counts that may only go down -------------------

def tiny_model(name):
    transformers = pytest.importorskip("transformers")
    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    T = transformers
    if name == "gpt2":
        return T.GPT2Model(T.GPT2Config(n_layer=2, n_head=2, n_embd=64, vocab_size=128, n_positions=64)).eval()
    if name == "bert":
        return T.BertModel(T.BertConfig(num_hidden_layers=2, num_attention_heads=2, hidden_size=64,
                                        intermediate_size=128, vocab_size=128, max_position_embeddings=64)).eval()
    return T.T5EncoderModel(T.T5Config(num_layers=2, num_heads=2, d_model=64, d_kv=32, d_ff=128, vocab_size=128)).eval()


# (graphs, breaks) from dynamo.explain at the time of writing; torch._dynamo.explain gets (1, 0).
# The remaining breaks are all in ModelOutput's construction after the last graph (and BERT's
# pooler output); lower these bounds as kinds get modelled.
TINY_BOUNDS = {"gpt2": (1, 10), "t5": (1, 11), "bert": (3, 14)}


@pytest.mark.parametrize("name", sorted(TINY_BOUNDS))
def test_tiny_transformers_capture(name):
    model = tiny_model(name)
    ids = torch.randint(0, 128, (2, 16), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        ref = model(ids).last_hidden_state
        ex = dynamo.explain(model)(ids)
        graphs, breaks = TINY_BOUNDS[name]
        assert ex.graph_count <= graphs and ex.graph_break_count <= breaks, (ex.graph_count, ex.graph_break_count, ex.break_reasons)
        dynamo.reset()
        opt = dynamo.optimize("eager")(model)
        torch.testing.assert_close(opt(ids).last_hidden_state, ref)
        compiles = dynamo.counters()["compiles"]
        torch.testing.assert_close(opt(ids).last_hidden_state, ref)
        if name != "bert":  # BERT recompiles once on the second call (not investigated yet)
            assert dynamo.counters()["compiles"] == compiles
