"""Facts about an encoded value read off its bytes, without building it (reference outputs can
hold millions of elements): ``plain_encoded`` (identical bytes mean equal values) and
``shallow_is_floats`` (EvalPlus's ``is_floats``)."""

from __future__ import annotations

import math
from array import array
from itertools import compress

from rlvr.sandbox.code.judging.decoding import Decoder
from rlvr.sandbox.code.running.values import (
    BYTEARRAY,
    BYTES,
    C128,
    COMPLEX,
    DICT,
    FLOAT,
    FLOAT_LIST,
    FROZENSET,
    INT,
    INT64_LIST,
    LIST,
    MIXED_LIST,
    NAN,
    NP_ARRAY,
    NP_SCALAR,
    PLAIN_BYTES,
    SET,
    STR,
    STR_LIST,
    TRUE,
    TUPLE,
    TUPLE_TABLE,
    VERSION,
)

#: Maps a MIXED_LIST kind byte to 1 where the word is a float.
_FLOAT_WORDS = bytes(int(b == ord("d")) for b in range(256))


def plain_encoded(data: bytes) -> bool:
    """Does the encoding hold only values equal to themselves by their bytes (no NaN, no numpy
    value, no opaque object or handle)? Then identical bytes mean equal values. A walk over the
    bytes that builds nothing (reference outputs can hold millions of elements)."""
    data = bytes(data)
    if len(data) < 2 or data[0] != VERSION:
        return False
    if not data.translate(None, PLAIN_BYTES):
        return True  # no byte of the encoding could be a tag that is not plain
    pos, todo = 1, 1
    varuint = Decoder._varuint
    while todo:
        todo -= 1
        tag = data[pos]
        pos += 1
        if tag <= TRUE:
            continue
        if tag in (INT, STR, BYTES, BYTEARRAY):
            size, pos = varuint(data, pos)
            pos += size
        elif tag == FLOAT:
            pos += 8
        elif tag == COMPLEX:
            real, imag = C128.unpack_from(data, pos)
            if real != real or imag != imag:
                return False
            pos += 16
        elif tag in (LIST, TUPLE, SET, FROZENSET, DICT):
            count, pos = varuint(data, pos)
            todo += 2 * count if tag == DICT else count
        elif tag == INT64_LIST:
            count, pos = varuint(data, pos)
            pos += 8 * count
        elif tag == STR_LIST:
            count, pos = varuint(data, pos)
            lengths = array("I")
            lengths.frombytes(data[pos : pos + 4 * count])
            pos += 4 * count + sum(lengths)
        elif tag == TUPLE_TABLE:
            _, pos = varuint(data, pos)
            todo += data[pos]
            pos += 2
        elif tag == MIXED_LIST:
            count, pos = varuint(data, pos)
            kinds = data[pos : pos + count]
            pos += count
            if b"d" in kinds:  # only the float words can be NaN (an int's bits may read as one)
                words = array("d")
                words.frombytes(data[pos : pos + 8 * count])
                if any(map(math.isnan, compress(words, kinds.translate(_FLOAT_WORDS)))):
                    return False
            pos += 8 * count
        elif tag == FLOAT_LIST:
            count, pos = varuint(data, pos)
            words = array("d")
            words.frombytes(data[pos : pos + 8 * count])
            if any(map(math.isnan, words)):
                return False
            pos += 8 * count
        else:
            return False
    return pos == len(data)


def shallow_is_floats(data: bytes) -> bool | None:
    """EvalPlus's ``is_floats`` read off the encoding without decoding: a float, or a non-empty
    flat list/tuple of floats. ``None`` when the answer needs a decode (numpy values)."""
    if len(data) < 2:
        return False
    tag = data[1]
    if tag in (FLOAT, NAN):
        return True
    if tag in (FLOAT_LIST, INT64_LIST, MIXED_LIST):
        if tag == MIXED_LIST:
            count, pos = Decoder._varuint(bytes(data), 2)
            return count > 0 and not bytes(data[pos : pos + count]).strip(b"d")
        return tag == FLOAT_LIST and data[2] != 0
    if tag in (NP_SCALAR, NP_ARRAY):
        return None
    if tag not in (LIST, TUPLE):
        return False
    view = bytes(data)
    count, pos = Decoder._varuint(view, 2)
    if count == 0:
        return False
    for _ in range(count):
        if pos >= len(view):
            return False
        if view[pos] == FLOAT:
            pos += 9
        elif view[pos] == NAN:
            pos += 1
        else:
            return False
    return True
