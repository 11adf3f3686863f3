"""Helpers for in-process broker tests."""
import asyncio

from kgroup.broker.broker import Broker
from kgroup.broker.config import BrokerConfig
from kgroup.broker.handlers import HANDLERS
from kgroup.broker.pending import PendingResponse
from kgroup.protocol.messages.create_topics import CreateTopicsRequest


async def response_of(pending):
    """Wait in the running loop for a PendingResponse: its response, or its failure raised."""
    if not pending.answered:
        answered = asyncio.get_running_loop().create_future()
        pending.listen(lambda p: answered.done() or answered.set_result(None))
        await answered
    if pending.error is not None:
        raise pending.error
    return pending.response


class RequestContext:
    client_id = "inproc"
    client_host = "127.0.0.1"


def submit(b, req, version):
    """Hand a request to its handler now (as the server does when a frame is cut)."""
    return HANDLERS[type(req).API_KEY][0](b, RequestContext(), req, version)


async def answer_of(result):
    if type(result) is PendingResponse:
        return await response_of(result)
    return result


def inproc(tmp_path, scenario, overrides=("group.initial.rebalance.delay.ms=0",), topics=(("t", 4),)):
    """Run ``await scenario(broker)`` against an in-process broker with ``topics`` created."""
    async def main():
        cfg = BrokerConfig.load(None, ["listeners=PLAINTEXT://127.0.0.1:0", f"log.dirs={tmp_path / 'data'}",
                                       *overrides])
        b = Broker(cfg)
        await b.start()
        try:
            CT = CreateTopicsRequest.CreatableTopic
            await answer_of(submit(b, CreateTopicsRequest(topics=[
                CT(name=name, num_partitions=n, replication_factor=1) for name, n in topics]), 5))
            return await scenario(b)
        finally:
            await b.stop()
    return asyncio.run(main())
