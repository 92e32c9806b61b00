"""The typed result encoding: faithful round trips, and a decoder that survives any bytes in
bounded time and memory (results come from the program's process)."""

import math
import random
import struct
import sys
import time
from collections import Counter, OrderedDict, namedtuple

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from rlvr.sandbox.code.judging.decoding import Decoder, decode, safe_set
from rlvr.sandbox.code.judging.encoded_facts import plain_encoded, shallow_is_floats
from rlvr.sandbox.code.running.values import (
    LIST,
    MIXED_LIST,
    SET,
    Encoder,
    MalformedValue,
    Opaque,
    Unencodable,
    _varuint,
    encode,
)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(-(10**400), 10**400),
    st.floats(allow_nan=False),
    st.text(),
    st.binary(),
    st.complex_numbers(allow_nan=False),
)
hashables = st.recursive(
    scalars, lambda inner: st.tuples(inner, inner) | st.frozensets(inner, max_size=4), max_leaves=8
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=12)
        | st.tuples(inner, inner)
        | st.sets(hashables, max_size=6)
        | st.dictionaries(hashables, inner, max_size=6)
    ),
    max_leaves=25,
)


def same(a, b):
    """Equal and of the same types all the way down (``==`` alone says 1 == True == 1.0)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return a == b


@settings(max_examples=400, deadline=None)
@given(values)
def test_round_trip_keeps_every_type(value):
    assert same(decode(encode(value)), value)


def test_types_json_loses_are_kept():
    for value in [
        (1, 2),
        [1, 2],
        True,
        1,
        1.0,
        {1, 2},
        frozenset({1}),
        {1: "a", (2, 3): None},
        b"\x00",
        bytearray(b"x"),
        3 + 4j,
        None,
    ]:
        assert same(decode(encode(value)), value), value
    assert encode((1, 2)) != encode([1, 2]) and encode(True) != encode(1) and encode(1) != encode(1.0)
    assert math.isnan(decode(encode(float("nan"))))
    assert decode(encode(float("-inf"))) == float("-inf")


def test_huge_integers_travel_as_bytes_not_text():
    big = 7**2_000_000  # ~1.7 million digits: str() alone would take seconds
    start = time.perf_counter()
    assert decode(encode(big)) == big
    assert time.perf_counter() - start < 1.0
    assert decode(encode(-big)) == -big


def test_long_numeric_lists_are_packed():
    for value in [list(range(100)), [0.5] * 100, [1, 2.5, True, -3] * 30, [2**63 - 1, -(2**63)] * 10]:
        assert same(decode(encode(value)), value)
    assert len(encode(list(range(1000)))) < 8100


def _mixed_list_by_struct(value: list) -> bytes:
    """``MIXED_LIST``'s bytes as the format defines them: a type code per element, then one
    little-endian word per element packed by ``struct`` code by code."""
    codes = bytes({int: ord("q"), float: ord("d"), bool: ord("?")}[type(x)] for x in value)
    head = bytearray([1, MIXED_LIST])
    _varuint(len(value), head)
    return bytes(head) + codes + struct.pack("<" + codes.decode().replace("?", "q"), *value)


_SPECIAL_FLOATS = st.sampled_from([0.0, -0.0, math.inf, -math.inf, 5e-324, 1e308, float("nan")])


@settings(max_examples=300, deadline=None)
@example([0.5] * 40, [(0, 7)], 1 << 20)
@example([1.5] * 60, [(0, True), (1, float("nan")), (2, -0.0)], 64)
@example([0.5] * 40, [(0, 2**63)], 64)
@example([0.5] * 40, [(7, -(2**63)), (39, 2**63 - 1)], 64)
@example([-0.0, 0.5] * 30, [(5, 10**400)], 1 << 20)
@given(
    st.lists(st.one_of(st.floats(allow_nan=True), _SPECIAL_FLOATS), min_size=3, max_size=200),
    st.lists(
        st.tuples(
            st.integers(0, 10**6),
            st.one_of(
                st.booleans(),
                st.integers(-(2**63), 2**63 - 1),
                st.sampled_from([2**63, -(2**63) - 1]),
                st.builds(pow, st.just(10), st.just(400)),  # beyond a double's range
            ),
        ),
        max_size=20,
    ),
    st.sampled_from([64, 1 << 20]),
)
def test_mixed_lists_mostly_of_floats_have_the_formats_bytes(floats, extras, chunk):
    """A float list with a few ints or bools is packed as doubles and has those words rewritten:
    the bytes (streamed or not) are the format's, and an int beyond 64 bits still leaves the
    list unpacked."""
    value: list = list(floats)
    for at, item in extras:
        value.insert(at % (len(value) + 1), item)
    parts: list = []
    streamed = Encoder(sink=lambda part: parts.append(bytes(part)), chunk=chunk).encode(value)
    whole = encode(value)
    assert b"".join(parts) + streamed == whole
    if any(type(x) is int and not -(2**63) <= x < 2**63 for x in value):
        assert whole[1] == LIST
    elif len({type(x) for x in value}) > 1:
        assert whole == _mixed_list_by_struct(value)
    assert same(decode(whole), value)


def test_a_table_whose_last_column_cannot_be_packed_streams_intact():
    """Rows of tuples travel by columns; when a later column cannot be packed (an int beyond
    64 bits) the rows go the generic way, and no earlier column may have reached the sink."""
    rows = [(0.5, 1.5, 2**64 if i == 999 else 1) for i in range(1000)]
    parts: list = []
    rest = Encoder(sink=parts.append, chunk=64).encode([rows])
    streamed = b"".join(bytes(part) for part in parts) + rest
    assert streamed == encode([rows])
    assert same(decode(streamed), [rows])


def test_a_list_changed_while_it_is_encoded_goes_the_generic_way():
    """The program's other thread, a signal handler or a trace hook can change its value while
    the child encodes it: the packed form is dropped and the list is encoded as it now is."""
    for change in (lambda v: v.__setitem__(0, 2.5), lambda v: v.__setitem__(0, "x"), list.clear):
        value = [1] + [0.5] * 100
        changed = []

        def local(frame, event, arg):
            if event == "line" and "words" in frame.f_locals and not changed:
                change(value)
                changed.append(True)
            return local

        def tracer(frame, event, arg):
            return local if frame.f_code.co_name == "_mixed_words" else None

        sys.settrace(tracer)
        try:
            encoded = encode(value)
        finally:
            sys.settrace(None)
        assert changed
        assert encoded[1] == LIST
        assert same(decode(encoded), value)


def test_packed_lists_stream_their_words_uncopied():
    """A long packed list reaches the sink as the words themselves, not a copy in the buffer."""
    for value in (list(range(5000)), [0.5] * 5000, [1, 3] + [0.5] * 5000):
        parts: list = []
        rest = Encoder(sink=parts.append, chunk=4096).encode(value)
        assert any(isinstance(part, memoryview) and len(part) == 8 * len(value) for part in parts)
        assert b"".join(bytes(part) for part in parts) + rest == encode(value)


def test_subclasses_of_builtins_encode_as_their_base_without_running_their_methods():
    class Liar(int):
        def __eq__(self, other):
            return True

        __hash__ = int.__hash__

        def __index__(self):
            return 99

    Point = namedtuple("Point", "x y")
    assert same(decode(encode(Liar(5))), 5)
    assert same(decode(encode(Point(1, 2))), (1, 2))
    assert same(decode(encode(OrderedDict(a=1))), {"a": 1})
    assert same(decode(encode(Counter("aab"))), {"a": 2, "b": 1})


def test_other_objects_are_opaque_and_equal_nothing():
    class AlwaysEqual:
        def __eq__(self, other):
            return True

    value = decode(encode(AlwaysEqual()))
    assert isinstance(value, Opaque) and value.type_name.endswith("AlwaysEqual")
    assert value != value and not (value == 1) and value != decode(encode(AlwaysEqual()))


def test_numpy_values_keep_their_type():
    for value in (np.float64(0.5), np.int64(3), np.bool_(True), np.float32(1.5)):
        back = decode(encode(value))
        assert type(back) is type(value) and back == value
    array = np.arange(6.0).reshape(2, 3)
    back = decode(encode(array))
    assert isinstance(back, np.ndarray) and back.dtype == array.dtype and (back == array).all()
    assert isinstance(decode(encode(np.array([object()], dtype=object))), Opaque)


def test_equal_sets_encode_identically_whatever_the_insertion_order():
    assert encode({"x", "yy", "zzz"}) == encode({"zzz", "yy", "x"})
    assert plain_encoded(encode({"a": [1, (2, "b")]})) and not plain_encoded(encode([1.0, float("nan")]))
    assert not plain_encoded(encode(np.float64(1))) and not plain_encoded(encode(object()))


def test_mixed_lists_are_plain_unless_a_float_is_nan():
    """Negative ints' words read as NaN bit patterns; only the float words may disqualify."""
    assert plain_encoded(encode([True, -44, 7, 2]))
    assert plain_encoded(encode([(2, True, -44), (7, False, -1), (True, -44, 7)]))  # columns of mixed kinds
    assert plain_encoded(encode([1, 2.5, True, -3]))
    assert not plain_encoded(encode([1, float("nan"), True, -3]))


def test_encoder_bounds():
    nested = []
    for _ in range(150):
        nested = [nested]
    with pytest.raises(Unencodable):
        encode(nested)
    loop = []
    loop.append(loop)
    with pytest.raises(Unencodable):
        encode(loop)
    with pytest.raises(Unencodable):
        Encoder(max_bytes=1000).encode("x" * 2000)


def test_streamed_encoding_is_the_same_bytes():
    value = ["x" * 5000, list(range(3000)), "y" * (3 << 20), {"k": (1, 2)}]
    parts = []
    rest = Encoder(sink=parts.append, chunk=4096).encode(value)
    assert b"".join(parts) + rest == encode(value)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x01",
        b"\x02\x00",
        b"\x01\x0a\xff\xff\xff\xff\x0f",
        b"\x01\x03\x05\x00",
        b"\x01\x0a\x02\x00",
        b"\x01\x0c\x02\x0a\x00\x0a\x00",
        b"\x01\x13\x00",
        b"\x01\x14\x05\x00",
        b"\x01\x07\x02\xff\xfe",
        b"\x01\x00\x00",
        b"\x01\x11\x07\x02<f8\x01\xff\xff\xff\xff\x0f\x08\x00",
        b"\x01\x10\x07\x03|O8\x08\x00",
        b"\x01\x16\x02zz" + b"\x00" * 16,
        b"\x01" + b"\x0a\x01" * 1000 + b"\x00",
    ],
)
def test_malformed_bytes_are_refused(data):
    with pytest.raises(MalformedValue):
        decode(data)


def test_hash_flooding_is_refused_quickly():
    colliding = [k * (2**61 - 1) for k in range(60_000)]  # all hash to 0: set() would be quadratic
    start = time.perf_counter()
    with pytest.raises(MalformedValue):
        safe_set(colliding)
    count = bytearray()
    _varuint(len(colliding), count)
    crafted = bytes([1, SET]) + bytes(count) + b"".join(encode(x)[1:] for x in colliding)
    with pytest.raises(MalformedValue):
        decode(crafted)
    assert time.perf_counter() - start < 2.0
    assert safe_set([1, 1, 2] * 10_000) == {1, 2}


def test_element_budget_bounds_the_judges_memory():
    flood = b"\x01\x0a" + bytes([0x80, 0x80, 0x80, 0x04]) + b"\x00" * (8 << 20)  # 8M Nones
    with pytest.raises(MalformedValue):
        decode(flood)
    assert len(decode(flood, None)) == 8 << 20  # trusted data may be large


def test_random_corruptions_never_escape_as_other_errors():
    rng = random.Random(7)
    seeds = [
        encode(v)
        for v in [
            [1, "a", (2.5, None)],
            {"k": [1, 2, {3}]},
            list(range(50)),
            [1, 2.5] * 10,
            "text" * 20,
            {1: {2: (3, frozenset({4}))}},
        ]
    ]
    for _ in range(3000):
        data = bytearray(rng.choice(seeds))
        for _ in range(rng.randint(1, 4)):
            op = rng.random()
            position = rng.randrange(len(data))
            if op < 0.5:
                data[position] = rng.randrange(256)
            elif op < 0.75:
                del data[position]
            else:
                data.insert(position, rng.randrange(256))
        try:
            decode(bytes(data))
        except MalformedValue:
            pass


def test_is_floats_from_the_bytes():
    assert (
        shallow_is_floats(encode(1.5))
        and shallow_is_floats(encode([1.0, 2.0]))
        and shallow_is_floats(encode([0.5] * 20))
    )
    assert (
        not shallow_is_floats(encode([1.0, 2]))
        and not shallow_is_floats(encode([]))
        and not shallow_is_floats(encode(3))
    )
    assert not shallow_is_floats(encode([[1.0]])) and not shallow_is_floats(encode([1, 2.5] * 10))
    assert shallow_is_floats(encode(np.float64(1))) is None


def test_decoder_instances_and_handles_only_where_asked():
    class Pair:
        def __init__(self, a, b):
            self.a, self.b = a, b

    data = Encoder(instances=True).encode([Pair(1, 2)])
    with pytest.raises(MalformedValue):
        decode(data)
    rebuilt = Decoder(instances=lambda name, attrs: (name, attrs)).decode(data)
    assert rebuilt == [("Pair", {"a": 1, "b": 2})]
    handles = {}
    data = Encoder(handles=handles).encode(object())
    with pytest.raises(MalformedValue):
        decode(data)
    assert Decoder(handles=lambda number, name: (number, name)).decode(data) == (1, "object")


# ---- what PID 1 tells the judge about each call --------------------------------------------------
@given(
    st.sampled_from(["ok", "raised", "bad_value", "tle", "skipped"]),
    st.sampled_from(["", "ValueError: x"]),
    st.sampled_from([b"", b"warning\n"]),
    st.sampled_from([None, 0, 1]),
    st.sampled_from([None, 9]),
    st.sampled_from([0, 2048]),
    st.sampled_from([[], ["cpu time limit"]]),
    st.floats(0, 5000),
    st.floats(0, 5000),
    st.integers(0, 1 << 20),
)
def test_a_call_answer_reaches_the_judge_as_its_full_header(
    status, error, stderr, exit_code, signal, rss, notes, cpu_ms, wall_ms, size
):
    """A plain answer travels as ``[size, cpu_ms, wall_ms]``, anything else as its header; the
    judge reads back exactly the header PID 1 holds, so no verdict can depend on which form."""
    import json

    from rlvr.sandbox.code.running.channels import Outcome, call_outcome

    outcome = Outcome(
        status=status,
        error=error,
        stderr=stderr,
        exit_code=exit_code,
        signal=signal,
        max_rss_kb=rss,
        notes=list(notes),
        cpu_ms=cpu_ms,
        wall_ms=wall_ms,
    )
    sent = json.loads(json.dumps(outcome.call_answer(size)))  # as the frame carries it
    assert call_outcome(sent) == {**outcome.header(), "size": size}
    plain = status == "ok" and not (error or stderr or notes or rss) and exit_code is None and signal is None
    assert isinstance(sent, list) == plain


def _answer_frames():
    u32 = lambda n: n.to_bytes(4, "big")  # noqa: E731
    value = st.binary(min_size=1, max_size=80).map(lambda p: b"SRV" + u32(len(p)) + p + u32(0))
    chunked = st.binary(min_size=2, max_size=40).map(
        lambda p: b"SRV" + u32(len(p) // 2) + p[: len(p) // 2] + u32(len(p) - len(p) // 2) + p[len(p) // 2 :] + u32(0)
    )
    raised = st.text(max_size=20).map(lambda t: b"SRE" + u32(len(t.encode())) + t.encode())
    empty = st.just(b"SRV" + u32(0))
    return st.lists(st.one_of(value, chunked, raised, empty), min_size=1, max_size=6)


@settings(max_examples=300, deadline=None)
@given(_answer_frames(), st.binary(max_size=12))
def test_answers_read_whole_or_byte_by_byte_are_the_same(answers, tail):
    """PID 1 reads an answer that is there whole in its common form at once, anything else
    through a ``CallReader`` byte by byte: the same bytes give the same outcomes either way,
    including what breaks the protocol or the cap (64 bytes here)."""
    from rlvr.sandbox.code.running.channels import BatchReader

    data = b"".join(answers) + tail

    def read(chunks):
        batch = BatchReader(lambda: 0.0, 64, [(1.0, 2.0)] * (len(answers) + 1))
        for chunk in chunks:
            if batch.feed(chunk, time.monotonic(), batch.sandbox_cpu):
                break
        return [(o.status, o.result, o.error) for o in batch.outcomes], batch.failed

    assert read([data]) == read([data[i : i + 1] for i in range(len(data))])
