"""Decoding the typed value encoding of ``rlvr.sandbox.code.running.values``: bytes from an untrusted process.

The judge trusts nothing it reads: every length is checked against the bytes that are there,
nesting and element counts are bounded, sets and dict keys are built only when no more than
``MAX_HASH_BUCKET`` distinct values share a hash (a crafted flood of colliding integers would
otherwise make construction quadratic), and any inconsistency raises ``MalformedValue``.
Questions answered from the bytes without building the value live in ``encoded_facts``.
"""

from __future__ import annotations

import re
import struct
import sys
from array import array
from collections import Counter
from itertools import accumulate
from typing import Any

from rlvr.sandbox.code.running.values import (
    BYTEARRAY,
    BYTES,
    C128,
    COMPLEX,
    DICT,
    F64,
    FLOAT,
    FLOAT_LIST,
    FROZENSET,
    HANDLE,
    INSTANCE,
    INT,
    INT64_LIST,
    LIST,
    MAX_DEPTH,
    MAX_HASH_BUCKET,
    MIXED_FORMAT,
    MIXED_LIST,
    NAN,
    NP_ARRAY,
    NP_SCALAR,
    NUMPY_KINDS,
    OPAQUE,
    OPAQUE_NAME_CHARS,
    SET,
    STR,
    STR_LIST,
    TRUE,
    TUPLE,
    TUPLE_TABLE,
    VERSION,
    MalformedValue,
    Opaque,
)

#: Container slots an untrusted value may have (bounds the judge's memory); a comparison allows
#: more when the expected value itself is larger.
MAX_ITEMS = 4_000_000
#: The dtype strings ``numpy.dtype.str`` gives for the kinds carried: byte order, kind, item
#: size. Checked before numpy parses anything (a structured dtype description can hold a
#: million fields and cost the judge seconds and hundreds of MB).
_DTYPE_RE = re.compile(r"[<>|=][biufcSU][0-9]{1,6}")


def safe_set(values: Any, frozen: bool = False) -> set | frozenset:
    """``set(values)``, refused (``MalformedValue``) when more than ``MAX_HASH_BUCKET`` distinct
    values share one hash, which would make building the set quadratic. ``TypeError`` for
    unhashable values, as ``set()`` raises."""
    values = list(values)
    if len(values) <= MAX_HASH_BUCKET:  # no bucket can hold more than there are values
        return frozenset(values) if frozen else set(values)
    hashes = list(map(hash, values))
    if max(Counter(hashes).values()) <= MAX_HASH_BUCKET:
        return frozenset(values) if frozen else set(values)
    buckets: dict[int, list[Any]] = {}
    for value, key in zip(values, hashes):
        bucket = buckets.setdefault(key, [])
        if not any(value is other or value == other for other in bucket):
            if len(bucket) >= MAX_HASH_BUCKET:
                raise MalformedValue(f"more than {MAX_HASH_BUCKET} distinct values share one hash")
            bucket.append(value)
    return frozenset(values) if frozen else set(values)


def safe_dict(pairs: list[tuple[Any, Any]]) -> dict:
    safe_set([key for key, _ in pairs])
    return dict(pairs)


class Decoder:
    """``decode(data) -> value``. ``max_items``: bound on container slots (bounds the judge's
    memory); ``instances``: a callable ``(type name, attrs) -> object`` for INSTANCE values
    (only the call child accepts them, from the trusted side); ``handles``: a callable
    ``(number, type name) -> object`` for HANDLE values (only the tester accepts them)."""

    def __init__(self, max_items: int = MAX_ITEMS, instances: Any = None, handles: Any = None):
        self.max_items = max_items
        self.instances = instances
        self.handles = handles
        self.items = 0
        self.size = 0
        #: numpy arrays in the last value decoded (their comparisons need a shape check)
        self.arrays = 0

    def decode(self, data: bytes) -> Any:
        data = bytes(data)
        if len(data) < 2 or data[0] != VERSION:
            raise MalformedValue("not an encoded value")
        self.items, self.size, self.arrays = 0, len(data), 0
        try:
            value, end = self._get(data, 1, 0)
        except MalformedValue:
            raise
        except IndexError as exc:
            raise MalformedValue("truncated value") from exc
        except RecursionError as exc:
            raise MalformedValue("nested too deeply") from exc
        except MemoryError:
            raise  # the judge's own budget, not the bytes: never the program's verdict
        except Exception as exc:  # whatever else the bytes provoke is still the bytes' fault
            raise MalformedValue(f"unreadable value ({type(exc).__name__})") from exc
        if end != len(data):
            raise MalformedValue("trailing bytes after the value")
        return value

    @staticmethod
    def _varuint(data: bytes, pos: int) -> tuple[int, int]:
        shift = result = 0
        while True:
            byte = data[pos]
            pos += 1
            result |= (byte & 0x7F) << shift
            if byte < 0x80:
                return result, pos
            shift += 7
            if shift > 63:
                raise MalformedValue("bad length")

    def _span(self, data: bytes, pos: int) -> tuple[int, int]:
        size = data[pos]
        if size < 0x80:
            pos += 1
        else:
            size, pos = self._varuint(data, pos)
        end = pos + size
        if end > self.size:
            raise MalformedValue("truncated value")
        return pos, end

    def _count(self, data: bytes, pos: int, per_item: int = 1) -> tuple[int, int]:
        count, pos = self._span_count(data, pos)
        if count * per_item > self.size - pos:
            raise MalformedValue("count larger than the data")
        self.items += count
        if self.items > self.max_items:
            raise MalformedValue(f"more than {self.max_items} elements")
        return count, pos

    def _span_count(self, data: bytes, pos: int) -> tuple[int, int]:
        count = data[pos]
        if count < 0x80:
            return count, pos + 1
        return self._varuint(data, pos)

    def _text(self, data: bytes, pos: int) -> tuple[str, int]:
        if data[pos] != STR:
            raise MalformedValue("expected a string")
        start, end = self._span(data, pos + 1)
        try:
            return data[start:end].decode("utf-8", "surrogatepass"), end
        except UnicodeDecodeError as exc:
            raise MalformedValue("bad text") from exc

    def _get(self, data: bytes, pos: int, depth: int) -> tuple[Any, int]:
        tag = data[pos]
        pos += 1
        if tag == STR:
            start, end = self._span(data, pos)
            try:
                return data[start:end].decode("utf-8", "surrogatepass"), end
            except UnicodeDecodeError as exc:
                raise MalformedValue("bad text") from exc
        if tag == INT:
            start, end = self._span(data, pos)
            if start == end:
                raise MalformedValue("empty integer")
            return int.from_bytes(data[start:end], "little", signed=True), end
        if tag <= TRUE:
            return (None, False, True)[tag], pos
        if tag == FLOAT:
            if pos + 8 > self.size:
                raise MalformedValue("truncated float")
            return F64.unpack_from(data, pos)[0], pos + 8
        if tag == LIST or tag == TUPLE or tag == SET or tag == FROZENSET:
            if depth >= MAX_DEPTH:
                raise MalformedValue(f"nested deeper than {MAX_DEPTH} levels")
            count, pos = self._count(data, pos)
            items = [None] * count
            get = self._get
            for index in range(count):
                items[index], pos = get(data, pos, depth + 1)
            if tag == LIST:
                return items, pos
            if tag == TUPLE:
                return tuple(items), pos
            return self._hashed(lambda: safe_set(items, tag == FROZENSET)), pos
        if tag == DICT:
            if depth >= MAX_DEPTH:
                raise MalformedValue(f"nested deeper than {MAX_DEPTH} levels")
            count, pos = self._count(data, pos, 2)
            if not count:  # the keyword arguments of almost every call
                return {}, pos
            pairs = []
            for _ in range(count):
                key, pos = self._get(data, pos, depth + 1)
                value, pos = self._get(data, pos, depth + 1)
                pairs.append((key, value))
            return self._hashed(lambda: safe_dict(pairs)), pos
        if tag == STR_LIST:
            count, pos = self._count(data, pos, 4)
            lengths = array("I")
            lengths.frombytes(data[pos : pos + 4 * count])
            if sys.byteorder != "little":
                lengths.byteswap()
            pos += 4 * count
            end = pos + sum(lengths)
            if end > self.size:
                raise MalformedValue("truncated text list")
            text = data[pos:end]
            starts = list(accumulate(lengths, initial=0))
            try:
                return [text[a:b].decode("utf-8", "surrogatepass") for a, b in zip(starts, starts[1:])], end
            except UnicodeDecodeError as exc:
                raise MalformedValue("bad text") from exc
        if tag == TUPLE_TABLE:
            count, pos = self._count(data, pos, 0)
            arity, rows_are_lists = data[pos], data[pos + 1]
            if rows_are_lists > 1:
                raise MalformedValue("bad table row kind")
            pos += 2
            columns = []
            for _ in range(arity):
                if data[pos] not in (INT64_LIST, FLOAT_LIST, MIXED_LIST, STR_LIST):
                    raise MalformedValue("bad table column")
                column, pos = self._get(data, pos, depth + 1)
                if len(column) != count:
                    raise MalformedValue("table column of the wrong length")
                columns.append(column)
            if arity == 0 or not count:
                raise MalformedValue("empty table")
            return (list(map(list, zip(*columns))) if rows_are_lists else list(zip(*columns))), pos
        if tag == MIXED_LIST:
            count, pos = self._count(data, pos, 9)
            types = data[pos : pos + count]
            if types.strip(b"qd?"):
                raise MalformedValue("bad element types")
            pos += count
            values = list(struct.unpack_from("<" + types.translate(MIXED_FORMAT).decode(), data, pos))
            for index in [i for i, code in enumerate(types) if code == 63]:
                if values[index] not in (0, 1):
                    raise MalformedValue("bad boolean")
                values[index] = bool(values[index])
            return values, pos + 8 * count
        if tag == INT64_LIST or tag == FLOAT_LIST:
            count, pos = self._count(data, pos, 8)
            words = array("q" if tag == INT64_LIST else "d")
            words.frombytes(data[pos : pos + 8 * count])
            if sys.byteorder != "little":
                words.byteswap()
            return words.tolist(), pos + 8 * count
        if tag == NAN:
            return float("nan"), pos
        if tag == COMPLEX:
            if pos + 16 > self.size:
                raise MalformedValue("truncated complex")
            return complex(*C128.unpack_from(data, pos)), pos + 16
        if tag == BYTES or tag == BYTEARRAY:
            start, end = self._span(data, pos)
            return (data[start:end] if tag == BYTES else bytearray(data[start:end])), end
        if tag == OPAQUE:
            start, end = self._span(data, pos)
            return Opaque(data[start:end][:OPAQUE_NAME_CHARS].decode("utf-8", "replace")), end
        if tag == NP_SCALAR or tag == NP_ARRAY:
            return self._numpy(data, pos, tag)
        if tag == HANDLE and self.handles is not None:
            number, pos = self._varuint(data, pos)
            name, pos = self._text(data, pos)
            return self.handles(number, name), pos
        if tag == INSTANCE and self.instances is not None:
            name, pos = self._text(data, pos)
            attrs, pos = self._get(data, pos, depth + 1)
            if not isinstance(attrs, dict):
                raise MalformedValue("instance attributes must be a dict")
            return self.instances(name, attrs), pos
        raise MalformedValue(f"unknown tag {tag}")

    @staticmethod
    def _hashed(build: Any) -> Any:
        try:
            return build()
        except TypeError as exc:
            raise MalformedValue(f"unhashable member: {exc}") from exc

    def _numpy(self, data: bytes, pos: int, tag: int) -> tuple[Any, int]:
        import numpy as np

        dtype_str, pos = self._text(data, pos)
        if not _DTYPE_RE.fullmatch(dtype_str):
            raise MalformedValue(f"dtype {dtype_str[:20]!r} is not carried")
        try:
            dtype = np.dtype(dtype_str)
        except (TypeError, ValueError) as exc:
            raise MalformedValue(f"bad dtype {dtype_str[:20]!r}") from exc
        if dtype.kind not in NUMPY_KINDS or dtype.hasobject or dtype.fields is not None or dtype.subdtype is not None:
            raise MalformedValue(f"dtype {dtype_str[:20]!r} is not carried")
        shape: list[int] = []
        if tag == NP_ARRAY:
            ndim, pos = self._varuint(data, pos)
            if ndim > 32:
                raise MalformedValue("too many dimensions")
            for _ in range(ndim):
                dim, pos = self._varuint(data, pos)
                if dim > self.max_items:
                    raise MalformedValue(f"more than {self.max_items} elements")
                shape.append(dim)
        if data[pos] != BYTES:
            raise MalformedValue("expected raw bytes")
        start, end = self._span(data, pos + 1)
        if dtype.itemsize == 0:
            # numpy's empty string scalars (``np.str_('')`` is ``<U0``, yet its bytes are not
            # empty); no array has an empty item type
            if tag != NP_SCALAR or end - start > 4 or any(data[start:end]):
                raise MalformedValue(f"dtype {dtype_str[:20]!r} is not carried")
            self.items += 1
            return (np.str_("") if dtype.kind == "U" else np.bytes_(b"")), end
        count = 1
        for dim in shape:
            count *= dim
        if count * dtype.itemsize != end - start:
            raise MalformedValue("size does not match the dtype and shape")
        self.items += count
        if self.items > self.max_items:
            raise MalformedValue(f"more than {self.max_items} elements")
        flat = np.frombuffer(data[start:end], dtype=dtype)
        self.arrays += tag == NP_ARRAY
        return (flat[0] if tag == NP_SCALAR else flat.reshape(shape).copy()), end


def decode(data: bytes, max_items: int | None = MAX_ITEMS) -> Any:
    """Decode bytes from an untrusted source into plain values (``MalformedValue`` if they are not
    a value this format produces). ``max_items`` None: no bound (trusted data only)."""
    return Decoder(max_items if max_items is not None else sys.maxsize).decode(data)
