"""Python equivalents of C functions, for the tracer to inline in their place.

When traced code calls one of the C functions in `POLYFILLS` on a value the tracer models (an
object built in the frame, or one reached from it), the tracer calls the Python function here
instead, so the work is traced step by step rather than run on a real object (which may not
exist yet). Each function must behave exactly as its C original (same result, same exceptions)
on every input it is used for; the C source it follows is named in its docstring.
"""

import collections
import copyreg
import functools
import warnings as _warnings


def object_reduce_ex(obj, protocol):
    """`object.__reduce_ex__(obj, protocol)` (Objects/typeobject.c, `object___reduce_ex___impl`):
    a class's own `__reduce__` wins; protocols 0 and 1 use `copyreg._reduce_ex`; from protocol
    2 on, `reduce_newobj`: the arguments for `cls.__new__` (from `__getnewargs_ex__` or
    `__getnewargs__`), `copyreg.__newobj__` (or `__newobj_ex__` when there are keyword
    arguments), the state (`__getstate__`, by default the instance dict, None when it is
    empty, paired with the slot values when the class has slots) and item iterators for list
    and dict subclasses.

    Returns the 5-tuple `(callable, args, state, listitems, dictitems)` that `copy` and
    `pickle` consume. The tracer only uses it for classes written in Python whose instances
    have no variable-size part (`__itemsize__ == 0`). The C code also looks `__reduce__` and
    `__getstate__` up on the instance before deciding from the class; that lookup's result is
    only used when the class overrides them, so it is made only then here (a class's own
    `__getattribute__` sees one lookup fewer).
    """
    cls = type(obj)
    if cls.__reduce__ is not object.__reduce__:
        return obj.__reduce__()
    if protocol < 2:
        return copyreg._reduce_ex(obj, protocol)
    kwargs = None
    if hasattr(cls, "__getnewargs_ex__"):
        args, kwargs = obj.__getnewargs_ex__()
        if not isinstance(args, tuple) or not isinstance(kwargs, dict):
            raise TypeError("__getnewargs_ex__ should return a tuple of a tuple and a dict")
    elif hasattr(cls, "__getnewargs__"):
        args = obj.__getnewargs__()
        if not isinstance(args, tuple):
            raise TypeError("__getnewargs__ should return a tuple")
    else:
        args = None
    if kwargs:
        callable_, newargs = copyreg.__newobj_ex__, (cls, args, kwargs)
    else:
        callable_, newargs = copyreg.__newobj__, (cls,) + (args or ())
    state = _getstate(obj, cls)
    listitems = iter(obj) if isinstance(obj, list) else None
    dictitems = iter(obj.items()) if isinstance(obj, dict) else None
    return (callable_, newargs, state, listitems, dictitems)


def _getstate(obj, cls):
    """`object.__getstate__` (Objects/typeobject.c, `object_getstate`): an overriding
    `__getstate__` is called; the default is the instance dict itself (None when it is empty).
    The tracer only uses it for classes written in Python (no C base other than `object`)
    without slot names (`copyreg._slotnames(cls)` empty), whose instances have a `__dict__`;
    with slots the C code pairs the dict with their values."""
    if cls.__getstate__ is not object.__getstate__:
        return obj.__getstate__()
    d = object.__getattribute__(obj, "__dict__")
    return d if d else None


def warns(func, *args):
    """Whether `func(*args)` emits a warning (any category, whatever the filters say), shown
    nowhere. An "always" filter is put first in `warnings.filters` for the call and the
    warnings are caught where they would be shown (`warnings._showwarnmsg`); the filters are
    changed in place, not through `catch_warnings`, whose `_filters_mutated()` would reset every
    module's record of the warnings already shown ("default" would show them again), and an
    "always" action records nothing there."""
    caught = []
    always = ("always", None, Warning, None, 0)
    shown = _warnings._showwarnmsg
    _warnings.filters.insert(0, always)
    _warnings._showwarnmsg = caught.append
    try:
        func(*args)
    finally:
        _warnings._showwarnmsg = shown
        try:
            _warnings.filters.remove(always)
        except ValueError:
            pass
    return bool(caught)


def quiet_query(func, *args):
    """`func(*args)` with warnings ignored: the guard of a global-state query that warns (a
    deprecated one, `torch.is_autocast_cpu_enabled()`), which runs before every call of the
    compiled frame, where eager calls it only where the program does (Note [global state
    queries] in src/symbolic/output_graph.rs): its warning would show a second time, at the
    caller's line. The warning is dropped where it would be shown (`warnings._showwarnmsg`,
    which the C `warn` path calls too) rather than by a filter: changing the filters
    (`catch_warnings`) resets every module's record of the warnings already shown, and the
    warnings the trace replays (eval_frame.py) would show again at every call."""
    shown = _warnings._showwarnmsg
    _warnings._showwarnmsg = _drop_warning
    try:
        return func(*args)
    finally:
        _warnings._showwarnmsg = shown


def _drop_warning(msg):
    """Shows nothing (`quiet_query`)."""


class UnknownId(Exception):
    """Raised by every use of a `FakeId` that would read its value. Not a builtin exception,
    so the tracer never raises it in the trace for a user's `except` clause (an `except
    TypeError:` around `id(o) + 1` must not run): it is a graph break, and Python runs the
    instruction with the real id."""


class FakeId:
    """What `id(obj)` gives while tracing when `obj` has no address yet (an object built by
    the trace) or no source to pin it by (Note [ids of traced objects] in
    src/symbolic/output_graph.rs): a key equal only to itself. Its value is unknown, so every
    use that would read it (formatting, arithmetic, ordering, `int()`) raises `UnknownId`,
    which the tracer turns into a graph break; the compiler refuses one that outlives the
    graph. Two FakeIds compare unknown too: eager's ids of two objects are equal when the first
    died before the second was made (`id([1]) == id([2])` is usually True), which the trace
    does not know. Dict lookups compare hashes first (as `lookdict` does), so FakeIds are
    dict keys without comparing them."""

    __slots__ = ("_n",)

    def __init__(self, n):
        self._n = n

    def __hash__(self):
        return hash(("dynamo.FakeId", self._n))

    def __eq__(self, other):
        if self is other:
            return True
        if type(other) is FakeId:
            self._unknown()
        return False

    def __ne__(self, other):
        return not self.__eq__(other)

    def _unknown(self, *args, **kwargs):
        raise UnknownId("the id() of an object built while tracing has no value yet")

    __repr__ = __str__ = __format__ = __index__ = __int__ = __float__ = __bool__ = _unknown
    __lt__ = __le__ = __gt__ = __ge__ = _unknown
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __mod__ = __rmod__ = _unknown
    __floordiv__ = __rfloordiv__ = __truediv__ = __rtruediv__ = __and__ = __rand__ = _unknown
    __or__ = __ror__ = __xor__ = __rxor__ = __lshift__ = __rshift__ = __neg__ = __abs__ = _unknown
    __reduce__ = __reduce_ex__ = __copy__ = __deepcopy__ = _unknown


def is_fake_id(v):
    """Whether `v` is a FakeId or a tuple / frozenset holding one."""
    if type(v) is FakeId:
        return True
    if type(v) in (tuple, frozenset):
        return any(is_fake_id(i) for i in v)
    return False


# ----- collections.OrderedDict methods ---------------------------------------------------------
#
# For an OrderedDict built in the traced frame (exactly `collections.OrderedDict`, no subclass),
# the tracer keeps the order of its items as the order of its dict storage, so the C methods of
# Objects/odictobject.c are written here over `dict`'s own methods (which act on that storage
# alone). A missing key or an empty dict raises as the C code does; the tracer then runs the
# call as ordinary Python, which raises eager's exception.


def _odict_key_error(key):
    """The KeyError OrderedDict's own methods raise for a missing `key`: they pass the key to
    `PyErr_SetObject` unwrapped, which takes a tuple key as the exception's arguments
    (`KeyError((1, 2))` has args `(1, 2)`, where dict's `_PyErr_SetKeyError` gives `((1, 2),)`)."""
    return KeyError(*key) if isinstance(key, tuple) else KeyError(key)


def odict_move_to_end(od, key, last=True):
    """`OrderedDict.move_to_end(key, last=True)` (`OrderedDict_move_to_end_impl`): the item
    moves to the end (`last`) or to the front, under the key object it was stored with (an
    equal `key` of another type does not replace it); KeyError when `key` is missing."""
    if not dict.__contains__(od, key):
        raise _odict_key_error(key)
    # A key already at that end stays, and the OrderedDict is not changed (its iterators go on).
    keys = list(dict.keys(od))
    at = keys.index(key)
    if at == (len(keys) - 1 if last else 0):
        return None
    stored = keys[at]
    value = dict.pop(od, stored)
    if last:
        dict.__setitem__(od, stored, value)
        return None
    rest = list(dict.items(od))
    dict.clear(od)
    dict.__setitem__(od, stored, value)
    for k, v in rest:
        dict.__setitem__(od, k, v)
    return None


def odict_popitem(od, last=True):
    """`OrderedDict.popitem(last=True)` (`OrderedDict_popitem_impl`): removes and returns the
    last (`last`) or first `(key, value)` pair; KeyError('dictionary is empty') when empty."""
    if not dict.__len__(od):
        raise KeyError("dictionary is empty")
    key = next(reversed(dict.keys(od))) if last else next(iter(dict.keys(od)))
    return (key, dict.pop(od, key))


def odict_copy(od):
    """`OrderedDict.copy()` (`odict_copy`): a new OrderedDict of the same items in order."""
    import collections

    return collections.OrderedDict(list(dict.items(od)))


def odict_setdefault(od, key, default=None):
    """`OrderedDict.setdefault(key, default=None)`: the value under `key`, inserting `default`
    at the end when missing (the same as `dict.setdefault` on the storage)."""
    return dict.setdefault(od, key, default)


def odict_pop(od, key, *default):
    """`OrderedDict.pop(key[, default])`: the same as `dict.pop` on the storage, but for the
    KeyError raised when `key` is missing without a default (`_odict_key_error`)."""
    if not default and not dict.__contains__(od, key):
        raise _odict_key_error(key)
    return dict.pop(od, key, *default)


_NO_ITEM = object()


def _odict_add_pairs(od, pairs):
    """`mutablemapping_add_pairs` (Objects/odictobject.c): each pair is iterated for exactly two
    items, with odict's own errors (not `dict.update`'s "dictionary update sequence element
    #0 has length 1; 2 is required")."""
    for pair in pairs:
        it = iter(pair)
        key = next(it, _NO_ITEM)
        if key is _NO_ITEM:
            raise ValueError("need more than 0 values to unpack")
        value = next(it, _NO_ITEM)
        if value is _NO_ITEM:
            raise ValueError("need more than 1 value to unpack")
        if next(it, _NO_ITEM) is not _NO_ITEM:
            raise ValueError("too many values to unpack (expected 2)")
        dict.__setitem__(od, key, value)


def odict_update(od, *args, **kwargs):
    """`OrderedDict.update` (`mutablemapping_update` in Objects/odictobject.c): an exact dict's
    items, else a mapping (anything with `keys()`) read key by key, else `items()` pairs, else
    pairs, then the keywords; new keys go to the end in that order (the storage's order)."""
    if len(args) > 1:
        raise TypeError(f"update() takes at most 1 positional argument ({len(args)} given)")
    if args:
        arg = args[0]
        if type(arg) is dict:
            _odict_add_pairs(od, arg.items())
        elif hasattr(arg, "keys"):
            for key in arg.keys():
                dict.__setitem__(od, key, arg[key])
        elif hasattr(arg, "items"):
            _odict_add_pairs(od, arg.items())
        else:
            _odict_add_pairs(od, arg)
    if kwargs:
        _odict_add_pairs(od, kwargs.items())
    return None


def odict_clear(od):
    """`OrderedDict.clear()`: removes every item."""
    dict.clear(od)
    return None


ODICT_METHODS = {
    "move_to_end": odict_move_to_end,
    "popitem": odict_popitem,
    "copy": odict_copy,
    "setdefault": odict_setdefault,
    "pop": odict_pop,
    "update": odict_update,
    "clear": odict_clear,
}


# ----- collections.defaultdict methods -------------------------------------------------------
#
# A defaultdict built in the traced frame keeps its factory as `default_factory` and its items in
# a dict storage (Note [defaultdict objects] in src/symbolic/variables/user_defined.rs); its C
# methods (Modules/_collectionsmodule.c) are written here and traced.


def defaultdict_missing(dd, key):
    """`defaultdict.__missing__(key)` (`defdict_missing`): KeyError(key) when `default_factory`
    is None, else `dd[key] = default_factory()` (through the type's `__setitem__`, as
    `PyObject_SetItem` goes) and that value."""
    factory = dd.default_factory
    if factory is None:
        raise KeyError(key)
    value = factory()
    dd[key] = value
    return value


def defaultdict_copy(dd):
    """`defaultdict.copy()` and `__copy__` (`defdict_copy`): `type(dd)(dd.default_factory, dd)`,
    so a subclass's own constructor runs."""
    return type(dd)(dd.default_factory, dd)


DEFAULTDICT_METHODS = {
    "__missing__": defaultdict_missing,
    "copy": defaultdict_copy,
    "__copy__": defaultdict_copy,
}


# ----- operator.itemgetter / attrgetter / methodcaller -----------------------------------------
#
# Calling one of these C objects on a traced value is the traced call below, with the getter's
# arguments (what its `__reduce__` gives) passed as constants (Modules/_operator.c,
# `itemgetter_call_impl`, `attrgetter_call_impl`, `methodcaller_vectorcall`).


def itemgetter_call(items, obj):
    """`itemgetter(*items)(obj)`: `obj[item]` for one item, a tuple of them for several."""
    if len(items) == 1:
        return obj[items[0]]
    return tuple([obj[i] for i in items])


def _dotted_getattr(obj, name):
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def attrgetter_call(names, obj):
    """`attrgetter(*names)(obj)`: the attribute (dotted names walk attribute by attribute) for
    one name, a tuple of them for several."""
    if len(names) == 1:
        return _dotted_getattr(obj, names[0])
    return tuple([_dotted_getattr(obj, n) for n in names])


def methodcaller_call(name, args, kwarg_pairs, obj):
    """`methodcaller(name, *args, **kwargs)(obj)`: `getattr(obj, name)(*args, **kwargs)`; the
    keywords come as `(key, value)` pairs."""
    return getattr(obj, name)(*args, **dict(kwarg_pairs))


def operator_getter_parts(g):
    """`(kind, args, kwarg_pairs)` of an `operator` getter `g` from its `__reduce__`: the
    arguments it was made with (a methodcaller with keywords reduces to a `functools.partial`
    of the class holding them)."""
    import functools

    f, args = g.__reduce__()[:2]
    kw = ()
    if isinstance(f, functools.partial):
        args = f.args + tuple(args)
        kw = tuple(f.keywords.items())
        f = f.func
    return f.__name__, tuple(args), kw


def count_elements(mapping, iterable):
    """`collections._count_elements(mapping, iterable)` (Modules/_collectionsmodule.c,
    `_collections__count_elements_impl`): `mapping[elem] = mapping.get(elem, 0) + 1` for each
    element, through the mapping's own `get` and `__setitem__`."""
    mapping_get = mapping.get
    for elem in iterable:
        mapping[elem] = mapping_get(elem, 0) + 1


def cached_property_get(prop, instance, owner=None):
    """`functools.cached_property.__get__(prop, instance, owner)` (Lib/functools.py) without
    the lock CPython 3.11 takes around the call (a trace is single-threaded): the value is
    computed by `prop.func(instance)` once and stored in the instance's `__dict__` under the
    attribute's name, which later reads find first. Traced in its place (Note [non-data
    descriptors] in src/symbolic/variables/descriptors.rs)."""
    if instance is None:
        return prop
    name = prop.attrname
    if name is None:
        raise TypeError("Cannot use cached_property instance without calling __set_name__ on it.")
    try:
        cache = instance.__dict__
    except AttributeError:
        msg = f"No '__dict__' attribute on {type(instance).__name__!r} instance to cache {name!r} property."
        raise TypeError(msg) from None
    if name in cache:
        return cache[name]
    val = prop.func(instance)
    cache[name] = val
    return val


# Note [heap functions]: `heapq.nlargest`, `nsmallest`, `merge` and the user's own heap code
# are Python, but the primitives they call are C (Modules/_heapqmodule.c). These are those
# primitives written out in Python, comparison for comparison, so the trace runs them (and
# `heapq`'s own Python functions around them): the same `<` calls on the same pairs in the same
# order, the same swaps, the same errors (TypeError for a non-list, IndexError for an empty
# heap, RuntimeError when a comparison changed the list's size). The `_max` variants are the
# private max-heap ones `nsmallest` uses. A non-list heap raises Argument Clinic's TypeError (3.11
# to 3.13 declare the parameter as a list). A comparison's truth is taken once, right after it, as
# `PyObject_RichCompareBool` does.


def _tp_name(obj):
    """How CPython's C messages name the type of `obj` (`Py_TYPE(obj)->tp_name`): a class
    statement's type by its name, a C type by its dotted name unless it is a builtin one."""
    t = type(obj)
    heap_type = t.__flags__ & (1 << 9)  # Py_TPFLAGS_HEAPTYPE
    return t.__name__ if heap_type or t.__module__ == "builtins" else f"{t.__module__}.{t.__name__}"


def _heap_list(heap, name, position):
    """Argument Clinic's check of a `list` parameter (`_PyArg_BadArgument`: None is named
    "None")."""
    if not isinstance(heap, list):
        raise TypeError(f"{name}() {position} must be list, not {'None' if heap is None else _tp_name(heap)}")


def _heap_sift_toward_root(heap, start, pos, is_max):
    """Moves `heap[pos]` up towards `start` while it belongs above its parent (C `siftdown`,
    `siftdown_max`)."""
    size = len(heap)
    if pos >= size:
        raise IndexError("index out of range")
    while pos > start:
        up = (pos - 1) >> 1
        rises = bool(heap[up] < heap[pos]) if is_max else bool(heap[pos] < heap[up])
        if len(heap) != size:
            raise RuntimeError("list changed size during iteration")
        if not rises:
            break
        heap[up], heap[pos] = heap[pos], heap[up]
        pos = up


def _heap_sift_to_leaf(heap, pos, is_max):
    """Moves the preferred child up until `pos` is a leaf, then the item placed there back
    up (C `siftup`, `siftup_max`)."""
    end = len(heap)
    start = pos
    if pos >= end:
        raise IndexError("index out of range")
    while pos < end >> 1:
        child = 2 * pos + 1
        if child + 1 < end:
            keep_left = bool(heap[child + 1] < heap[child]) if is_max else bool(heap[child] < heap[child + 1])
            if not keep_left:
                child += 1
            if len(heap) != end:
                raise RuntimeError("list changed size during iteration")
        heap[child], heap[pos] = heap[pos], heap[child]
        pos = child
    _heap_sift_toward_root(heap, start, pos, is_max)


def _heap_pop(heap, is_max):
    _heap_list(heap, "_heappop_max" if is_max else "heappop", "argument")
    if not heap:
        raise IndexError("index out of range")
    last = heap.pop()
    if not heap:
        return last
    top = heap[0]
    heap[0] = last
    _heap_sift_to_leaf(heap, 0, is_max)
    return top


def _heap_swap_top(heap, item, is_max):
    """The top of `heap` after `item` took its place and sank (IndexError when empty)."""
    if not heap:
        raise IndexError("index out of range")
    top = heap[0]
    heap[0] = item
    _heap_sift_to_leaf(heap, 0, is_max)
    return top


def _heap_replace(heap, item, is_max):
    _heap_list(heap, "_heapreplace_max" if is_max else "heapreplace", "argument 1")
    return _heap_swap_top(heap, item, is_max)


def _heap_build(heap, is_max):
    # C builds large heaps in another node order (`cache_friendly_heapify`), which makes the
    # same comparisons and the same heap: each node is sifted after both its subtrees.
    _heap_list(heap, "_heapify_max" if is_max else "heapify", "argument")
    for i in range((len(heap) >> 1) - 1, -1, -1):
        _heap_sift_to_leaf(heap, i, is_max)


def heappush(heap, item, /):
    """`heapq.heappush` (Note [heap functions])."""
    _heap_list(heap, "heappush", "argument 1")
    heap.append(item)
    _heap_sift_toward_root(heap, 0, len(heap) - 1, False)


def heappop(heap, /):
    """`heapq.heappop` (Note [heap functions])."""
    return _heap_pop(heap, False)


def heapreplace(heap, item, /):
    """`heapq.heapreplace` (Note [heap functions])."""
    return _heap_replace(heap, item, False)


def heappushpop(heap, item, /):
    """`heapq.heappushpop` (Note [heap functions]): `item` itself when the heap is empty or its
    top is not smaller."""
    _heap_list(heap, "heappushpop", "argument 1")
    if not heap:
        return item
    if not heap[0] < item:
        return item
    return _heap_swap_top(heap, item, False)


def heapify(heap, /):
    """`heapq.heapify` (Note [heap functions])."""
    _heap_build(heap, False)


def heappop_max(heap, /):
    """`heapq._heappop_max` (Note [heap functions])."""
    return _heap_pop(heap, True)


def heapreplace_max(heap, item, /):
    """`heapq._heapreplace_max` (Note [heap functions])."""
    return _heap_replace(heap, item, True)


def heapify_max(heap, /):
    """`heapq._heapify_max` (Note [heap functions])."""
    _heap_build(heap, True)


class KeyWrapper:
    """``functools.cmp_to_key(mycmp)(obj)`` (Modules/_functoolsmodule.c, ``keyobject``): a key
    whose rich comparisons compare ``mycmp(self.obj, other.obj)`` with 0; comparing with
    anything but another key raises TypeError, and it is unhashable. Traced in place of the C
    key so that a sort by it is a traced sort (Note [traced sorts] in
    ``variables/builtin.rs``)."""

    __slots__ = ("cmp", "obj")
    __hash__ = None

    def __init__(self, cmp, obj):
        self.cmp = cmp
        self.obj = obj

    def _compare(self, other):
        if type(other) is not KeyWrapper:
            raise TypeError("other argument must be K instance")
        return self.cmp(self.obj, other.obj)

    def __lt__(self, other):
        return self._compare(other) < 0

    def __le__(self, other):
        return self._compare(other) <= 0

    def __gt__(self, other):
        return self._compare(other) > 0

    def __ge__(self, other):
        return self._compare(other) >= 0

    def __eq__(self, other):
        return self._compare(other) == 0

    def __ne__(self, other):
        return self._compare(other) != 0


def cmp_to_key(mycmp):
    """``functools.cmp_to_key``: a callable that makes a :class:`KeyWrapper` of ``mycmp``."""
    return functools.partial(KeyWrapper, mycmp)


BUILTIN_POLYFILLS = {
    ("_functools", "cmp_to_key"): cmp_to_key,
    ("_heapq", "heappush"): heappush,
    ("_heapq", "heappop"): heappop,
    ("_heapq", "heapreplace"): heapreplace,
    ("_heapq", "heappushpop"): heappushpop,
    ("_heapq", "heapify"): heapify,
    ("_heapq", "_heappop_max"): heappop_max,
    ("_heapq", "_heapreplace_max"): heapreplace_max,
    ("_heapq", "_heapify_max"): heapify_max,
}


def iter_peek(it, k):
    """The item `k` places ahead in the tuple, list or range iterator `it`, without consuming
    it: what a guard and a resume function read for `Source::IterItem`. `it.__reduce__()` is
    `(iter, (seq,), pos)`, with `pos` None from CPython 3.12 for a range iterator, whose range
    then starts at its next item (Objects/rangeobject.c, `rangeiter_reduce`). Raises IndexError
    when fewer than `k + 1` items are left."""
    red = it.__reduce__()
    pos = red[2] if len(red) > 2 and red[2] is not None else 0
    seq = red[1][0]
    # The iterator reads the storage, not a subclass's `__getitem__` (Note [iterators over
    # subclass storage] in src/guards/mod.rs).
    if isinstance(seq, list):
        return list.__getitem__(seq, pos + k)
    if isinstance(seq, tuple):
        return tuple.__getitem__(seq, pos + k)
    return seq[pos + k]


def dict_key_at(d, k):
    """Key `k` of dict `d` in its iteration order, read through the base class's C `keys` (an
    OrderedDict's linked list, else the storage), so no method of a subclass runs: what a guard
    and a resume function read for `Source::DictKey`. Raises IndexError when `d` has fewer than
    `k + 1` keys."""
    keys = collections.OrderedDict.keys if isinstance(d, collections.OrderedDict) else dict.keys
    for i, key in enumerate(keys(d)):
        if i == k:
            return key
    raise IndexError(k)


def deque_replace(d, items):
    """The replay of a traced mutation of a deque from outside the frame (Note [deques] in
    src/symbolic/variables/deque.rs): its contents become `items` (already cut to its maxlen)."""
    d.clear()
    d.extend(items)


def zip_strict(*iterables):
    """`zip(*iterables, strict=True)`: how a strict zip iterator that outlives a graph is made
    again after it (its inner iterators are rebuilt first; `zip`'s keyword cannot be passed
    through the positional rebuild call)."""
    return zip(*iterables, strict=True)


def logger_call_at(method, site, args, kwargs):
    """Replays ``method(*args, **kwargs)``, a standard method of a ``logging.Logger`` called in a
    compiled frame, so that its record names ``site`` = ``(pathname, lineno, funcName)`` as its
    caller: the traced call's own frame, which may be a function inlined into the graph
    (Note [logger calls] in src/symbolic/variables/user_defined.rs). ``Logger._log`` asks
    ``self.findCaller`` for it (CPython's Lib/logging/__init__.py); an instance attribute shadows
    that method for the one call, so the level check, ``makeRecord`` and the handlers run as in
    eager. Another thread logging through the same logger during the call would see the site too.
    """
    logger = method.__self__
    pathname, lineno, func = site

    def find_caller(stack_info=False, stacklevel=1):
        return pathname, lineno, func, None

    logger.findCaller = find_caller
    try:
        method(*args, **(kwargs or {}))
    finally:
        del logger.findCaller


def _library_code(obj):
    """Whether ``obj``'s class is the standard library's logging or pytest's (test-runner) code."""
    module = type(obj).__module__ or ""
    return module == "logging" or module.startswith(("logging.", "_pytest."))


def logger_sees_only_records(logger):
    """Whether a record that ``logger`` handles reaches only handlers, formatters and filters of
    the standard library's logging package or of pytest (along the ``propagate`` chain, or
    ``logging.lastResort`` when none): code that reads the record and nothing of the program's
    state. A logging call of such a logger may be replayed after writes that follow it in the
    frame (Note [logger calls] in src/symbolic/variables/user_defined.rs); with any other (a
    user's handler may read what those writes change), it may not."""
    import logging

    seen = []
    node = logger
    while node is not None:
        if not all(type(f) is logging.Filter for f in node.filters):
            return False
        seen.extend(node.handlers)
        if not node.propagate:
            break
        node = node.parent
    if not seen and logging.lastResort is not None:
        seen.append(logging.lastResort)
    for h in seen:
        if not _library_code(h) or (h.formatter is not None and not _library_code(h.formatter)):
            return False
        if not all(type(f) is logging.Filter for f in h.filters):
            return False
    return True


class SortKey:
    """Stands for key ``i`` of a sort that the tracer has CPython's own ``list.sort`` run
    (Note [traced sorts] in ``variables/builtin.rs``): ``a < b`` is answered by ``lt(a.i, b.i)``,
    which compares the two traced keys in the trace. The sort thus makes exactly the
    comparisons, in exactly the order, that eager's makes on the real keys."""

    __slots__ = ("i", "lt")

    def __init__(self, i, lt):
        self.i = i
        self.lt = lt

    def __lt__(self, other):
        return self.lt(self.i, other.i)


def grad_mode_setter(mode, prev):
    """A ``torch.set_grad_enabled(mode)`` object as one made when grad mode was ``prev`` (its
    ``__init__`` already switched to ``mode``; its ``__exit__`` goes back to ``prev``), without
    switching anything now: how a resume function receives one a graph made."""
    import torch

    obj = object.__new__(torch.set_grad_enabled)
    obj.prev = prev
    obj.mode = mode
    return obj


def replay_hook(module, method, hook, kwargs, removed):
    """The replay of `module.<method>(hook, **kwargs)` (`register_forward_hook` or
    `register_forward_pre_hook`) that a trace made, followed by `handle.remove()` when the
    trace removed it too (Note [hooks registered in the trace] in
    `src/symbolic/variables/hooks.rs`). Returns the handle."""
    handle = getattr(module, method)(hook, **kwargs)
    if removed:
        handle.remove()
    return handle


def remake_generator_ctx(helper, args, kwargs):
    """A `@contextmanager` manager made again before it is entered: `helper(*args, **kwargs)`
    (Note [generator context managers across a break] in
    `src/symbolic/variables/ctx_manager.rs`). Making it runs none of the generator's code."""
    return helper(*args, **kwargs)


def function_with_attrs(func, attrs):
    """`func` (a function the transformed code just made again) with the attributes the trace
    wrote on it (Note [attributes of functions made in the frame] in
    `src/symbolic/variables/functions.rs`): named slots set, `__dict__` updated, in write
    order."""
    for name, value in attrs.items():
        if name == "__dict__":
            func.__dict__.update(value)
        else:
            setattr(func, name, value)
    return func


class UnmodelledCtxAttribute(Exception):
    """Raised by `AutogradFunctionCtx` for an attribute of the real `ctx` it does not model:
    the tracer turns it into a graph break, so the `apply` runs in Python with the real `ctx`."""


class AutogradFunctionCtx:
    """The `ctx` a custom `torch.autograd.Function`'s `forward` (or `setup_context`) is traced
    with while the tracer checks that the forward has no effect outside the graph (Note
    [custom autograd.Function] in `src/symbolic/variables/functions.rs`). The trace of the
    forward is only a check: the graph calls the Function's real `apply`, whose `forward` gets
    torch's own `ctx`. So this class models what a forward may write and read on it:
    `needs_input_grad` (eager's answer, one bool per argument: a tensor that requires grad),
    `save_for_backward`, `save_for_forward`, `mark_non_differentiable`,
    `set_materialize_grads`, attributes of the user's own; `mark_dirty` is recorded (the
    tracer refuses it: an in-place write of an input). The other attributes of torch's `ctx`
    (`saved_tensors`, `next_functions`, `metadata`, ...) raise `UnmodelledCtxAttribute`."""

    def __init__(self, needs_input_grad):
        self.needs_input_grad = needs_input_grad
        self.materialize_grads = True
        self.dynamo_marked_dirty = False

    def save_for_backward(self, *tensors):
        self.to_save = tensors

    def save_for_forward(self, *tensors):
        self.saved_for_forward = tensors

    def mark_dirty(self, *args):
        self.dynamo_marked_dirty = True
        self.dirty_tensors = args

    def mark_non_differentiable(self, *args):
        self.non_differentiable = args

    def set_materialize_grads(self, value):
        self.materialize_grads = value


def _unmodelled_ctx_attribute(name):
    def get(self):
        raise UnmodelledCtxAttribute(name)

    return property(get)


for _name in (
    "saved_tensors", "saved_variables", "next_functions", "metadata", "requires_grad", "name",
    "register_hook", "register_prehook", "apply", "apply_jvp", "mark_shared_storage",
    "maybe_clear_saved_tensors", "set_output_grad_dtype", "output_grad_dtypes",
    "_raw_saved_tensors", "_materialize_non_diff_grads", "_sequence_nr", "_input_metadata",
    "_forward_cls", "_is_pure_view", "_get_user_fn", "input_grad_buffers",
):
    setattr(AutogradFunctionCtx, _name, _unmodelled_ctx_attribute(_name))
del _name


def number_itself(n):
    """``n.conjugate()``, ``n.__index__()``, ``n.__int__()``, ``n.__pos__()`` ... of an exact
    int (and ``conjugate``/``__float__``/``__pos__`` of an exact float): the number itself, as
    ``long_long``/``float_float`` give it (Objects/longobject.c, Objects/floatobject.c). The
    trace runs this for a symbolic number, so the result is the number's own tracker."""
    return n


def checkpoint_pack_counter(marks):
    """The `(pack, unpack)` pair of `torch.autograd.graph.saved_tensors_hooks` that the trace of
    a checkpointed region installs to count the tensors autograd saves there (`marks` gets one
    item per saved tensor): src/symbolic/object_protocol.rs, Note [checkpointed Python
    effects]. Both hand the tensor back unchanged."""

    def pack(t):
        marks.append(None)
        return t

    def unpack(t):
        return t

    return pack, unpack


def profiler_block_exit(exc_type, exc_value, traceback):
    """The ``__exit__`` of a ``torch.profiler.record_function`` block in compiled code (Note
    [profiler ranges] in src/symbolic/translator.rs): the block was not entered, so leaving it
    does nothing and lets an exception through."""
    return None
