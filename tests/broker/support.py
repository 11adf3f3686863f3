"""Helpers for in-process broker tests."""
import asyncio


async def response_of(pending):
    """Wait in the running loop for a PendingResponse: its response, or its failure raised."""
    if not pending.answered:
        answered = asyncio.get_running_loop().create_future()
        pending.listen(lambda p: answered.done() or answered.set_result(None))
        await answered
    if pending.error is not None:
        raise pending.error
    return pending.response
