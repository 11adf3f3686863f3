"""PendingResponse: the coordinator's answer given later, by a direct call of the server's
listener (no asyncio future per request)."""
import asyncio

import pytest

from kgroup.broker.pending import PendingResponse


def test_the_listener_is_called_once_with_the_first_answer():
    p, seen = PendingResponse(), []
    p.listen(lambda q: seen.append(q.result()))
    assert not p.done() and seen == []
    p.answer("first")
    p.answer("second")          # a later answer is ignored, as set_result on a done future
    p.fail(RuntimeError("late"))
    assert seen == ["first"] and p.done() and p.exception() is None and not p.cancelled()


def test_listening_to_an_answered_response_calls_at_once():
    p, seen = PendingResponse(), []
    p.answer(42)
    p.listen(lambda q: seen.append(q.result()))
    assert seen == [42]


def test_a_failure_reaches_the_listener_and_result_raises():
    p, seen = PendingResponse(), []
    p.listen(seen.append)
    error = OSError(5, "Input/output error")
    p.fail(error)
    assert seen == [p] and p.exception() is error
    with pytest.raises(OSError):
        p.result()


def test_a_cancelled_listener_is_not_called():
    p, seen = PendingResponse(), []
    p.listen(seen.append)
    p.cancel()                  # the connection closed
    p.answer("late")
    assert seen == [] and p.done()


def test_it_can_be_awaited():
    async def main():
        answered, failed, ready = PendingResponse(), PendingResponse(), PendingResponse()
        ready.answer("now")
        assert await ready == "now"
        loop = asyncio.get_running_loop()
        loop.call_later(0.01, answered.answer, "later")
        loop.call_later(0.01, failed.fail, ValueError("no"))
        assert await answered == "later"
        with pytest.raises(ValueError):
            await failed

    asyncio.run(main())
