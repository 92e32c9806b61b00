"""Typed, bounded, binary encoding of Python values: how functional results and arguments cross
the sandbox boundary.

JSON loses types (a tuple becomes a list, ``1`` and ``True`` blur, integers past 4300 digits
cost seconds as text), and pickle runs code on load. This format keeps every built-in type a
benchmark compares (``None``, ``bool``, ``int`` of any size, ``float``, ``complex``, ``str``,
``bytes``, ``bytearray``, ``list``, ``tuple``, ``set``, ``frozenset``, ``dict``, numpy scalars
and arrays of plain dtypes) and nothing else: any other object travels as an opaque marker that
carries only its type name, so no method a program defines ever runs in the trusted judge.

Encoding (this module) runs in the sandboxed child (stdlib only; numpy only if the program
already imported it) and, for arguments and expected values, in the caller. Decoding
(``rlvr.sandbox.code.judging.decoding``) runs in the judge and trusts nothing. Integers are two's-complement
bytes, never decimal text.

Subclasses of built-in types are encoded as their base type, read through the base type's own
slots (``int.__index__``, ``list.__iter__``, ...), so an overridden ``__eq__`` or ``__iter__``
has no say.
"""

from __future__ import annotations

import struct
import sys
from array import array
from typing import Any

VERSION = 1
MAX_DEPTH = 100
MAX_HASH_BUCKET = 64
OPAQUE_NAME_CHARS = 200

NONE, FALSE, TRUE, INT, FLOAT, NAN, COMPLEX, STR, BYTES, BYTEARRAY = range(10)
LIST, TUPLE, SET, FROZENSET, DICT, OPAQUE, NP_SCALAR, NP_ARRAY, HANDLE, INSTANCE = range(10, 20)
#: Packed lists: every element an exact ``int`` within 64 bits, every element a ``float``, or a
#: mix of ``int``/``float``/``bool`` (a type byte per element, then the words).
INT64_LIST, FLOAT_LIST, MIXED_LIST = 20, 21, 22
#: A long list of exact ``str`` (byte lengths, then the UTF-8 text), and a long list of tuples (or
#: of lists) of one length whose every column packs (the columns, each a packed list): both built
#: and read by C loops, for results like a million combinations or a matrix.
STR_LIST, TUPLE_TABLE = 23, 24
_MIXED_CODE = {int: ord("q"), float: ord("d"), bool: ord("?")}
#: Every byte value except the tags of values that are not equal to themselves by their bytes
#: (NaN, complex, opaque, numpy, handles, instances, lists of raw floats).
PLAIN_BYTES = bytes(b for b in range(256) if b not in (5, 6, 15, 16, 17, 18, 19, 21, 22, 23, 24))
MIXED_FORMAT = bytes.maketrans(b"?", b"q")
#: A mixed list with at most one int or bool in this many elements is packed as doubles first.
FEW_INTS = 16

#: numpy dtype kinds that travel as raw bytes (bool, ints, floats, complex, bytes, unicode).
NUMPY_KINDS = "biufcSU"

F64 = struct.Struct(">d")
C128 = struct.Struct(">dd")
#: ``Py_TPFLAGS_HEAPTYPE``: set on every class a program defines, clear on built-in and numpy's
#: own (static) types.
HEAP_TYPE = 1 << 9
_TYPE_FLAGS = type.__dict__["__flags__"].__get__
_TYPE_MODULE = type.__dict__["__module__"].__get__
_TYPE_QUALNAME = type.__dict__["__qualname__"].__get__
_TYPE_NAME = type.__dict__["__name__"].__get__


class MalformedValue(ValueError):
    """The bytes are not a value this format can produce, or exceed a bound."""


class Unencodable(ValueError):
    """A value too deep or too large to encode (the child reports it as the program's failure)."""


class Opaque:
    """Stands for an object of a type the format does not carry. Equal to nothing, itself
    included, so a program cannot pass a comparison with an object of its own making."""

    __slots__ = ("type_name",)

    def __init__(self, type_name: str):
        self.type_name = type_name

    def __eq__(self, other: object) -> bool:
        return False

    def __ne__(self, other: object) -> bool:
        return True

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return f"<{self.type_name} object>"


def type_text(t: type, qualified: bool = True) -> str:
    """A type's name read through ``type``'s own descriptors, never the class's: a metaclass
    property named ``__module__`` or ``__qualname__`` is program code, and encoding a result
    must not run any (it would run after the call's clock stopped)."""
    try:
        module, name = _TYPE_MODULE(t), (_TYPE_QUALNAME if qualified else _TYPE_NAME)(t)
    except Exception:
        return "?"
    if type(name) is not str:
        return "?"
    if not qualified or type(module) is not str or module in ("builtins", "__main__", "__solution__"):
        return name
    return f"{module}.{name}"


def builtin_type(t: type) -> bool:
    """A static type (built-in or numpy's), not a class some program defined."""
    return not _TYPE_FLAGS(t) & HEAP_TYPE


def _varuint(n: int, out: bytearray) -> None:
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _mixed_words(v: list) -> tuple[bytes, memoryview] | None:
    """A list of int, float and bool as ``MIXED_LIST``'s type codes and little-endian words
    (None when an int does not fit 64 bits, or when the list changed while it was read: another
    thread of the program, a hook). A float sequence with a few ints (``[1, 3, 2.0, 8.0, ...]``)
    packs as doubles in one C pass and has its few ints rewritten in place; other mixes take one
    ``struct`` code per element, several times slower on a long list. Both give the same bytes."""
    try:
        codes = bytes(map(_MIXED_CODE.__getitem__, map(type, v)))
        if len(codes) - codes.count(b"d") > len(codes) // FEW_INTS:
            return codes, memoryview(struct.pack("<" + codes.translate(MIXED_FORMAT).decode(), *v))
        doubles = array("d", v)
        if len(doubles) != len(codes):
            return None
        raw = memoryview(doubles).cast("B")
        words = raw.cast("q")
        for code in b"q?":
            at = codes.find(code)
            while at >= 0:
                item = v[at]
                if type(item) is not (bool if code == ord("?") else int) or not -(1 << 63) <= item < 1 << 63:
                    return None
                words[at] = int(item)
                at = codes.find(code, at + 1)
    except (struct.error, OverflowError, KeyError, TypeError, IndexError):
        return None  # beyond 64 bits (or a double's range), or the list changed meanwhile
    return codes, raw


# ---------------------------------------------------------------------------------------------
# Encoding (runs in the sandboxed child and, for arguments and expected values, in the caller)
# ---------------------------------------------------------------------------------------------
class Encoder:
    """``encode(value) -> bytes``. ``instances``: encode objects of user classes by their
    attribute dict (arguments built by trusted test code, e.g. MBPP's ``Pair``); ``handles``: a
    dict that receives non-plain objects, which then travel as handle numbers (the tester's
    remote objects)."""

    def __init__(
        self,
        max_bytes: int = 64 << 20,
        instances: bool = False,
        handles: dict[int, Any] | None = None,
        sink: Any = None,
        chunk: int = 1 << 20,
    ):
        self.max_bytes = max_bytes
        self.instances = instances
        self.handles = handles
        self.sink, self.chunk = sink, chunk
        self.root: bytearray | None = None
        self.flushed = 0

    def encode(self, value: Any) -> bytes:
        """The encoding; with a ``sink``, bytes are handed to it in chunks as they are produced
        (and what remains is returned), so a large value streams instead of piling up."""
        out = self.root = bytearray([VERSION])
        self.flushed = 0
        self._put(value, out, 0)
        return bytes(out)

    def _room(self, out: bytearray, extra: int = 0) -> None:
        if len(out) + self.flushed + extra > self.max_bytes:
            raise Unencodable(f"value larger than {self.max_bytes} bytes")
        if self.sink is not None and out is self.root and len(out) >= self.chunk:
            self.sink(bytes(out))
            self.flushed += len(out)
            out.clear()

    def _put(self, v: Any, out: bytearray, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise Unencodable(f"value nested deeper than {MAX_DEPTH} levels")
        t = type(v)
        if v is None:
            out.append(NONE)
        elif t is bool:
            out.append(TRUE if v else FALSE)
        elif t is int:
            self._int(v, out)
        elif t is float:
            self._float(v, out)
        elif t is str:
            self._blob(STR, v.encode("utf-8", "surrogatepass"), out)
        elif t is list and len(v) > 2 and self._packed(v, out):
            pass
        elif t is list or t is tuple:
            out.append(LIST if t is list else TUPLE)
            _varuint(len(v), out)
            for item in v:
                self._put(item, out, depth + 1)
                self._room(out)
        elif t is dict:
            self._dict(dict.items(v), len(v), out, depth)
        elif t is set or t is frozenset:
            self._set(SET if t is set else FROZENSET, v, out, depth)
        elif t is bytes:
            self._blob(BYTES, v, out)
        elif t is bytearray:
            self._blob(BYTEARRAY, bytes(v), out)
        elif t is complex:
            out.append(COMPLEX)
            out += C128.pack(v.real, v.imag)
        else:
            self._other(v, t, out, depth)

    def _packed(self, v: list, out: bytearray) -> bool:
        """Long lists as raw machine words or text (C speed both ways): numbers of one type, or a
        mix of int, float and bool with a type byte per element; strings; equal-arity tuples by
        columns. All or nothing: the parts go out only once every one of them is made."""
        parts = self._pack(v)
        if parts is None:
            return False
        self._room(out, sum(map(len, parts)))
        for part in parts:
            self._raw(part, out)
        return True

    def _pack(self, v: list, columns: bool = True) -> list[bytes | bytearray | memoryview] | None:
        """The packed form's parts (a header, then raw bytes; a table's columns in turn), or None.
        The set of element types hashes them: a metaclass's ``__hash__`` and ``__eq__`` run there
        and can pass a class off as ``int`` or ``tuple``, whose own ``__index__`` or ``__len__``
        then give the words. That is the program's code making the program's own value, on the
        call's clock, as returning those numbers would (checking every type by identity would
        double the cost of a long list)."""
        if sys.byteorder != "little":
            return None
        kinds = set(map(type, v))
        try:
            if kinds == {str}:
                texts = [str.encode(x, "utf-8", "surrogatepass") for x in v]
                head = bytearray([STR_LIST])
                _varuint(len(texts), head)
                head += array("I", map(len, texts)).tobytes()
                return [head, b"".join(texts)]
            if (kinds == {tuple} or kinds == {list}) and columns:
                arities = set(map(len, v))
                if len(arities) != 1 or not 0 < next(iter(arities)) <= 255:
                    return None
                head = bytearray([TUPLE_TABLE])
                _varuint(len(v), head)
                head.append(next(iter(arities)))
                head.append(kinds == {list})
                parts: list[bytes | bytearray | memoryview] = [head]
                for column in zip(*v):
                    packed = self._pack(list(column), columns=False)
                    if packed is None:
                        return None
                    parts += packed
                return parts
            if kinds == {int}:
                raw, tag, types = memoryview(array("q", v)).cast("B"), INT64_LIST, b""
            elif kinds == {float}:
                raw, tag, types = memoryview(array("d", v)).cast("B"), FLOAT_LIST, b""
            elif kinds <= {int, float, bool}:
                mixed = _mixed_words(v)
                if mixed is None:
                    return None
                (types, raw), tag = mixed, MIXED_LIST
            else:
                return None
        except (OverflowError, TypeError):  # beyond 64 bits, or changed while read
            return None
        head = bytearray([tag])
        _varuint(len(raw) // 8, head)
        head += types
        return [head, raw]

    def _int(self, v: int, out: bytearray) -> None:
        size = (v + (v < 0)).bit_length() // 8 + 1
        self._room(out, size)
        out.append(INT)
        _varuint(size, out)
        out += v.to_bytes(size, "little", signed=True)

    def _float(self, v: float, out: bytearray) -> None:
        if v != v:
            out.append(NAN)
        else:
            out.append(FLOAT)
            out += F64.pack(v)

    def _blob(self, tag: int, data: bytes, out: bytearray) -> None:
        self._room(out, len(data))
        out.append(tag)
        _varuint(len(data), out)
        self._raw(data, out)

    def _raw(self, data: bytes | memoryview, out: bytearray) -> None:
        """Bytes that follow their header as they are (``len`` counts bytes)."""
        if self.sink is not None and out is self.root and len(data) >= self.chunk:
            self.sink(bytes(out))  # a large string or bytes goes out as it is, uncopied
            self.sink(data)
            self.flushed += len(out) + len(data)
            out.clear()
        else:
            out += data

    def _dict(self, items: Any, count: int, out: bytearray, depth: int) -> None:
        out.append(DICT)
        _varuint(count, out)
        for key, value in items:
            self._put(key, out, depth + 1)
            self._put(value, out, depth + 1)
            self._room(out)

    def _set(self, tag: int, items: Any, out: bytearray, depth: int) -> None:
        """Elements in the order of their encodings, so equal sets encode to equal bytes
        whatever the process's hash seed."""
        parts = []
        for item in set.__iter__(items) if issubclass(type(items), set) else frozenset.__iter__(items):
            part = bytearray()
            self._put(item, part, depth + 1)
            parts.append(bytes(part))
            self._room(out, sum(map(len, parts)))
        out.append(tag)
        _varuint(len(parts), out)
        for part in sorted(parts):
            out += part

    def _other(self, v: Any, t: type, out: bytearray, depth: int) -> None:
        """Subclasses of built-ins as their base; numpy values; user objects as opaque markers,
        instances or handles. numpy first: ``numpy.float64`` subclasses ``float`` but EvalPlus
        tells them apart. Types are tested with ``issubclass`` on ``type(v)``: ``isinstance``
        would read a ``__class__`` property the program defined."""
        if self._numpy(v, t, out):
            return
        if issubclass(t, int):
            self._int(int.__index__(v), out)
        elif issubclass(t, float):
            self._float(float.__float__(v), out)
        elif issubclass(t, str):
            self._blob(STR, str.__str__(v).encode("utf-8", "surrogatepass"), out)
        elif issubclass(t, (list, tuple)):
            base = list if issubclass(t, list) else tuple
            self._put(base(base.__iter__(v)), out, depth)
        elif issubclass(t, dict):
            self._dict(list(dict.items(v)), dict.__len__(v), out, depth)
        elif issubclass(t, (set, frozenset)):
            self._set(SET if issubclass(t, set) else FROZENSET, v, out, depth)
        elif issubclass(t, (bytes, bytearray)):
            self._blob(BYTES if issubclass(t, bytes) else BYTEARRAY, memoryview(v).tobytes(), out)
        elif issubclass(t, complex):
            out.append(COMPLEX)
            out += C128.pack(complex.real.__get__(v), complex.imag.__get__(v))
        else:
            name = type_text(t)
            if self.instances and hasattr(v, "__dict__") and _TYPE_MODULE(t) != "builtins":
                out.append(INSTANCE)
                self._blob(STR, type_text(t, qualified=False).encode("utf-8", "surrogatepass"), out)
                self._dict(
                    list(object.__getattribute__(v, "__dict__").items()),
                    len(object.__getattribute__(v, "__dict__")),
                    out,
                    depth,
                )
            elif self.handles is not None:
                number = len(self.handles) + 1
                self.handles[number] = v
                out.append(HANDLE)
                _varuint(number, out)
                self._blob(STR, name[:OPAQUE_NAME_CHARS].encode("utf-8", "surrogatepass"), out)
            else:
                self._blob(OPAQUE, name[:OPAQUE_NAME_CHARS].encode("utf-8", "surrogatepass"), out)

    def _numpy(self, v: Any, t: type, out: bytearray) -> bool:
        """numpy arrays (subclasses read as plain arrays through ``ndarray``'s own view) and
        numpy's own scalar types; a scalar subclass a program defined is read as its built-in
        base instead, since its ``dtype`` could be a property of the program's."""
        np = sys.modules.get("numpy")
        if np is None or not type_text(t).startswith("numpy"):
            return False
        if issubclass(t, np.ndarray):
            array = v if t is np.ndarray else np.ndarray.view(v, np.ndarray)
            if array.dtype.kind not in NUMPY_KINDS or array.dtype.hasobject:
                return False
            raw = np.ascontiguousarray(array).tobytes()
            self._room(out, len(raw))
            out.append(NP_ARRAY)
            self._blob(STR, array.dtype.str.encode(), out)
            _varuint(array.ndim, out)
            for dim in array.shape:
                _varuint(dim, out)
            self._blob(BYTES, raw, out)
            return True
        if builtin_type(t) and issubclass(t, np.generic) and v.dtype.kind in NUMPY_KINDS:
            out.append(NP_SCALAR)
            self._blob(STR, v.dtype.str.encode(), out)
            self._blob(BYTES, v.tobytes(), out)
            return True
        return False


def encode(value: Any, max_bytes: int = 64 << 20) -> bytes:
    """Encode a plain value (the form used for arguments and expected values)."""
    return Encoder(max_bytes).encode(value)
