"""The plain-data trip of a test call's result (values.py) and the split of a test into calls
and a check (calls.py): what leaves a scoring sandbox, and what never enters it."""

from __future__ import annotations

import collections
import decimal
import fractions
import json
import math

import pytest

from icplay.python.calls import split_test
from icplay.python.values import Opaque, decode_value, encode_value

ROUND_TRIP = [None, True, False, 0, -7, 10 ** 5000, 1.5, -0.0, float("inf"), 1e-300, 3 + 4j, "", "héllo\udcff",
              b"\x00\xff", bytearray(b"ab"), [1, [2, (3,)]], (), (1, "a"), {1, 2}, frozenset({"x"}),
              {"a": [1], (1, 2): None}, collections.OrderedDict([("b", 1), ("a", 2)]),
              collections.Counter("abca"), collections.deque([1, 2], 3), range(1, 10, 2),
              collections.defaultdict(list, {"k": [1]}), decimal.Decimal("1.10"), fractions.Fraction(3, 4)]


@pytest.mark.parametrize("value", ROUND_TRIP, ids=lambda v: type(v).__name__)
def test_builtin_values_come_back_equal_and_of_the_same_type(value):
    back = decode_value(encode_value(value))
    assert type(back) is type(value) and back == value
    if type(value) is not int:    # a 5000-digit int has no decimal repr (Python's limit)
        assert repr(back) == repr(value)


def test_nan_comes_back_as_nan():
    assert math.isnan(decode_value(encode_value(float("nan"))))


class AlwaysEqual:
    def __eq__(self, other):
        return True


class Sneaky(int):
    def __eq__(self, other):
        return True


class Reducer:
    def __reduce__(self):
        return (print, ("reduced",))


@pytest.mark.parametrize("value", [AlwaysEqual(), Sneaky(3), [1, Sneaky(2)], {"k": AlwaysEqual()}, Reducer(),
                                   (x for x in range(3)), map(str, [1]), print, object()],
                         ids=["always-equal", "int-subclass", "nested-subclass", "dict-value", "reduce",
                              "generator", "map", "function", "object"])
def test_anything_not_exactly_a_builtin_value_type_is_opaque(value):
    with pytest.raises(Opaque):
        encode_value(value)


def test_cycles_and_depth_bombs_are_opaque_not_a_crash():
    loop: list = []
    loop.append(loop)
    deep: list = []
    for _ in range(1000):
        deep = [deep]
    for value in (loop, deep):
        with pytest.raises(Opaque):
            encode_value(value)


@pytest.mark.parametrize("text", ["", "null", "[]", '["int"]', '["int", 3]', '["float", "1e999999x"]', '["nope", 1]',
                                  '["set", [["list", []]]]', '["dict", [[["list", []], ["none"]]]]', '["bool", 1]',
                                  '["defaultdict", [], "os.system"]', '["Fraction", "1", "0"]', '["deque", [], -1]',
                                  "[" * 5000 + "]" * 5000],
                         ids=lambda t: t[:24])
def test_the_decoder_refuses_forged_data_with_a_value_error(text):
    with pytest.raises(ValueError):
        decode_value(text)


def test_the_decoder_refuses_more_than_its_size_limit():
    with pytest.raises(ValueError):
        decode_value(json.dumps(["str", "x" * (600 * 1024)]))


def test_a_test_splits_into_its_calls_and_a_check_holding_the_expected_value():
    split = split_test("assert add(1, 2) == 3", "add")
    assert split.calls == ("add(1, 2)",) and "3" in split.check and "add" not in split.check
    assert not split.whole
    many = split_test("assert f(x=[1, 2]) + f(1.0 / 3) == f(g(2))", "f")
    assert many.calls == ("f(x=[1, 2])", "f(1.0 / 3)", "f(g(2))")
    assert many.check == "assert __icplay_call__(0) + __icplay_call__(1) == __icplay_call__(2)"
    # the call's printed value: a bare expression and print() keep their shape
    assert split_test("print(add(5, 5))", "add").check == "print(__icplay_call__(0))"


@pytest.mark.parametrize("test", ["assert all(f(x) for x in [1, 2])", "assert (lambda: f(1))() == 1",
                                  "assert f(f(1)) == 1", "assert callable(f)", "assert g(1) == 1",
                                  "assert f((y := 2)) == 1", "def broken(:"])
def test_a_test_that_cannot_be_split_runs_whole(test):
    assert split_test(test, "f").whole
