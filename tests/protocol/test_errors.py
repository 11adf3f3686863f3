"""One error family: protocol, record-format and partition-log errors are all KafkaErrors keyed
by an ErrorCode, so one ``except KafkaError`` and ``e.code`` answer any of them."""
import pytest

from kgroup.protocol import records
from kgroup.protocol.errors import ErrorCode, KafkaError
from kgroup.storage import errors as storage_errors


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


FIXED_CODE_ERRORS = sorted({*_subclasses(records.RecordBatchError), *_subclasses(storage_errors.LogError)},
                           key=lambda c: c.__name__)


def test_every_record_and_log_error_is_a_kafka_error_with_its_own_code():
    assert len(FIXED_CODE_ERRORS) >= 12
    codes = [cls.code for cls in FIXED_CODE_ERRORS]
    assert all(isinstance(c, ErrorCode) and c is not ErrorCode.UNKNOWN_SERVER_ERROR for c in codes)
    assert len(set(codes)) == len(codes)          # no two classes share a code


@pytest.mark.parametrize("cls", FIXED_CODE_ERRORS, ids=lambda c: c.__name__)
def test_a_raised_error_carries_code_number_name_message_and_record_errors(cls):
    with pytest.raises(KafkaError) as caught:
        raise cls("what went wrong", [(3, "record 3")])
    e = caught.value
    assert (e.code, e.error_code, e.error_name) == (cls.code, int(cls.code), cls.code.name)
    assert str(e) == "what went wrong" and e.record_errors == [(3, "record 3")]


def test_record_errors_stay_value_errors():
    assert issubclass(records.InvalidRecordError, ValueError)


def test_a_protocol_error_takes_its_code_and_defaults_its_message_to_kafkas():
    e = KafkaError(ErrorCode.ILLEGAL_GENERATION)
    assert e.code is ErrorCode.ILLEGAL_GENERATION and e.error_code == 22
    assert str(e) == ErrorCode.ILLEGAL_GENERATION.message
    assert str(KafkaError(ErrorCode.NOT_COORDINATOR, "moved")) == "moved"


def test_decode_and_corrupt_data_errors_are_kafka_errors_with_a_fixed_code():
    from kgroup.coordinator import coordinator_records as rec
    from kgroup.protocol.primitives import DecodeError
    from kgroup.storage.txn_index import CorruptIndexError
    from kgroup.transaction_coordinator.transaction_log_records import TransactionLogDecodeError

    raised = {
        DecodeError("truncated varint"): ErrorCode.INVALID_REQUEST,
        rec.RecordDecodeError("bad value"): ErrorCode.CORRUPT_MESSAGE,
        rec.CoordinatorLoadError(3, 17, rec.RecordDecodeError("bad value")): ErrorCode.CORRUPT_MESSAGE,
        TransactionLogDecodeError("bad key"): ErrorCode.CORRUPT_MESSAGE,
        rec.UnknownRecordType(99): ErrorCode.UNKNOWN_SERVER_ERROR,
        CorruptIndexError("bad entry"): ErrorCode.UNKNOWN_SERVER_ERROR,
    }
    for e, code in raised.items():
        assert isinstance(e, KafkaError) and e.code is code and e.error_code == int(code)
    assert str(DecodeError("truncated varint")) == "truncated varint"
    assert "offset 17 of __consumer_offsets-3" in str(rec.CoordinatorLoadError(3, 17, ValueError("x")))
    assert rec.UnknownRecordType(99).record_type == 99
    assert issubclass(DecodeError, ValueError)       # the codecs' `except ValueError` still see it


def test_a_decode_error_with_no_message_says_its_codes_message():
    from kgroup.protocol.primitives import DecodeError
    assert str(DecodeError()) == ErrorCode.INVALID_REQUEST.message
