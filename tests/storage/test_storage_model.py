"""Model-based test: any sequence of appends, truncations, DeleteRecords, rolls (small
segments), flushes, tail corruptions and clean or unclean restarts leaves the log equal to a
plain list of batches with offsets."""
from __future__ import annotations

import shutil
import tempfile

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kgroup.protocol.records import Record, build_batch, decode_records, read_batch_header, validate_batch
from kgroup.storage import LogConfig, LogManager
from tests.storage.helpers import T0, FakeClock

CONFIG = LogConfig(segment_bytes=1200, index_interval_bytes=150)


class LogVersusModel(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="kgroup-model-")
        self.clock = FakeClock()
        self.mgr = LogManager(self.dir, CONFIG, clock=self.clock)
        self.log = self.mgr.get_or_create("m", 0)
        self.batches: list[tuple[int, list[tuple[int, bytes]]]] = []  # (base offset, [(offset, value)])
        self.base = self.leo = self.log_start = 0
        self.counter = 0

    def teardown(self):
        self.mgr.close_all(clean=False)
        shutil.rmtree(self.dir, ignore_errors=True)

    def _reopen(self, clean: bool) -> None:
        self.mgr.close_all(clean=clean)
        self.mgr = LogManager(self.dir, CONFIG, clock=self.clock)
        self.log = self.mgr.get("m", 0)

    def _clear_if_start_passed(self) -> None:
        if self.leo < self.log_start:
            self.batches, self.base, self.leo = [], self.log_start, self.log_start

    @rule(n=st.integers(1, 4), size=st.integers(0, 150))
    def append(self, n, size):
        values = [b"%d:" % (self.counter + i) + b"x" * size for i in range(n)]
        self.counter += n
        res = self.log.append(build_batch([Record(b"k", v, (), T0 + self.counter) for v in values]))
        assert (res.base_offset, res.last_offset) == (self.leo, self.leo + n - 1)
        self.batches.append((self.leo, [(self.leo + i, v) for i, v in enumerate(values)]))
        self.leo += n

    @rule(data=st.data())
    def truncate(self, data):
        offset = data.draw(st.integers(max(0, self.log_start - 2), self.leo + 2))
        self.log.truncate_to(offset)
        if offset >= self.leo:
            return
        if offset >= self.log_start:
            self.batches = [b for b in self.batches if b[1][-1][0] < offset]
            self.leo = self.batches[-1][1][-1][0] + 1 if self.batches else self.base
        if offset < self.log_start or self.leo < self.log_start:
            # Truncated below the log start (or took the batch holding it): start over.
            self.batches, self.base, self.leo, self.log_start = [], offset, offset, offset
            self.mgr.checkpoint()  # a moved log start survives a crash once checkpointed

    @rule(data=st.data())
    def delete_records(self, data):
        offset = data.draw(st.integers(self.log_start, self.leo))
        assert self.log.delete_records_before(offset) == max(offset, self.log_start)
        self.log_start = max(offset, self.log_start)
        self.mgr.checkpoint()  # what Kafka's periodic log-start checkpoint would have done

    @rule()
    def roll(self):
        self.log.roll()

    @rule()
    def flush(self):
        self.mgr.flush_all()

    @rule(clean=st.booleans())
    def restart(self, clean):
        self._reopen(clean)

    @precondition(lambda self: self.log.active_segment.size > 0)
    @rule()
    def corrupt_tail_and_crash(self):
        seg = self.log.active_segment
        pos, header = list(seg.iter_headers())[-1]
        with open(seg.log_path, "r+b") as f:
            f.seek(pos + header.size - 1)
            last = f.read(1)
            f.seek(pos + header.size - 1)
            f.write(bytes([last[0] ^ 0xFF]))
        self._reopen(clean=False)
        base, _ = self.batches.pop()
        assert base == header.base_offset
        self.leo = base
        self._clear_if_start_passed()

    @invariant()
    def matches_model(self):
        log = self.log
        assert (log.log_start_offset, log.log_end_offset) == (self.log_start, self.leo)
        got, fetch = [], self.log_start
        while fetch < self.leo:
            batches = log.read(fetch, 1000).batches()
            assert batches, f"no data at {fetch}"
            for b in batches:
                h = read_batch_header(b)
                validate_batch(h, b, check_records=True)
                got.append((h.base_offset, [(r.offset, r.value) for r in decode_records(b, h)]))
                fetch = h.next_offset
        assert got == [b for b in self.batches if b[1][-1][0] >= self.log_start]


LogVersusModel.TestCase.settings = settings(
    max_examples=35, stateful_step_count=30, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
TestLogVersusModel = LogVersusModel.TestCase
