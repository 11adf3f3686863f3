"""PendingResponse: an answer given later, by a direct call of its listener (no asyncio future
per request), then, which passes one answer on to another, and gather, which combines several
into one."""
from kgroup.broker.pending import PendingResponse


def _answered(response):
    p = PendingResponse()
    p.answer(response)
    return p


def test_the_listener_is_called_once_with_the_first_answer():
    p, seen = PendingResponse(), []
    p.listen(lambda q: seen.append(q.response))
    assert not p.answered and seen == []
    p.answer("first")
    p.answer("second")          # a later answer is ignored
    p.fail(RuntimeError("late"))
    assert seen == ["first"] and p.answered and p.error is None and p.response == "first"


def test_listening_to_an_answered_response_calls_at_once():
    p, seen = PendingResponse(), []
    p.answer(42)
    p.listen(lambda q: seen.append(q.response))
    assert seen == [42]


def test_a_failure_reaches_the_listener():
    p, seen = PendingResponse(), []
    p.listen(seen.append)
    error = OSError(5, "Input/output error")
    p.fail(error)
    assert seen == [p] and p.error is error and p.response is None


def test_a_listener_that_stopped_listening_is_not_called():
    p, seen = PendingResponse(), []
    p.listen(seen.append)
    p.stop_listening()          # the connection closed
    p.answer("late")
    assert seen == [] and p.answered


def test_gather_of_answered_parts_combines_at_once():
    combined = PendingResponse.gather([_answered(1), _answered(2)], lambda rs: rs)
    assert combined == [1, 2]   # the combination itself, nothing to listen to


def test_gather_answers_in_part_order_when_the_last_part_is_answered():
    first, second, seen = PendingResponse(), PendingResponse(), []
    combined = PendingResponse.gather([first, _answered("b"), second], lambda rs: "".join(rs))
    combined.listen(lambda q: seen.append(q.response))
    second.answer("c")
    assert seen == [] and not combined.answered
    first.answer("a")
    assert seen == ["abc"]


def test_gather_fails_with_the_first_failed_part():
    first, second, seen = PendingResponse(), PendingResponse(), []
    combined = PendingResponse.gather([first, second], lambda rs: rs)
    combined.listen(seen.append)
    error = OSError(5, "Input/output error")
    first.fail(error)
    second.answer("late")
    assert seen == [combined] and combined.error is error


def test_gather_of_an_already_failed_part_is_a_failed_response():
    failed = PendingResponse()
    failed.fail(ValueError("no"))
    combined = PendingResponse.gather([_answered(1), failed], lambda rs: rs)
    assert type(combined) is PendingResponse and isinstance(combined.error, ValueError)


def test_gather_fails_when_combine_raises():
    part = PendingResponse()
    combined = PendingResponse.gather([part], lambda rs: 1 / 0)
    part.answer(0)
    assert isinstance(combined.error, ZeroDivisionError)


def test_gather_waits_only_for_fsyncs_when_every_waiting_part_does():
    """The server mutes a connection behind a gathered response unless every part it still waits
    for waits only for a flush (an answered part does not count)."""
    flushing, parked = PendingResponse(flush_only=True), PendingResponse()
    assert PendingResponse.gather([flushing, _answered(1)], list).flush_only
    assert not PendingResponse.gather([flushing, parked], list).flush_only
    assert not PendingResponse.gather([parked, _answered(1)], list).flush_only
    assert not PendingResponse().flush_only


def test_then_answers_with_the_mapped_response_once_answered():
    inner, seen = PendingResponse(), []
    outer = inner.then(lambda r: r * 2)
    outer.listen(lambda q: seen.append(q.response))
    assert not outer.answered and seen == []
    inner.answer(21)
    assert seen == [42] and outer.answered and outer.error is None


def test_then_of_an_answered_response_is_answered_at_once():
    outer = _answered("r").then(str.upper)
    assert outer.answered and outer.response == "R"


def test_then_without_a_function_relays_the_response_itself():
    inner = PendingResponse()
    outer = inner.then()
    inner.answer("same")
    assert outer.response == "same" and outer is not inner


def test_then_keeps_why_the_answer_waits():
    """A relayed fsync wait still waits only for the fsync (the server keeps dispatching
    behind it); a relayed parked request still mutes the connection."""
    assert PendingResponse(flush_only=True).then().flush_only
    assert not PendingResponse().then(str).flush_only


def test_then_propagates_a_failure_without_calling_the_function():
    inner, called = PendingResponse(), []
    outer = inner.then(called.append)
    error = OSError(5, "Input/output error")
    inner.fail(error)
    assert outer.error is error and called == [] and outer.response is None


def test_then_fails_when_the_function_raises():
    inner = PendingResponse()
    outer = inner.then(lambda r: 1 / r)
    inner.answer(0)
    assert isinstance(outer.error, ZeroDivisionError)


def test_then_to_answers_a_response_already_handed_out():
    """The answer of a request run later (a deferred transactional request, a delayed fault)
    goes to the PendingResponse the server already listens to: its flush_only is its own."""
    token, seen = PendingResponse(), []
    token.listen(lambda q: seen.append(q.response))
    inner = PendingResponse(flush_only=True)
    assert inner.then(to=token) is token
    assert seen == [] and not token.flush_only
    inner.answer("late")
    assert seen == ["late"]
    failed, token2 = PendingResponse(), PendingResponse()
    failed.fail(ValueError("no"))
    failed.then(to=token2)
    assert isinstance(token2.error, ValueError)
