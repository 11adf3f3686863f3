"""Declarative message schemas and the encoders/decoders generated from them.

Every Kafka message is declared once (``message(...)`` with ``F(...)`` fields, in the same terms as
Kafka's JSON specs: type, versions, nullable versions, tag / tagged versions, default) covering all
its versions. At import time each message becomes a plain Python class (``__slots__``, keyword
constructor with Kafka's defaults) plus, per version, one generated encoder and one generated
decoder. Generation happens once; the hot path is straight-line Python with consecutive
fixed-size fields packed by a single precompiled ``struct``.

Wire rules (https://kafka.apache.org/protocol, KIP-482):
- non-flexible versions: STRING/BYTES/ARRAY with int16/int32/int32 lengths, -1 for null;
- flexible versions: COMPACT_* with unsigned-varint length+1 (0 = null), and a tagged-field block
  (count, then tag/size/bytes in ascending tag order) after every struct; unknown tags are skipped;
- ``records`` are nullable bytes handed out as a zero-copy ``memoryview`` into the frame;
- ``uuid`` is 16 raw bytes (``bytes``); the all-zero uuid is the default.

``encode(version)`` returns a list of bytes-like pieces (callers ``writelines`` them or join),
``decode(buf, version)`` takes any buffer and returns ``(message, end_position)``.
"""
from __future__ import annotations

import re
import struct
from typing import Any, Callable, ClassVar, Sequence

from .primitives import DecodeError, read_uvarint, write_uvarint

INF = 1 << 30

_FIXED = {"int8": "b", "int16": "h", "int32": "i", "int64": "q", "uint16": "H", "uint32": "I",
          "float64": "d", "bool": "?", "uuid": "16s"}
_VARIABLE = {"string", "bytes", "records"}
ZERO_UUID = bytes(16)


def snake(name: str) -> str:
    """Kafka's CamelCase field name as a Python attribute: ThrottleTimeMs -> throttle_time_ms."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


def parse_versions(spec: str | None) -> tuple[int, int]:
    """'3+' -> (3, INF); '0-2' -> (0, 2); '5' -> (5, 5); 'none' / None -> empty range."""
    if spec is None or spec == "none":
        return (1, 0)
    if spec.endswith("+"):
        return (int(spec[:-1]), INF)
    if "-" in spec:
        lo, hi = spec.split("-")
        return (int(lo), int(hi))
    return (int(spec), int(spec))


def _in(rng: tuple[int, int], v: int) -> bool:
    return rng[0] <= v <= rng[1]


class Field:
    """One field of a struct, in Kafka's JSON-spec terms (names are snake_case here)."""

    __slots__ = ("name", "type", "versions", "nullable", "tag", "tagged", "default", "fields",
                 "flexible", "struct")

    def __init__(self, name, type_, versions, nullable=None, tag=None, tagged=None, default=None,
                 fields=None, flexible=None):
        self.name = name
        self.type = type_
        self.versions = parse_versions(versions)
        self.nullable = parse_versions(nullable)
        self.tag = tag
        self.tagged = parse_versions(tagged)
        self.default = default
        self.fields = fields
        self.flexible = flexible  # field-level override: "none" (RequestHeader.ClientId)
        self.struct: Any = None  # generated class for struct-typed fields

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element(self) -> str:
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        e = self.element
        return e not in _FIXED and e not in _VARIABLE

    def default_value(self):
        """Kafka's default: 0 / false / "" / b"" / zero uuid / null records / empty array,
        or the field's own default (``"null"`` meaning None)."""
        d = self.default
        if d is not None:
            if d == "null":
                return None
            return d
        if self.is_array:
            return []
        t = self.type
        if t == "string":
            return ""
        if t == "bytes":
            return b""
        if t == "records":
            return None
        if t == "uuid":
            return ZERO_UUID
        if t == "bool":
            return False
        if t == "float64":
            return 0.0
        if self.is_struct:
            return self.struct()
        return 0


def F(name, type_, versions="0+", *, nullable=None, tag=None, tagged=None, default=None,
      fields=None, flexible=None) -> Field:
    return Field(name, type_, versions, nullable, tag, tagged, default, fields, flexible)


_MISSING = object()
_INT16 = struct.Struct(">h")
# What a generated decoder raises on malformed input besides DecodeError (a short buffer, bad
# UTF-8, ...); callers turn these into DecodeError.
DECODE_FAILURES = (struct.error, IndexError, UnicodeDecodeError, ValueError, TypeError)


class Message:
    """Base of every generated message and struct class."""

    __slots__: tuple[str, ...] = ()
    FIELDS: tuple[Field, ...] = ()
    # set on each generated class by message(): its version range and per-version codecs
    VERSIONS: ClassVar[tuple[int, int]]
    _ENCODERS: ClassVar[dict[int, Callable]]
    _DECODERS: ClassVar[dict[int, Callable]]

    def __eq__(self, other):
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, s) == getattr(other, s) for s in self.__slots__)

    def __repr__(self):
        args = ", ".join(f"{s}={getattr(self, s)!r}" for s in self.__slots__)
        return f"{type(self).__name__}({args})"

    def encode(self, version: int, out: list | None = None) -> list:
        """The message's bytes at ``version`` as a list of pieces, appended to ``out`` if given."""
        if out is None:
            out = []
        try:
            enc = self._ENCODERS[version]
        except KeyError:
            raise ValueError(f"{type(self).__name__} has no version {version}") from None
        enc(self, out)
        return out

    def to_bytes(self, version: int) -> bytes:
        return b"".join(self.encode(version))

    @classmethod
    def decode(cls, buf, version: int, pos: int = 0):
        try:
            dec = cls._DECODERS[version]
        except KeyError:
            raise DecodeError(f"{cls.__name__} has no version {version}") from None
        try:
            return dec(buf, pos)
        except DecodeError:
            raise
        except DECODE_FAILURES as e:
            raise DecodeError(f"cannot decode {cls.__name__} v{version}: {e}") from None

    def to_versioned_bytes(self, version: int) -> bytes:
        """An int16 version followed by the message at that version (Kafka's
        MessageUtil.toVersionPrefixedBytes): the framing of the embedded consumer protocol and of
        ``__consumer_offsets`` keys and values."""
        return b"".join(self.encode(version, [_INT16.pack(version)]))

    @classmethod
    def from_versioned_bytes(cls, buf, newest_known: bool = False):
        """``(message, version)`` from int16-version-prefixed bytes. With ``newest_known`` a
        version above ours is read with our newest layout (the consumer protocol only ever
        appends fields, as Java's ConsumerProtocol relies on); otherwise it is an error."""
        view = memoryview(buf)
        if len(view) < 2:
            raise DecodeError(f"{cls.__name__}: buffer too short for its version")
        version = _INT16.unpack_from(view, 0)[0]
        if newest_known and version > cls.VERSIONS[1]:
            version = cls.VERSIONS[1]
        obj, _ = cls.decode(view, version, 2)
        return obj, version

    @classmethod
    def from_bytes(cls, buf, version: int):
        obj, end = cls.decode(memoryview(buf), version)
        if end != len(buf):
            raise DecodeError(f"{cls.__name__} v{version}: {len(buf) - end} trailing bytes")
        return obj


def _new_struct_class(name: str, fields: list[Field], base=Message):
    slots = tuple(f.name for f in fields)
    ns: dict = {"__slots__": slots, "FIELDS": tuple(fields)}
    cls = type(name, (base,), ns)
    # The keyword constructor: defaults are Kafka's; mutable ones (arrays, structs) fresh per call.
    params, body, env = [], [], {"_MISSING": _MISSING}
    for i, f in enumerate(fields):
        d = f.default_value() if not f.is_struct or f.is_array else None
        if f.is_array or f.is_struct:
            params.append(f"{f.name}=_MISSING")
            if f.is_array and d is not None:
                body.append(f"    self.{f.name} = [] if {f.name} is _MISSING else {f.name}")
            elif f.is_array:
                body.append(f"    self.{f.name} = None if {f.name} is _MISSING else {f.name}")
            elif f.default == "null":   # a nullable struct whose default is null
                body.append(f"    self.{f.name} = None if {f.name} is _MISSING else {f.name}")
            else:
                env[f"_S{i}"] = f.struct
                body.append(f"    self.{f.name} = _S{i}() if {f.name} is _MISSING else {f.name}")
        else:
            env[f"_d{i}"] = d
            params.append(f"{f.name}=_d{i}")
            body.append(f"    self.{f.name} = {f.name}")
    src = f"def __init__(self, {', '.join(params)}):\n" + ("\n".join(body) or "    pass") + "\n"
    if not params:
        src = "def __init__(self):\n    pass\n"
    exec(src, env)
    setattr(cls, "__init__", env["__init__"])    # noqa: B010 (mypy refuses assigning __init__)
    return cls


def _build_structs(name: str, fields: list[Field], common: dict, registry: dict):
    """Create classes bottom-up; nested struct classes hang off their parent by struct name."""
    for f in fields:
        if f.is_struct:
            sname = f.element
            if f.fields is None:  # a reference to a common struct
                f.struct = common[sname]
            else:
                f.struct = _build_structs(sname, f.fields, common, registry)
    cls = _new_struct_class(name, fields)
    for f in fields:
        if f.is_struct:
            setattr(cls, f.element, f.struct)
    registry[name] = cls
    return cls


# ---------------------------------------------------------------------------------------------
# Code generation. Each emitter writes lines into a list with a given indent; helper objects are
# passed through an environment dict whose keys are unique names.

class _Gen:
    def __init__(self):
        self.env = {"DecodeError": DecodeError, "_uv": read_uvarint, "_wuv": write_uvarint,
                    "_unpack_from": struct.unpack_from, "_pack": struct.pack, "_mv": memoryview,
                    "_H": struct.Struct(">h"), "_I": struct.Struct(">i"), "_S": struct.Struct,
                    "_new": object.__new__}
        self.n = 0

    def name(self, prefix: str, value) -> str:
        self.n += 1
        key = f"{prefix}{self.n}"
        self.env[key] = value
        return key

    def tmp(self, prefix="t") -> str:
        self.n += 1
        return f"{prefix}{self.n}"


_ARRAY_STRUCTS: dict[str, list] = {}


def _array_structs(code: str) -> list:
    """Precompiled structs for arrays of 0..127 fixed-size elements (the common sizes)."""
    if code not in _ARRAY_STRUCTS:
        _ARRAY_STRUCTS[code] = [struct.Struct(f">{i}{code}") for i in range(128)]
    return _ARRAY_STRUCTS[code]


def _flexible(f: Field, flex: bool) -> bool:
    return flex and f.flexible != "none"


def _emit_read_len(L, ind, var, compact, wide):
    """Read a length (or count): compact -> uvarint-1; else int16 (strings) or int32."""
    if compact:
        L.append(f"{ind}{var} = buf[pos]")
        L.append(f"{ind}if {var} < 128: pos += 1")
        L.append(f"{ind}else: {var}, pos = _uv(buf, pos)")
        L.append(f"{ind}{var} -= 1")
    elif wide:
        L.append(f"{ind}{var}, = _I.unpack_from(buf, pos); pos += 4")
    else:
        L.append(f"{ind}{var}, = _H.unpack_from(buf, pos); pos += 2")


def _emit_read_value(g, L, ind, f: Field, typ: str, target: str, v: int, flex: bool, elem=False,
                     in_tag=False):
    """Emit code reading one value of type `typ` (a primitive or a struct name) into `target`."""
    compact = _flexible(f, flex)
    nullable = _in(f.nullable, v) and not elem
    if typ in _FIXED:
        s = g.name("_s", struct.Struct(">" + _FIXED[typ]))
        L.append(f"{ind}{target}, = {s}.unpack_from(buf, pos); pos += {struct.calcsize('>' + _FIXED[typ])}")
        return
    if typ in _VARIABLE:
        n = g.tmp("n")
        _emit_read_len(L, ind, n, compact, wide=typ != "string")
        L.append(f"{ind}if {n} < 0:")
        if nullable or typ == "records":
            L.append(f"{ind}    {target} = None")
        else:
            L.append(f"{ind}    raise DecodeError('null {f.name} in a version where it is not nullable')")
        L.append(f"{ind}else:")
        L.append(f"{ind}    e = pos + {n}")
        L.append(f"{ind}    if e > len(buf): raise DecodeError('{f.name} runs past the end')")
        if typ == "string":
            L.append(f"{ind}    {target} = str(buf[pos:e], 'utf-8')")
        elif typ == "bytes":
            L.append(f"{ind}    {target} = bytes(buf[pos:e])")
        else:   # records: a view of the request buffer, never a copy (buf may be bytes or a view)
            L.append(f"{ind}    {target} = _mv(buf)[pos:e]")
        L.append(f"{ind}    pos = e")
        return
    # struct
    d = g.name("_dec", f.struct._DECODERS[v])
    if nullable:
        # A nullable struct is preceded by a marker (Kafka's generator): an int8, -1 null and 1
        # present; inside a tagged field an unsigned varint, 0 null and 1 present.
        L.append(f"{ind}if buf[pos] == 0:" if in_tag else f"{ind}if buf[pos] >= 128:   # any negative marker")
        L.append(f"{ind}    {target} = None; pos += 1")
        L.append(f"{ind}else:")
        L.append(f"{ind}    {target}, pos = {d}(buf, pos + 1)")
        return
    L.append(f"{ind}{target}, pos = {d}(buf, pos)")


def _emit_read_field(g, L, ind, f: Field, target: str, v: int, flex: bool, in_tag=False):
    if not f.is_array:
        _emit_read_value(g, L, ind, f, f.type, target, v, flex, in_tag=in_tag)
        return
    n = g.tmp("n")
    _emit_read_len(L, ind, n, _flexible(f, flex), wide=True)
    L.append(f"{ind}if {n} < 0:")
    if _in(f.nullable, v):
        L.append(f"{ind}    {target} = None")
    else:
        L.append(f"{ind}    raise DecodeError('null array {f.name} in a version where it is not nullable')")
    L.append(f"{ind}else:")
    el = f.element
    if el in _FIXED and el != "uuid":
        size = struct.calcsize(">" + _FIXED[el])
        arr = g.name("_arr", _array_structs(_FIXED[el]))
        L.append(f"{ind}    if {n} > len(buf): raise DecodeError('array {f.name} too long')")
        L.append(f"{ind}    {target} = list(({arr}[{n}] if {n} < 128 else _S('>%d{_FIXED[el]}' % {n})).unpack_from(buf, pos))")
        L.append(f"{ind}    pos += {n} * {size}")
        return
    L.append(f"{ind}    if {n} > len(buf) - pos: raise DecodeError('array {f.name} too long')")
    lst = g.tmp("a")
    item = g.tmp("x")
    L.append(f"{ind}    {lst} = []")
    L.append(f"{ind}    for _ in range({n}):")
    _emit_read_value(g, L, ind + "        ", f, el, item, v, flex, elem=True)
    L.append(f"{ind}        {lst}.append({item})")
    L.append(f"{ind}    {target} = {lst}")


def _gen_decoder(cls, v: int, flex: bool):
    g = _Gen()
    L = ["def decode(buf, pos):"]
    ind = "    "
    fields = cls.FIELDS
    targets = {}
    present = [f for f in fields if _in(f.versions, v) and not (flex and _in(f.tagged, v))]
    tagged = [f for f in fields if _in(f.versions, v) and flex and _in(f.tagged, v)]
    # Group consecutive fixed-size fields into one unpack.
    i = 0
    while i < len(present):
        f = present[i]
        if not f.is_array and f.type in _FIXED:
            run = [f]
            while i + 1 < len(present) and not present[i + 1].is_array and present[i + 1].type in _FIXED:
                i += 1
                run.append(present[i])
            fmt = ">" + "".join(_FIXED[x.type] for x in run)
            s = g.name("_s", struct.Struct(fmt))
            names = []
            for x in run:
                targets[x.name] = t = g.tmp("v")
                names.append(t)
            L.append(f"{ind}{', '.join(names)}, = {s}.unpack_from(buf, pos); pos += {struct.calcsize(fmt)}")
        else:
            targets[f.name] = t = g.tmp("v")
            _emit_read_field(g, L, ind, f, t, v, flex)
        i += 1
    if flex:
        for f in tagged:
            targets[f.name] = t = g.tmp("v")
            L.append(f"{ind}{t} = {g.name('_d', f.default_value())!s}" if not (f.is_array or f.is_struct)
                     else f"{ind}{t} = _MISSING")
        L.append(f"{ind}ntags = buf[pos]")
        L.append(f"{ind}if ntags < 128: pos += 1")
        L.append(f"{ind}else: ntags, pos = _uv(buf, pos)")
        L.append(f"{ind}for _ in range(ntags) if ntags else ():")
        L.append(f"{ind}    tag, pos = _uv(buf, pos)")
        L.append(f"{ind}    size, pos = _uv(buf, pos)")
        L.append(f"{ind}    end = pos + size")
        L.append(f"{ind}    if end > len(buf): raise DecodeError('tagged field runs past the end')")
        for f in tagged:
            L.append(f"{ind}    if tag == {f.tag}:")
            # A tagged field is always encoded in the flexible (compact) form.
            _emit_read_field(g, L, ind + "        ", f, targets[f.name], v, True, in_tag=True)
        L.append(f"{ind}    pos = end")
    g.env["_MISSING"] = _MISSING
    c = g.name("_cls", cls)
    L.append(f"{ind}o = _new({c})")
    for f in fields:
        got = targets.get(f.name)
        if got is not None and (f.is_array or f.is_struct) and f.name in {x.name for x in tagged}:
            # a tagged array/struct that was absent keeps its fresh default
            fresh = "[]" if f.is_array and f.default_value() is not None else (
                "None" if f.is_array or f.default == "null" else g.name("_S", f.struct) + "()")
            L.append(f"{ind}o.{f.name} = {fresh} if {got} is _MISSING else {got}")
        elif got is not None:
            L.append(f"{ind}o.{f.name} = {got}")
        elif f.is_array:
            L.append(f"{ind}o.{f.name} = {'[]' if f.default_value() is not None else 'None'}")
        elif f.is_struct:
            L.append(f"{ind}o.{f.name} = {g.name('_S', f.struct)}()")
        else:
            L.append(f"{ind}o.{f.name} = {g.name('_d', f.default_value())}")
    L.append(f"{ind}return o, pos")
    exec(compile("\n".join(L), f"<{cls.__name__} v{v} decode>", "exec"), g.env)
    return g.env["decode"]


def _emit_write_len(L, ind, expr, compact, wide):
    if compact:
        L.append(f"{ind}k = {expr} + 1")
        L.append(f"{ind}out.append(_B[k] if k < 128 else _wuv(k))")
    elif wide:
        L.append(f"{ind}out.append(_I.pack({expr}))")
    else:
        L.append(f"{ind}out.append(_H.pack({expr}))")


def _emit_write_value(g, L, ind, f: Field, typ: str, src: str, v: int, flex: bool, elem=False,
                      in_tag=False):
    compact = _flexible(f, flex)
    if typ in _FIXED:
        s = g.name("_s", struct.Struct(">" + _FIXED[typ]))
        L.append(f"{ind}out.append({s}.pack({src}))")
        return
    if typ in _VARIABLE:
        null = (b"\x00" if compact else (b"\xff\xff" if typ == "string" else b"\xff\xff\xff\xff"))
        L.append(f"{ind}if {src} is None:")
        if (_in(f.nullable, v) and not elem) or typ == "records":
            L.append(f"{ind}    out.append({null!r})")
        else:
            L.append(f"{ind}    raise ValueError('{f.name} is not nullable in version {v}')")
        L.append(f"{ind}else:")
        if typ == "string":
            L.append(f"{ind}    e = {src}.encode('utf-8')")
        else:
            L.append(f"{ind}    e = {src}")
        if typ == "records":
            # A record set may be a list of buffers (batches read from several places of a
            # segment): its pieces go out as they are, never joined.
            L.append(f"{ind}    if type(e) is list:")
            _emit_write_len(L, ind + "        ", "sum(map(len, e))", compact, wide=True)
            L.append(f"{ind}        out.extend(e)")
            L.append(f"{ind}    else:")
            _emit_write_len(L, ind + "        ", "len(e)", compact, wide=True)
            L.append(f"{ind}        out.append(e)")
            return
        _emit_write_len(L, ind + "    ", "len(e)", compact, wide=typ != "string")
        L.append(f"{ind}    out.append(e)")
        return
    e = g.name("_enc", f.struct._ENCODERS[v])
    if _in(f.nullable, v) and not elem:
        L.append(f"{ind}if {src} is None:")
        null_marker = b"\x00" if in_tag else b"\xff"
        L.append(f"{ind}    out.append({null_marker!r})")
        L.append(f"{ind}else:")
        L.append(f"{ind}    out.append(b'\\x01')")
        L.append(f"{ind}    {e}({src}, out)")
        return
    L.append(f"{ind}{e}({src}, out)")


def _emit_write_field(g, L, ind, f: Field, src: str, v: int, flex: bool, in_tag=False):
    if not f.is_array:
        _emit_write_value(g, L, ind, f, f.type, src, v, flex, in_tag=in_tag)
        return
    compact = _flexible(f, flex)
    a = g.tmp("a")
    L.append(f"{ind}{a} = {src}")
    L.append(f"{ind}if {a} is None:")
    if _in(f.nullable, v):
        null = b"\x00" if compact else b"\xff\xff\xff\xff"
        L.append(f"{ind}    out.append({null!r})")
    else:
        L.append(f"{ind}    raise ValueError('{f.name} is not nullable in version {v}')")
    L.append(f"{ind}else:")
    _emit_write_len(L, ind + "    ", f"len({a})", compact, wide=True)
    el = f.element
    if el in _FIXED and el != "uuid":
        arr = g.name("_arr", _array_structs(_FIXED[el]))
        L.append(f"{ind}    k = len({a})")
        L.append(f"{ind}    out.append(({arr}[k] if k < 128 else _S('>%d{_FIXED[el]}' % k)).pack(*{a}))")
        return
    x = g.tmp("x")
    L.append(f"{ind}    for {x} in {a}:")
    _emit_write_value(g, L, ind + "        ", f, el, x, v, flex, elem=True)


def _gen_encoder(cls, v: int, flex: bool):
    g = _Gen()
    g.env["_B"] = [bytes((i,)) for i in range(128)]
    L = ["def encode(o, out):"]
    ind = "    "
    fields = cls.FIELDS
    present = [f for f in fields if _in(f.versions, v) and not (flex and _in(f.tagged, v))]
    tagged = sorted((f for f in fields if _in(f.versions, v) and flex and _in(f.tagged, v)),
                    key=lambda f: f.tag)
    i = 0
    last_run = None     # (line, format, arguments) when the last thing written is a fixed run
    while i < len(present):
        f = present[i]
        if not f.is_array and f.type in _FIXED:
            run = [f]
            while i + 1 < len(present) and not present[i + 1].is_array and present[i + 1].type in _FIXED:
                i += 1
                run.append(present[i])
            fmt = ">" + "".join(_FIXED[x.type] for x in run)
            args = ", ".join("o." + x.name for x in run)
            s = g.name("_s", struct.Struct(fmt))
            L.append(f"{ind}out.append({s}.pack({args}))")
            last_run = (len(L) - 1, fmt, args)
        else:
            _emit_write_field(g, L, ind, f, "o." + f.name, v, flex)
            last_run = None
        i += 1
    if flex:
        if not tagged and last_run is not None:
            # No tagged fields: their count, a 0 byte, rides on the preceding pack as a pad byte.
            line, fmt, args = last_run
            s = g.name("_s", struct.Struct(fmt + "x"))
            L[line] = f"{ind}out.append({s}.pack({args}))"
        elif not tagged:
            L.append(f"{ind}out.append(b'\\x00')")
        else:
            L.append(f"{ind}tags = []")
            for f in tagged:
                d = g.name("_d", f.default_value() if not f.is_struct or f.is_array or f.default == "null"
                           else f.struct())
                L.append(f"{ind}if o.{f.name} != {d}:")
                L.append(f"{ind}    outer, out = out, []")
                _emit_write_field(g, L, ind + "    ", f, "o." + f.name, v, True, in_tag=True)
                L.append(f"{ind}    data = b''.join(out); out = outer")
                L.append(f"{ind}    tags.append(_wuv({f.tag}) + _wuv(len(data)) + data)")
            L.append(f"{ind}out.append(_wuv(len(tags)))")
            L.append(f"{ind}out.extend(tags)")
    if len(L) == 1:
        L.append(f"{ind}pass")
    exec(compile("\n".join(L), f"<{cls.__name__} v{v} encode>", "exec"), g.env)
    return g.env["encode"]


def _compile(cls, versions: tuple[int, int], flexible: tuple[int, int], seen: set):
    """Generate encoders/decoders for cls and (first) its nested structs, per version."""
    if cls in seen:
        return
    seen.add(cls)
    for f in cls.FIELDS:
        if f.is_struct:
            _compile(f.struct, versions, flexible, seen)
    cls._ENCODERS = {}
    cls._DECODERS = {}
    for v in range(versions[0], versions[1] + 1):
        flex = _in(flexible, v)
        cls._DECODERS[v] = _gen_decoder(cls, v, flex)
        cls._ENCODERS[v] = _gen_encoder(cls, v, flex)


def message(name: str, api_key: int | None, versions: str, flexible: str = "none",
            fields: Sequence[Field] = (), common: Sequence[tuple[str, list[Field]]] = ()):
    """Declare a message (all versions) and return its generated class.

    ``common`` holds Kafka's ``commonStructs``: (struct name, fields) shared by several fields.
    """
    registry: dict = {}
    common_classes: dict = {}
    for cname, cfields in common:
        common_classes[cname] = _build_structs(cname, cfields, common_classes, registry)
    cls = _build_structs(name, list(fields), common_classes, registry)
    # Kafka struct names are unique within a message: every struct is also reachable from the
    # message class itself (MetadataResponse.MetadataResponsePartition).
    for sname, scls in registry.items():
        if scls is not cls:
            setattr(cls, sname, scls)
    vr = parse_versions(versions)
    fr = parse_versions(flexible)
    _compile(cls, vr, fr, set())
    cls.API_KEY = api_key
    cls.VERSIONS = vr
    cls.FLEXIBLE = fr
    cls.COMMON = tuple(common_classes)
    return cls


def is_flexible(cls, version: int) -> bool:
    return _in(cls.FLEXIBLE, version)
