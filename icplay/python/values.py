"""Python values as plain tagged JSON: how a test call's result leaves the sandbox that made it.

Runs on both sides: inside a sandbox (prepended to the interpreter server, standard library
only, python3 >= 3.8, no ``__future__`` import) where ``encode_value`` turns a call's result
into data, and in icplay and the judge, where ``decode_value`` rebuilds it. Only values whose
type is exactly one of the builtin value types below are encoded (a subclass, a custom class,
a generator: ``Opaque``), so nothing of the solver's code survives the trip: no ``__eq__``,
``__repr__``, ``__reduce__`` or ``__hash__`` of its own. The decoder builds only those types
and checks every field, so data forged in the solver's sandbox is just another value, or
rejected (``ValueError``). Integers travel in hexadecimal (no limit on digits), floats as
``repr`` (exact round trip; ``nan`` and ``inf`` included).
"""

import collections
import decimal
import fractions
import json

MAX_DEPTH = 200
MAX_NODES = 200000
MAX_TEXT = 512 * 1024        # characters of one encoded value


class Opaque(Exception):
    """A value that cannot be brought out faithfully as plain data (the message says why)."""


_SEQUENCES = {list: "list", tuple: "tuple", set: "set", frozenset: "frozenset", collections.deque: "deque"}
_FACTORIES = {None: None, int: "int", float: "float", str: "str", list: "list", dict: "dict", set: "set",
              tuple: "tuple", bool: "bool", frozenset: "frozenset"}


def encode_value(value):
    """``value`` as JSON text (raises ``Opaque`` for anything not exactly a builtin value type)."""
    nodes = [0]

    def enc(v, depth):
        nodes[0] += 1
        if depth > MAX_DEPTH or nodes[0] > MAX_NODES:
            raise Opaque("the value is nested too deep or too large to bring out")
        t = type(v)
        if v is None:
            return ["none"]
        if t is bool:
            return ["bool", v]
        if t is int:
            return ["int", int.__format__(v, "x")]
        if t is float:
            return ["float", float.__repr__(v)]
        if t is complex:
            return ["complex", float.__repr__(v.real), float.__repr__(v.imag)]
        if t is str:
            return ["str", v]
        if t is bytes or t is bytearray:
            return [t.__name__, bytes.hex(bytes(v))]
        if t in _SEQUENCES:
            items = [enc(x, depth + 1) for x in v]
            if t is collections.deque:
                return ["deque", items, v.maxlen]
            return [_SEQUENCES[t], items]
        if t is dict or t is collections.OrderedDict or t is collections.Counter:
            pairs = [[enc(k, depth + 1), enc(x, depth + 1)] for k, x in dict.items(v)]
            return [{dict: "dict", collections.OrderedDict: "OrderedDict", collections.Counter: "Counter"}[t], pairs]
        if t is collections.defaultdict:
            if v.default_factory not in _FACTORIES:
                raise Opaque("a defaultdict whose factory is not a builtin type")
            pairs = [[enc(k, depth + 1), enc(x, depth + 1)] for k, x in dict.items(v)]
            return ["defaultdict", pairs, _FACTORIES[v.default_factory]]
        if t is range:
            return ["range", int.__format__(v.start, "x"), int.__format__(v.stop, "x"), int.__format__(v.step, "x")]
        if t is decimal.Decimal:
            return ["Decimal", decimal.Decimal.__str__(v)]
        if t is fractions.Fraction:
            return ["Fraction", int.__format__(v.numerator, "x"), int.__format__(v.denominator, "x")]
        raise Opaque("a %s object" % _type_name(t))

    text = json.dumps(enc(value, 0), ensure_ascii=True, allow_nan=False)
    if len(text) > MAX_TEXT:
        raise Opaque("the value is too large to bring out (%d characters encoded)" % len(text))
    return text


def _type_name(t):
    try:
        name = type.__getattribute__(t, "__qualname__")
        module = type.__getattribute__(t, "__module__")
    except Exception:
        return "unnamed"
    if not isinstance(name, str) or not isinstance(module, str):
        return "unnamed"
    return (name if module in ("builtins", "__main__") else module + "." + name)[:200]


def _int(text):
    if type(text) is not str or not text or len(text) > MAX_TEXT:
        raise ValueError("an int field is not hexadecimal text")
    return int(text, 16)


def _float(text):
    if type(text) is not str or len(text) > 64:
        raise ValueError("a float field is not a float's repr")
    return float(text)


def decode_value(text):
    """The value encoded in ``text`` (raises ``ValueError`` for anything not made by ``encode_value``)."""
    if type(text) is not str or len(text) > MAX_TEXT:
        raise ValueError("an encoded value must be text of at most %d characters" % MAX_TEXT)
    try:
        data = json.loads(text)
    except Exception:
        raise ValueError("an encoded value is not JSON") from None
    nodes = [0]

    def items(x, depth):
        if type(x) is not list:
            raise ValueError("a container's items are not a list")
        return [dec(i, depth + 1) for i in x]

    def pairs(x, depth):
        if type(x) is not list or any(type(p) is not list or len(p) != 2 for p in x):
            raise ValueError("a mapping's items are not pairs")
        return [(dec(k, depth + 1), dec(v, depth + 1)) for k, v in x]

    def dec(node, depth):
        nodes[0] += 1
        if depth > MAX_DEPTH or nodes[0] > MAX_NODES:
            raise ValueError("an encoded value is nested too deep or too large")
        if type(node) is not list or not node or type(node[0]) is not str:
            raise ValueError("an encoded value is not a tagged list")
        tag, rest = node[0], node[1:]
        shape = {"none": 0, "bool": 1, "int": 1, "float": 1, "complex": 2, "str": 1, "bytes": 1, "bytearray": 1,
                 "list": 1, "tuple": 1, "set": 1, "frozenset": 1, "deque": 2, "dict": 1, "OrderedDict": 1,
                 "Counter": 1, "defaultdict": 2, "range": 3, "Decimal": 1, "Fraction": 2}
        if tag not in shape or len(rest) != shape[tag]:
            raise ValueError("unknown tag or wrong fields: %r" % tag[:40])
        if tag == "none":
            return None
        if tag == "bool":
            if type(rest[0]) is not bool:
                raise ValueError("a bool field is not true or false")
            return rest[0]
        if tag == "int":
            return _int(rest[0])
        if tag == "float":
            return _float(rest[0])
        if tag == "complex":
            return complex(_float(rest[0]), _float(rest[1]))
        if tag == "str":
            if type(rest[0]) is not str:
                raise ValueError("a str field is not text")
            return rest[0]
        if tag in ("bytes", "bytearray"):
            if type(rest[0]) is not str:
                raise ValueError("a bytes field is not hexadecimal text")
            raw = bytes.fromhex(rest[0])
            return raw if tag == "bytes" else bytearray(raw)
        if tag in ("list", "tuple", "set", "frozenset"):
            made = items(rest[0], depth)
            if tag == "list":
                return made
            try:
                return {"tuple": tuple, "set": set, "frozenset": frozenset}[tag](made)
            except TypeError:
                raise ValueError("a set holds an unhashable item") from None
        if tag == "deque":
            if rest[1] is not None and (type(rest[1]) is not int or rest[1] < 0):
                raise ValueError("a deque's maxlen is not a count")
            return collections.deque(items(rest[0], depth), rest[1])
        if tag in ("dict", "OrderedDict", "Counter", "defaultdict"):
            made = pairs(rest[0], depth)
            if tag == "defaultdict":
                factories = {name: t for t, name in _FACTORIES.items()}
                if rest[1] not in factories:
                    raise ValueError("a defaultdict's factory is not a builtin type")
                mapping = collections.defaultdict(factories[rest[1]])
            else:
                mapping = {"dict": dict, "OrderedDict": collections.OrderedDict, "Counter": collections.Counter}[tag]()
            try:
                for k, v in made:
                    mapping[k] = v
            except TypeError:
                raise ValueError("a mapping has an unhashable key") from None
            return mapping
        if tag == "range":
            return range(_int(rest[0]), _int(rest[1]), _int(rest[2]))
        if tag == "Decimal":
            if type(rest[0]) is not str or len(rest[0]) > MAX_TEXT:
                raise ValueError("a Decimal field is not text")
            try:
                return decimal.Decimal(rest[0])
            except Exception:
                raise ValueError("a Decimal field is not a number") from None
        if tag == "Fraction":
            try:
                return fractions.Fraction(_int(rest[0]), _int(rest[1]))
            except ZeroDivisionError:
                raise ValueError("a Fraction has a zero denominator") from None
        raise ValueError("unknown tag %r" % tag[:40])

    try:
        return dec(data, 0)
    except (RecursionError, OverflowError, MemoryError):
        raise ValueError("an encoded value cannot be rebuilt") from None
