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


_SEQUENCES: dict[type, str] = {list: "list", tuple: "tuple", set: "set", frozenset: "frozenset", collections.deque: "deque"}
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
    except AttributeError:   # a type made without a __module__ (type() in exec with no __name__)
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
    except (ValueError, RecursionError):   # not JSON, or nested past the parser's depth
        raise ValueError("an encoded value is not JSON") from None
    try:
        return _Decoder().value(data, 0)
    except (RecursionError, OverflowError, MemoryError):
        raise ValueError("an encoded value cannot be rebuilt") from None


# each tag's number of fields
_SHAPES = {"none": 0, "bool": 1, "int": 1, "float": 1, "complex": 2, "str": 1, "bytes": 1, "bytearray": 1,
           "list": 1, "tuple": 1, "set": 1, "frozenset": 1, "deque": 2, "dict": 1, "OrderedDict": 1,
           "Counter": 1, "defaultdict": 2, "range": 3, "Decimal": 1, "Fraction": 2}


def _text_field(field, what):
    if type(field) is not str:
        raise ValueError(what)
    return field


class _Decoder:
    """decode_value's walk over the tagged lists: every field checked, the nesting and the
    number of nodes bounded; each tag is made by its method in ``_MAKERS``."""

    def __init__(self):
        self.nodes = 0

    def value(self, node, depth):
        self.nodes += 1
        if depth > MAX_DEPTH or self.nodes > MAX_NODES:
            raise ValueError("an encoded value is nested too deep or too large")
        if type(node) is not list or not node or type(node[0]) is not str:
            raise ValueError("an encoded value is not a tagged list")
        tag, rest = node[0], node[1:]
        if tag not in _SHAPES or len(rest) != _SHAPES[tag]:
            raise ValueError("unknown tag or wrong fields: %r" % tag[:40])
        return _MAKERS[tag](self, tag, rest, depth)

    def items(self, x, depth):
        if type(x) is not list:
            raise ValueError("a container's items are not a list")
        return [self.value(i, depth + 1) for i in x]

    def pairs(self, x, depth):
        if type(x) is not list or any(type(p) is not list or len(p) != 2 for p in x):
            raise ValueError("a mapping's items are not pairs")
        return [(self.value(k, depth + 1), self.value(v, depth + 1)) for k, v in x]

    def make_none(self, tag, rest, depth):
        return None

    def make_bool(self, tag, rest, depth):
        if type(rest[0]) is not bool:
            raise ValueError("a bool field is not true or false")
        return rest[0]

    def make_int(self, tag, rest, depth):
        return _int(rest[0])

    def make_float(self, tag, rest, depth):
        return _float(rest[0])

    def make_complex(self, tag, rest, depth):
        return complex(_float(rest[0]), _float(rest[1]))

    def make_str(self, tag, rest, depth):
        return _text_field(rest[0], "a str field is not text")

    def make_bytes(self, tag, rest, depth):
        raw = bytes.fromhex(_text_field(rest[0], "a bytes field is not hexadecimal text"))
        return raw if tag == "bytes" else bytearray(raw)

    def make_sequence(self, tag, rest, depth):
        made = self.items(rest[0], depth)
        if tag == "list":
            return made
        try:
            return {"tuple": tuple, "set": set, "frozenset": frozenset}[tag](made)
        except TypeError:
            raise ValueError("a set holds an unhashable item") from None

    def make_deque(self, tag, rest, depth):
        if rest[1] is not None and (type(rest[1]) is not int or rest[1] < 0):
            raise ValueError("a deque's maxlen is not a count")
        return collections.deque(self.items(rest[0], depth), rest[1])

    def make_mapping(self, tag, rest, depth):
        made = self.pairs(rest[0], depth)
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

    def make_range(self, tag, rest, depth):
        return range(_int(rest[0]), _int(rest[1]), _int(rest[2]))

    def make_decimal(self, tag, rest, depth):
        if type(rest[0]) is not str or len(rest[0]) > MAX_TEXT:
            raise ValueError("a Decimal field is not text")
        try:
            return decimal.Decimal(rest[0])
        except (ArithmeticError, ValueError):   # decimal.InvalidOperation: text that is no number
            raise ValueError("a Decimal field is not a number") from None

    def make_fraction(self, tag, rest, depth):
        try:
            return fractions.Fraction(_int(rest[0]), _int(rest[1]))
        except ZeroDivisionError:
            raise ValueError("a Fraction has a zero denominator") from None


_MAKERS = {
    "none": _Decoder.make_none, "bool": _Decoder.make_bool, "int": _Decoder.make_int,
    "float": _Decoder.make_float, "complex": _Decoder.make_complex, "str": _Decoder.make_str,
    "bytes": _Decoder.make_bytes, "bytearray": _Decoder.make_bytes,
    "list": _Decoder.make_sequence, "tuple": _Decoder.make_sequence, "set": _Decoder.make_sequence,
    "frozenset": _Decoder.make_sequence, "deque": _Decoder.make_deque,
    "dict": _Decoder.make_mapping, "OrderedDict": _Decoder.make_mapping, "Counter": _Decoder.make_mapping,
    "defaultdict": _Decoder.make_mapping,
    "range": _Decoder.make_range, "Decimal": _Decoder.make_decimal, "Fraction": _Decoder.make_fraction,
}
