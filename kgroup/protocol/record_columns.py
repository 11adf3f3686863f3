"""RecordBatch v2 decoded in bulk: the records of many batches as numpy columns, and as Arrow.

:func:`records.decode_records` is the reference decoder (one Python step per record, every
check of Kafka's ``DefaultRecord.readFrom``); this module produces the same records without a
Python step per record, for the readers that want columns (the consumer's ``poll_batch``, the
Spark source, ``kgroup consume --progress``).

How: the decompressed record bodies of the batches are joined into one buffer. A record begins
with its length, so finding where records start is a chain; it is followed a *run* at a time: a
run is a sequence of records whose length varints are byte-for-byte equal, hence equally spaced,
found by comparing a strided slice of the buffer (C speed). Fixed-layout records (the usual
producer output) form long runs; irregular ones fall back to one step per record for the start
position only. Every other field -- timestamp and offset deltas, key and value lengths, header
counts and headers -- is then cut out of the buffer with numpy over all records at once, field
after field (a varint is read byte column by byte column). Keys and values that come in runs of
one length and one spacing (fixed-layout records) are copied into Arrow ``binary`` arrays run by
run, each from a strided matrix view; others become ``binary_view`` arrays pointing into the
buffer, cast to ``binary`` by Arrow (one memcpy each).

Any inconsistency (a length past its record, a record not ending where its length says, a count
mismatch) makes the batch go through :func:`records.decode_records`, which raises the reference
decoder's exact error.
"""
from __future__ import annotations

from typing import Any, Iterable, Sequence

import numpy as np

from kgroup.protocol.primitives import DecodeError, read_varint, write_varint
from kgroup.protocol.records import (RECORD_BATCH_OVERHEAD, TIMESTAMP_TYPE_MASK, BatchHeader, Compression,
                                     InvalidRecordError, Record, decode_records, decompress, read_batch_header)

_PAD = 24            # zero bytes after the buffer: a varint read at a record's end stays inside
_RUN_PROBE = 16      # records compared before a run is looked for in full
_COOLDOWN = 16       # records walked one by one after a failed probe


class _Corrupt(Exception):
    """A batch the bulk walk cannot decode: the reference decoder reports why."""


def _walk(data: bytes | bytearray, pos: int, end: int, count: int, runs: list) -> None:
    """Append (start, stride, length-varint size, k) runs covering ``count`` records in
    ``data[pos:end]``; raise _Corrupt when the records do not tile the range exactly."""
    n = 0
    cooldown = 0
    while n < count:
        if pos >= end:
            raise _Corrupt
        b = data[pos]
        if b < 0x80:
            length = (b >> 1) ^ -(b & 1)
            plen = 1
        elif data[pos + 1] < 0x80:
            z = (b & 0x7F) | (data[pos + 1] << 7)
            length = (z >> 1) ^ -(z & 1)
            plen = 2
        else:
            try:
                length, p2 = read_varint(data, pos)
            except (IndexError, DecodeError):
                raise _Corrupt from None
            plen = p2 - pos
        if length <= 0:
            raise _Corrupt
        stride = plen + length
        k = 1
        left = count - n
        if cooldown:
            cooldown -= 1
        elif left >= 2 and plen <= 2:
            fit = min(left, (end - pos) // stride)
            probe_n = min(fit, _RUN_PROBE)
            probe = data[pos:pos + probe_n * stride:stride]
            k = len(probe) - len(probe.lstrip(probe[:1]))
            if plen == 2:
                p2b = data[pos + 1:pos + k * stride:stride]
                k = min(k, len(p2b) - len(p2b.lstrip(p2b[:1])))
            if k == probe_n and fit > probe_n:
                s1 = data[pos:pos + fit * stride:stride]
                k = len(s1) - len(s1.lstrip(s1[:1]))
                if plen == 2:
                    s2 = data[pos + 1:pos + k * stride:stride]
                    k = min(k, len(s2) - len(s2.lstrip(s2[:1])))
            if k < 2:
                k = 1
                cooldown = _COOLDOWN
        runs.append((pos, stride, plen, k))
        pos += k * stride
        n += k
    if pos != end:
        raise _Corrupt


def _uvarints(a: np.ndarray, p: np.ndarray, max_bytes: int) -> tuple[np.ndarray, np.ndarray]:
    """Unsigned varints at positions ``p`` of ``a``: (values as uint64, widths)."""
    b = a[p]
    if not (b & 0x80).any():
        return b.astype(np.uint64), np.ones(len(p), np.int64)
    v = (b & 0x7F).astype(np.uint64)
    w = np.ones(len(p), np.int64)
    cont = b >= 0x80
    i = 1
    while cont.any():
        if i >= max_bytes:
            raise _Corrupt
        b = a[p + i]
        v |= np.where(cont, (b & 0x7F).astype(np.uint64) << np.uint64(7 * i), np.uint64(0))
        w += cont
        cont &= b >= 0x80
        i += 1
    return v, w


def _varints(a: np.ndarray, p: np.ndarray, max_bytes: int = 10) -> tuple[np.ndarray, np.ndarray]:
    """Zig-zag varints (Kafka's VARINT/VARLONG) at positions ``p``: (int64 values, widths)."""
    u, w = _uvarints(a, p, max_bytes)
    return (u >> np.uint64(1)).astype(np.int64) ^ -(u & np.uint64(1)).astype(np.int64), w


class RecordColumns:
    """Decoded records as columns over one byte buffer.

    ``offset``, ``timestamp`` (int64), ``timestamp_type`` (int32: 0 CreateTime, 1 LogAppendTime),
    ``leader_epoch`` (int32, -1 unknown); ``key_start``/``key_len`` and ``value_start``/``value_len``
    index ``buf`` (length -1: null). Headers (when decoded): ``header_count`` per record and, flat
    in record order, ``hkey_start``/``hkey_len``/``hvalue_start``/``hvalue_len``.
    """

    __slots__ = ("buf", "offset", "timestamp", "timestamp_type", "leader_epoch", "key_start", "key_len",
                 "value_start", "value_len", "header_count", "hkey_start", "hkey_len", "hvalue_start", "hvalue_len",
                 "_arrow_buf")

    def __init__(self, buf: np.ndarray, offset, timestamp, timestamp_type, leader_epoch, key_start, key_len,
                 value_start, value_len, header_count=None, hkey_start=None, hkey_len=None, hvalue_start=None,
                 hvalue_len=None):
        self.buf = buf
        self.offset = offset
        self.timestamp = timestamp
        self.timestamp_type = timestamp_type
        self.leader_epoch = leader_epoch
        self.key_start = key_start
        self.key_len = key_len
        self.value_start = value_start
        self.value_len = value_len
        self.header_count = header_count
        self.hkey_start = hkey_start
        self.hkey_len = hkey_len
        self.hvalue_start = hvalue_start
        self.hvalue_len = hvalue_len
        self._arrow_buf = None

    def __len__(self) -> int:
        return len(self.offset)

    @classmethod
    def empty(cls, with_headers: bool = False) -> "RecordColumns":
        i64 = np.zeros(0, np.int64)
        i32 = np.zeros(0, np.int32)
        h = (i32, i64, i64, i64, i64) if with_headers else (None,) * 5
        return cls(np.zeros(_PAD, np.uint8), i64, i64, i32, i32, i64, i64, i64, i64, *h)

    @property
    def has_headers(self) -> bool:
        return self.header_count is not None

    def take(self, index) -> "RecordColumns":
        """The records selected by ``index`` (a boolean mask, a slice or positions), same buffer."""
        if isinstance(index, slice) and index == slice(None):
            return self
        h = (None,) * 5
        if self.header_count is not None:
            counts = self.header_count
            first = np.zeros(len(counts) + 1, np.int64)
            np.cumsum(counts, out=first[1:])
            keep = np.arange(len(counts))[index]
            kc = counts[keep]
            flat = np.repeat(first[keep] - _excl_cumsum(kc), kc) + np.arange(int(kc.sum()))
            h = (kc, self.hkey_start[flat], self.hkey_len[flat], self.hvalue_start[flat], self.hvalue_len[flat])
        return RecordColumns(self.buf, self.offset[index], self.timestamp[index], self.timestamp_type[index],
                             self.leader_epoch[index], self.key_start[index], self.key_len[index],
                             self.value_start[index], self.value_len[index], *h)

    def records(self) -> list[Record]:
        """As :class:`records.Record` objects (for tests and per-record callers)."""
        raw = self.buf.tobytes()

        def field(start, length):
            return None if length < 0 else raw[start:start + length]
        out = []
        hpos = 0
        for i in range(len(self)):
            headers = []
            if self.header_count is not None:
                for j in range(hpos, hpos + int(self.header_count[i])):
                    headers.append((raw[self.hkey_start[j]:self.hkey_start[j] + self.hkey_len[j]].decode("utf-8"),
                                    field(int(self.hvalue_start[j]), int(self.hvalue_len[j]))))
                hpos += int(self.header_count[i])
            out.append(Record(field(int(self.key_start[i]), int(self.key_len[i])),
                              field(int(self.value_start[i]), int(self.value_len[i])), headers,
                              int(self.timestamp[i]), int(self.offset[i])))
        return out

    # --- Arrow --------------------------------------------------------------------------------

    def _pa_buffer(self):
        import pyarrow as pa
        if self._arrow_buf is None:
            self._arrow_buf = pa.py_buffer(self.buf)
        return self._arrow_buf

    def binary_array(self, starts: np.ndarray, lengths: np.ndarray, string: bool = False):
        """Arrow ``binary`` (or ``string``) array of ``buf[start:start+len]`` (len -1: null)."""
        import pyarrow as pa
        if not string:
            gathered = _gather_runs(self.buf, starts, lengths)
            if gathered is not None:
                return gathered
        return _view_array(self.buf, self._pa_buffer(), starts, lengths).cast(pa.string() if string else pa.binary())

    def keys(self):
        return self.binary_array(self.key_start, self.key_len)

    def values(self):
        return self.binary_array(self.value_start, self.value_len)

    def headers_array(self, value_type=None):
        """``list<struct<key: string, value: binary>>`` per record (needs headers decoded)."""
        import pyarrow as pa
        if self.header_count is None:
            raise ValueError("headers were not decoded (decode_batches(..., headers=True))")
        keys = self.binary_array(self.hkey_start, self.hkey_len, string=True)
        values = self.binary_array(self.hvalue_start, self.hvalue_len)
        struct = pa.StructArray.from_arrays([keys, values], ["key", "value"])
        offsets = np.zeros(len(self) + 1, np.int32)
        np.cumsum(self.header_count, out=offsets[1:])
        arr = pa.ListArray.from_arrays(pa.array(offsets), struct)
        return arr if value_type is None else arr.cast(value_type)

    def to_arrow(self, topic: str | None = None, partition: int | None = None, *, schema=None,
                 timestamp_unit: str = "ms"):
        """One ``pyarrow.RecordBatch``. With ``schema`` (Spark's Kafka source schema: key, value,
        topic, partition, offset, timestamp, timestampType[, headers]) its columns and types;
        otherwise key, value, offset, timestamp (ms), timestamp_type[, headers]."""
        import pyarrow as pa
        n = len(self)
        if schema is None:
            arrays = [self.keys(), self.values(), pa.array(self.offset), pa.array(self.timestamp),
                      pa.array(self.timestamp_type)]
            names = ["key", "value", "offset", "timestamp", "timestamp_type"]
            if self.header_count is not None:
                arrays.append(self.headers_array())
                names.append("headers")
            return pa.RecordBatch.from_arrays(arrays, names)
        ts_type = schema.field("timestamp").type
        ts = pa.array(self.timestamp * 1000 if ts_type.unit == "us" else self.timestamp, pa.int64()).cast(ts_type)
        arrays = [self.keys(), self.values(),
                  _repeated_string(topic or "", n),
                  pa.array(np.full(n, partition, np.int32)), pa.array(self.offset), ts,
                  pa.array(self.timestamp_type.astype(np.int32))]
        if "headers" in schema.names:
            arrays.append(self.headers_array(schema.field("headers").type))
        return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _repeated_string(text: str, n: int):
    import pyarrow as pa
    raw = text.encode("utf-8")
    offsets = np.arange(n + 1, dtype=np.int32) * len(raw)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(raw * n)])


def _excl_cumsum(a: np.ndarray) -> np.ndarray:
    out = np.zeros(len(a), np.int64)
    if len(a) > 1:
        np.cumsum(a[:-1], out=out[1:])
    return out


_MAX_RUN_SHARE = 16  # at most one run per this many values, else the view route is cheaper


def _gather_runs(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray):
    """An Arrow ``binary`` array of ``buf[start:start+len]`` (len -1: null) when the values come
    in few runs of equal length and equal spacing (records of one layout, as producers write
    them): each run is copied out of its strided matrix view in one numpy copy. None otherwise."""
    import pyarrow as pa
    n = len(starts)
    if n < 2:
        return None
    lens = np.maximum(lengths, 0)
    gap = np.diff(starts)
    # value i starts a new run when its length differs from the previous one's, or the gap
    # before it differs from the gap before the previous one
    breaks = np.union1d(np.flatnonzero(lens[1:] != lens[:-1]) + 1, np.flatnonzero(gap[1:] != gap[:-1]) + 2)
    if len(breaks) * _MAX_RUN_SHARE > n:
        return None
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lens, out=offsets[1:])
    if offsets[-1] > 0x7FFFFFFF:
        return None
    data = np.empty(int(offsets[-1]), np.uint8)
    bounds = [0, *breaks.tolist(), n]
    for first, end in zip(bounds, bounds[1:]):
        width = int(lens[first])
        if width:
            k = end - first
            stride = int(gap[first]) if k > 1 else width
            o = int(offsets[first])
            data[o:o + k * width].reshape(k, width)[:] = np.lib.stride_tricks.as_strided(
                buf[int(starts[first]):], (k, width), (stride, 1), writeable=False)
    valid = lengths >= 0
    validity = None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(pa.binary(), n, [validity, pa.py_buffer(offsets.astype(np.int32)),
                                                   pa.py_buffer(data)])


def _view_array(buf: np.ndarray, pa_buf, starts: np.ndarray, lengths: np.ndarray):
    """An Arrow ``binary_view`` array whose values lie in ``buf`` (Arrow's 16-byte views: length,
    then the bytes inline up to 12, else a 4-byte prefix, buffer index 0 and the offset)."""
    import pyarrow as pa
    n = len(starts)
    views = np.zeros((n, 4), np.int32)
    lens = np.maximum(lengths, 0)
    views[:, 0] = lens
    v8 = views.view(np.uint8)
    short = lens <= 12
    if short.all():
        for j in range(int(lens.max(initial=0))):
            v8[:, 4 + j] = np.where(j < lens, buf[starts + j], 0) if j else buf[starts] * (lens > 0)
    else:
        long_ = ~short
        for j in range(4):
            v8[:, 4 + j] = buf[np.where(lens > j, starts + j, 0)] * (lens > j)
        views[long_, 3] = starts[long_]
        if short.any():
            ss, sl = starts[short], lens[short]
            block = np.zeros((len(ss), 12), np.uint8)
            for j in range(int(sl.max(initial=0))):
                block[:, j] = np.where(j < sl, buf[np.where(j < sl, ss + j, 0)], 0)
            v8[short, 4:16] = block
    valid = lengths >= 0
    validity = None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(pa.binary_view(), n, [validity, pa.py_buffer(views), pa_buf])


def _body(header: BatchHeader, view):
    raw = view[RECORD_BATCH_OVERHEAD:header.size]
    if header.compression == Compression.NONE:
        return raw
    return decompress(header.compression, raw)


def decode_batches(batches: Iterable[tuple[BatchHeader | None, Any]], *, headers: bool = False) -> RecordColumns:
    """The records of ``(header, batch)`` pairs (any codec) as one :class:`RecordColumns`, in
    order. Control batches are decoded like any other: filtering them is the caller's (the
    fetcher drops them and aborted transactions batch by batch). With ``headers`` the headers are
    decoded too; without, a record with headers is still checked to end where its length says."""
    hdrs: list[BatchHeader] = []
    bodies: list[bytes] = []
    views = []
    for header, batch in batches:
        if header is None:
            header = read_batch_header(batch)
        hdrs.append(header)
        views.append(batch)
        bodies.append(_body(header, batch if isinstance(batch, memoryview) else memoryview(batch)))
    if not hdrs:
        return RecordColumns.empty(headers)
    total = sum(len(b) for b in bodies)
    joined = bytearray(total + _PAD)
    pos = 0
    for body in bodies:
        joined[pos:pos + len(body)] = body
        pos += len(body)
    data = joined
    runs: list = []
    counts = np.zeros(len(hdrs), np.int64)
    seg = 0
    for i, (header, body) in enumerate(zip(hdrs, bodies)):
        before = len(runs)
        try:
            _walk(data, seg, seg + len(body), header.records_count, runs)
        except _Corrupt:
            decode_records(views[i], header)  # raises the reference error
            raise InvalidRecordError("Found invalid record structure") from None
        counts[i] = sum(r[3] for r in runs[before:])
        seg += len(body)
    buf = np.frombuffer(joined, np.uint8)
    try:
        return _fields(buf, hdrs, counts, runs, headers)
    except _Corrupt:
        for header, view in zip(hdrs, views):
            decode_records(view, header)
        raise InvalidRecordError("Found invalid record structure") from None


_FAST_RUN = 48      # runs at least this long are tried column-wise first


def _column_varint(M: np.ndarray, c: int, constant: bool = False):
    """The zig-zag varint at column ``c`` of every row of the record matrix ``M`` when its width
    is the same in every row (and, with ``constant``, its bytes too): (values, width) or None."""
    row0 = M[0]
    w = 1
    while c + w <= M.shape[1] and row0[c + w - 1] >= 0x80:
        w += 1
    if c + w > M.shape[1] or w > 10:
        return None
    if constant:
        if not (M[:, c:c + w] == row0[c:c + w]).all():
            return None
        z = 0
        for j in range(w):
            z |= (int(row0[c + j]) & 0x7F) << (7 * j)
        return (z >> 1) ^ -(z & 1), w
    if (M[:, c + w - 1] >= 0x80).any():
        return None
    if w == 1:
        u = M[:, c].astype(np.int64)
        return (u >> 1) ^ -(u & 1), 1
    if not (M[:, c:c + w - 1] >= 0x80).all():
        return None
    u = np.zeros(len(M), np.uint64)
    for j in range(w):
        u |= (M[:, c + j] & 0x7F).astype(np.uint64) << np.uint64(7 * j)
    return (u >> np.uint64(1)).astype(np.int64) ^ -(u & np.uint64(1)).astype(np.int64), w


_HEAD = 40  # leading bytes of each record copied out once: the fields before a short key


def _uniform_run(buf: np.ndarray, start: int, stride: int, plen: int, k: int):
    """A run whose records share one layout (varint widths, key and value lengths, no headers),
    read column by column from the k x stride matrix view: (ts deltas, offset deltas, key offset,
    key length, value offset, value length) with offsets relative to a record's start, or None.
    The columns read are first copied out of the (strided, cache-unfriendly) matrix in one pass."""
    M = buf[start:start + k * stride].reshape(k, stride)
    H = np.ascontiguousarray(M[:, :min(stride, _HEAD)])
    c = plen + 1
    got = _column_varint(H, c)
    if got is None:
        return None
    ts, w = got
    c += w
    got = _column_varint(H, c)
    if got is None:
        return None
    off, w = got
    c += w
    got = _column_varint(H, c, constant=True)
    if got is None or got[0] < -1:
        return None
    klen, w = got
    kpos = c + w
    c = kpos + max(klen, 0)
    V = H if c + 10 <= H.shape[1] else np.ascontiguousarray(M[:, c:min(stride, c + 10)])
    vc = c if V is H else 0
    got = _column_varint(V, vc, constant=True)
    if got is None or got[0] < -1:
        return None
    vlen, w = got
    vpos = c + w
    c = vpos + max(vlen, 0)
    if c + 1 != stride or (M[:, c] != 0).any():  # zero headers, and the record ends here
        return None
    return ts, off, kpos, klen, vpos, vlen


def _fields(buf: np.ndarray, hdrs: Sequence[BatchHeader], counts: np.ndarray, runs: list,
            want_headers: bool) -> RecordColumns:
    r = np.array(runs, np.int64).reshape(-1, 4)
    ks = r[:, 3]
    n = int(ks.sum())
    first = _excl_cumsum(ks)
    ts_delta = np.empty(n, np.int64)
    off_delta = np.empty(n, np.int64)
    key_start = np.empty(n, np.int64)
    klen = np.empty(n, np.int64)
    value_start = np.empty(n, np.int64)
    vlen = np.empty(n, np.int64)
    hcols = None
    generic = np.ones(len(r), bool)
    if not want_headers:
        for i, (start, stride, plen, k) in enumerate(runs):
            if k < _FAST_RUN:
                continue
            got = _uniform_run(buf, start, stride, plen, k)
            if got is None:
                continue
            generic[i] = False
            a, b = int(first[i]), int(first[i]) + k
            rec = np.arange(start, start + k * stride, stride, dtype=np.int64)
            ts_delta[a:b], off_delta[a:b] = got[0], got[1]
            key_start[a:b] = rec + got[2]
            klen[a:b] = got[3]
            value_start[a:b] = rec + got[4]
            vlen[a:b] = got[5]
    if generic.any():
        g = np.nonzero(generic)[0]
        gks = ks[g]
        sel = np.repeat(first[g] - _excl_cumsum(gks), gks) + np.arange(int(gks.sum()))
        run_of = np.repeat(g, gks)
        within = sel - first[run_of]
        starts = r[run_of, 0] + within * r[run_of, 1]
        body = starts + r[run_of, 2]
        rec_end = starts + r[run_of, 1]
        p = body + 1  # attributes: unused in v2
        ts_d, w = _varints(buf, p)
        p = p + w
        off_d, w = _varints(buf, p)
        p = p + w
        kl, w = _varints(buf, p)
        ks_ = p + w
        p = ks_ + np.maximum(kl, 0)
        if (p > rec_end).any():
            raise _Corrupt
        vl, w = _varints(buf, p)
        vs_ = p + w
        p = vs_ + np.maximum(vl, 0)
        if (p > rec_end).any():
            raise _Corrupt
        hcount, w = _varints(buf, p)
        p = p + w
        if (hcount < 0).any() or (kl < -1).any() or (vl < -1).any():
            raise _Corrupt
        if hcount.any() or want_headers:
            hcols, p = _headers(buf, p, rec_end, hcount)
        if (p != rec_end).any():
            raise _Corrupt
        ts_delta[sel], off_delta[sel], key_start[sel], klen[sel], value_start[sel], vlen[sel] = \
            ts_d, off_d, ks_, kl, vs_, vl
    if not want_headers:
        hcols = None
    # batch-level values per record
    batch_of = np.repeat(np.arange(len(hdrs)), counts)
    h = np.array([(x.base_offset, x.base_timestamp, x.max_timestamp, x.attributes, x.partition_leader_epoch)
                  for x in hdrs], np.int64).reshape(-1, 5)
    log_append = (h[:, 3] & TIMESTAMP_TYPE_MASK) != 0
    if len(hdrs) == 1:
        x = h[0]
        offset = off_delta + x[0]
        timestamp = np.full(n, x[2]) if log_append[0] else ts_delta + x[1]
        ts_type = np.full(n, int(log_append[0]), np.int32)
        epoch = np.full(n, x[4], np.int32)
    else:
        offset = h[batch_of, 0] + off_delta
        timestamp = np.where(log_append[batch_of], h[batch_of, 2], h[batch_of, 1] + ts_delta) \
            if log_append.any() else h[batch_of, 1] + ts_delta
        ts_type = log_append[batch_of].astype(np.int32)
        epoch = h[batch_of, 4].astype(np.int32)
    return RecordColumns(buf, offset, timestamp, ts_type, epoch, key_start, klen, value_start, vlen,
                         *(hcols or (None,) * 5))


def _headers(buf: np.ndarray, p: np.ndarray, rec_end: np.ndarray, hcount: np.ndarray):
    """Headers of all records, header index by header index: flat (record order) columns."""
    total = int(hcount.sum())
    first = _excl_cumsum(hcount)
    ks = np.zeros(total, np.int64)
    kl = np.zeros(total, np.int64)
    vs = np.zeros(total, np.int64)
    vl = np.zeros(total, np.int64)
    p = p.copy()
    for j in range(int(hcount.max(initial=0))):
        sel = np.nonzero(hcount > j)[0]
        q = p[sel]
        if (q > rec_end[sel]).any():
            raise _Corrupt
        hkl, w = _varints(buf, q)
        if (hkl < 0).any():
            raise _Corrupt
        hks = q + w
        q = hks + hkl
        if (q > rec_end[sel]).any():
            raise _Corrupt
        hvl, w = _varints(buf, q)
        if (hvl < -1).any():
            raise _Corrupt
        hvs = q + w
        q = hvs + np.maximum(hvl, 0)
        flat = first[sel] + j
        ks[flat], kl[flat], vs[flat], vl[flat] = hks, hkl, hvs, hvl
        p[sel] = q
    return (hcount.astype(np.int32), ks, kl, vs, vl), p


def decode_batch(batch, header: BatchHeader | None = None, *, headers: bool = False) -> RecordColumns:
    """One batch: :func:`decode_batches` of ``[(header, batch)]``."""
    return decode_batches([(header, batch)], headers=headers)


# --- encoding in bulk ------------------------------------------------------------------------------

def _varint_bytes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Zig-zag varints of int64 ``values``: a (n, width) uint8 matrix and each row's width."""
    values = np.asarray(values, np.int64)
    n = len(values)
    if n and values.min() == values.max():  # one value: one varint, repeated
        one = np.frombuffer(write_varint(int(values[0])), np.uint8)
        return np.broadcast_to(one, (n, len(one))), np.full(n, len(one), np.int64)
    z = ((values << 1) ^ (values >> 63)).view(np.uint64)
    if n and int(z.max()) < 0x80:
        return z.astype(np.uint8).reshape(n, 1), np.ones(n, np.int64)
    widths = np.ones(n, np.int64)
    rest = z >> np.uint64(7)
    while rest.any():
        widths += rest > 0
        rest >>= np.uint64(7)
    w = int(widths.max(initial=1))
    out = np.empty((n, w), np.uint8)
    for j in range(w):
        byte = ((z >> np.uint64(7 * j)) & np.uint64(0x7F)).astype(np.uint8)
        out[:, j] = np.where(j < widths - 1, byte | 0x80, byte)
    return out, widths


def _packed(columns: list[tuple[np.ndarray, np.ndarray]]):
    """Rows made of several varint matrices side by side, each cut to its row's width: an Arrow
    ``binary`` array (one value per row). Columns whose rows all have the matrix's width need
    no cutting: the rows are then the matrix itself."""
    import pyarrow as pa
    n = len(columns[0][1])
    matrix = np.concatenate([m for m, _ in columns], axis=1)
    if all(w[0] == m.shape[1] and (n < 2 or w.min() == w.max()) for m, w in columns):
        width = matrix.shape[1]
        offsets = np.arange(n + 1, dtype=np.int32) * width
        data = np.ascontiguousarray(matrix).reshape(-1)
    else:
        mask = np.concatenate([np.arange(m.shape[1]) < w[:, None] for m, w in columns], axis=1)
        offsets = np.zeros(n + 1, np.int32)
        np.cumsum(sum(w for _, w in columns), out=offsets[1:])
        data = matrix[mask]
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


_OFFSET_WIDTH_LIMITS = (64, 8192, 1048576, 134217728)  # zig-zag varint widths 1, 2, 3, 4 end here


def encode_records(keys, values, timestamps: np.ndarray, base_timestamp: int) -> bytes:
    """The records of one batch (no headers), as ``build_batch`` writes them, from Arrow
    ``binary`` keys and values (nulls allowed) and int64 timestamps: offset deltas 0..n-1,
    timestamp deltas from ``base_timestamp``. Vectorised: the varint prefixes are packed with
    numpy (in runs of equal offset-delta width, so fixed-layout records pack as one matrix), then
    Arrow joins prefix, key, value length, value and the header count row by row."""
    import pyarrow.compute as pc
    n = len(values)
    klen = pc.binary_length(keys).fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    vlen = pc.binary_length(values).fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    deltas = np.asarray(timestamps, np.int64) - base_timestamp
    parts = []
    lo = 0
    for limit in _OFFSET_WIDTH_LIMITS + (n,):
        hi = min(n, limit)
        if hi > lo:
            parts.append(_encode_run(keys.slice(lo, hi - lo), values.slice(lo, hi - lo), klen[lo:hi], vlen[lo:hi],
                                     deltas[lo:hi], lo))
            lo = hi
    return b"".join(parts)


def _encode_run(keys, values, klen, vlen, ts_deltas, first_offset_delta: int) -> memoryview:
    import pyarrow as pa
    import pyarrow.compute as pc
    n = len(klen)
    ts_v, ts_w = _varint_bytes(ts_deltas)
    off_v, off_w = _varint_bytes(np.arange(first_offset_delta, first_offset_delta + n, dtype=np.int64))
    k_v, k_w = _varint_bytes(klen)
    v_v, v_w = _varint_bytes(vlen)
    body_len = 1 + ts_w + off_w + k_w + np.maximum(klen, 0) + v_w + np.maximum(vlen, 0) + 1
    len_v, len_w = _varint_bytes(body_len)
    attrs = (np.zeros((n, 1), np.uint8), np.ones(n, np.int64))
    prefix = _packed([(len_v, len_w), attrs, (ts_v, ts_w), (off_v, off_w), (k_v, k_w)])
    middle = _packed([(v_v, v_w)])
    empty = pa.scalar(b"", pa.binary())
    joined = pc.binary_join_element_wise(prefix, keys.fill_null(empty) if keys.null_count else keys, middle,
                                         values.fill_null(empty) if values.null_count else values,
                                         pa.scalar(b"\x00", pa.binary()), empty)
    offsets = np.frombuffer(joined.buffers()[1], np.int32, n + 1, joined.offset * 4)
    return memoryview(joined.buffers()[2])[offsets[0]:offsets[-1]]
