"""``kgroup dump-log`` on an aborted transaction index, in DumpLogSegments' words."""
import io
import os
from contextlib import redirect_stdout

from kgroup.dump_log import main
from kgroup.protocol.records import Record, build_batch, build_end_txn_marker_batch
from kgroup.storage.log import PartitionLog
from kgroup.storage.producer_state import AppendOrigin


def test_dump_txnindex(tmp_path):
    plog = PartitionLog(str(tmp_path / "t-0"), clock=lambda: 1000)
    for pid in (7, 8):
        plog.append(build_batch([Record(None, b"v", (), 1000)] * 2, producer_id=pid, producer_epoch=0,
                                base_sequence=0, is_transactional=True))
    plog.append(build_end_txn_marker_batch(7, 0, False, 0, 1000), origin=AppendOrigin.COORDINATOR)
    plog.append(build_end_txn_marker_batch(8, 0, False, 0, 1000), origin=AppendOrigin.COORDINATOR)
    plog.close()
    path = os.path.join(plog.directory, "00000000000000000000.txnindex")
    out = io.StringIO()
    with redirect_stdout(out):
        assert main([path]) == 0
    assert out.getvalue().splitlines() == [
        f"Dumping {path}",
        "version: 0 producerId: 7 firstOffset: 0 lastOffset: 4 lastStableOffset: 2",
        "version: 0 producerId: 8 firstOffset: 2 lastOffset: 5 lastStableOffset: 6",
    ]
