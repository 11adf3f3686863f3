"""Hypothesis strategies generated from our own schemas: a valid message for any version."""
from hypothesis import strategies as st

from kgroup.protocol.schema import _in

_INTS = {"int8": 7, "int16": 15, "int32": 31, "int64": 63}


def _value(f, typ, v, elem=False):
    nullable = _in(f.nullable, v) and not elem
    if typ in _INTS:
        b = _INTS[typ]
        s = st.integers(-(1 << b), (1 << b) - 1)
    elif typ == "uint16":
        s = st.integers(0, 0xFFFF)
    elif typ == "uint32":
        s = st.integers(0, 0xFFFFFFFF)
    elif typ == "float64":
        s = st.floats(allow_nan=False)
    elif typ == "bool":
        s = st.booleans()
    elif typ == "uuid":
        s = st.binary(min_size=16, max_size=16)
    elif typ == "string":
        s = st.text(max_size=20)
    elif typ == "bytes":
        s = st.binary(max_size=40)
    elif typ == "records":
        s = st.binary(max_size=40)
        nullable = True
    else:
        s = message_strategy(f.struct, v)
    return st.one_of(st.none(), s) if nullable else s


def message_strategy(cls, version):
    kwargs = {}
    for f in cls.FIELDS:
        if not _in(f.versions, version):
            continue
        if f.is_array:
            arr = st.lists(_value(f, f.element, version, elem=True), max_size=3)
            kwargs[f.name] = st.one_of(st.none(), arr) if _in(f.nullable, version) else arr
        else:
            kwargs[f.name] = _value(f, f.type, version)
    return st.builds(cls, **kwargs)
