"""Synchronous facades for code that cannot await (Spark tasks, scripts): ``KafkaConsumer``,
``KafkaShareConsumer``, ``KafkaProducer`` and ``KafkaAdmin`` run the asyncio clients on a private
event-loop thread.

Every blocking call submits a coroutine to that loop and waits. Rebalance callbacks are run on
the *calling* thread: while ``poll()``/``close()``/``unsubscribe()`` wait, the loop hands each
listener call back to the waiting thread and resumes when it returns. So a listener may call
``commit()`` (or any other method) exactly as with the Java client, and never runs concurrently
with the application's own code. A share consumer's acknowledgement commit callback is handed
over the same way.

As in Java, one consumer must be used from one thread at a time.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import queue
import threading
from typing import Iterable

from .admin import Admin
from .assignors import TopicPartition
from .consumer import Consumer
from .errors import IllegalStateError, KafkaTimeoutError
from .producer import Producer
from .share_consumer import ShareConsumer
from .types import AcknowledgeType, ConsumerRebalanceListener, ConsumerRecord, RecordMetadata


class _LoopThread:
    """A private event loop running in a daemon thread."""

    def __init__(self, name: str):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._main, name=name, daemon=True)
        self.thread.start()

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def submit(self, coro) -> concurrent.futures.Future:
        if threading.current_thread() is self.thread:
            coro.close()
            raise IllegalStateError("blocking client call made from the client's own event loop thread")
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro, timeout: float | None = None):
        return self.submit(coro).result(timeout)

    def stop(self) -> None:
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
        if threading.current_thread() is not self.thread:
            self.thread.join(5)
        if not self.loop.is_running() and not self.loop.is_closed():
            self.loop.close()


async def _call(fn, *args, **kwargs):
    return fn(*args, **kwargs)


class _CallerThreadListener(ConsumerRebalanceListener):
    """Runs the user's listener on the thread blocked in a facade call."""

    def __init__(self, listener: ConsumerRebalanceListener, owner: "KafkaConsumer"):
        self.listener = listener
        self.owner = owner

    async def _hand_over(self, fn, partitions):
        fut = asyncio.get_running_loop().create_future()
        self.owner._requests.put((fn, partitions, fut))
        return await fut

    async def on_partitions_revoked(self, revoked):
        return await self._hand_over(self.listener.on_partitions_revoked, revoked)

    async def on_partitions_assigned(self, assigned):
        return await self._hand_over(self.listener.on_partitions_assigned, assigned)

    async def on_partitions_lost(self, lost):
        return await self._hand_over(self.listener.on_partitions_lost, lost)


class KafkaConsumer:
    """A blocking consumer with the asyncio :class:`~kgroup.client.consumer.Consumer` inside."""

    def __init__(self, *topics: str, config=None, listener: ConsumerRebalanceListener | None = None, **configs):
        self._loop = _LoopThread("kgroup-consumer")
        self._requests: queue.Queue = queue.Queue()
        try:
            self._core: Consumer = self._loop.run(_call(Consumer, config=config, **configs))
        except BaseException:
            self._loop.stop()
            raise
        if topics:
            self.subscribe(list(topics), listener=listener)

    def __enter__(self) -> "KafkaConsumer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _drive(self, coro, timeout: float | None = None):
        """Wait for ``coro`` on the loop, running listener callbacks here meanwhile."""
        fut = self._loop.submit(coro)
        fut.add_done_callback(lambda _: self._requests.put(None))
        while True:
            try:
                item = self._requests.get(timeout=timeout)
            except queue.Empty:
                fut.cancel()
                raise KafkaTimeoutError(f"no answer from the client within {timeout}s") from None
            if item is None:
                if fut.done():
                    return fut.result()
                continue
            fn, partitions, done = item
            try:
                result = fn(partitions)
            except BaseException as e:
                self._loop.loop.call_soon_threadsafe(lambda e=e, done=done: done.done() or done.set_exception(e))
            else:
                self._loop.loop.call_soon_threadsafe(lambda r=result, done=done: done.done() or done.set_result(r))

    def _sync(self, fn, *args, **kwargs):
        return self._drive(_call(fn, *args, **kwargs))

    # subscription
    def subscribe(self, topics: Iterable[str] | None = None, pattern=None,
                  listener: ConsumerRebalanceListener | None = None) -> None:
        wrapped = _CallerThreadListener(listener or ConsumerRebalanceListener(), self)
        self._sync(self._core.subscribe, topics, pattern, wrapped)

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        self._sync(self._core.assign, [TopicPartition(*tp) for tp in partitions])

    def unsubscribe(self) -> None:
        self._drive(self._core.unsubscribe())

    def assignment(self) -> set[TopicPartition]:
        return self._sync(self._core.assignment)

    def group_stable(self) -> bool:
        return self._sync(self._core.group_stable)

    def group_metadata(self):
        return self._sync(self._core.group_metadata)

    def subscription(self) -> set[str]:
        return self._sync(self._core.subscription)

    # records
    def poll(self, timeout_ms: int = 0, max_records: int | None = None) -> list[ConsumerRecord]:
        return self._drive(self._core.poll(timeout_ms, max_records))

    def poll_batch(self, timeout_ms: int = 0, max_records: int | None = None, headers: bool = False) -> dict:
        """``{TopicPartition: RecordColumns}`` decoded in bulk (see ``Consumer.poll_batch``)."""
        return self._drive(self._core.poll_batch(timeout_ms, max_records, headers))

    def __iter__(self):
        while True:
            yield from self.poll(1000)

    # positions
    def seek(self, partition: TopicPartition, offset: int) -> None:
        self._sync(self._core.seek, TopicPartition(*partition), offset)

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        self._sync(self._core.seek_to_beginning, *partitions)

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        self._sync(self._core.seek_to_end, *partitions)

    def position(self, partition: TopicPartition, timeout_ms: int | None = None) -> int:
        return self._drive(self._core.position(TopicPartition(*partition), timeout_ms))

    def pause(self, *partitions: TopicPartition) -> None:
        self._sync(self._core.pause, *partitions)

    def resume(self, *partitions: TopicPartition) -> None:
        self._sync(self._core.resume, *partitions)

    def paused(self) -> set[TopicPartition]:
        return self._sync(self._core.paused)

    def beginning_offsets(self, partitions, timeout_ms: int | None = None) -> dict:
        return self._drive(self._core.beginning_offsets(partitions, timeout_ms))

    def end_offsets(self, partitions, timeout_ms: int | None = None) -> dict:
        return self._drive(self._core.end_offsets(partitions, timeout_ms))

    def topics(self) -> dict:
        return self._drive(self._core.topics())

    def partitions_for(self, topic: str):
        return self._drive(self._core.partitions_for(topic))

    # commits
    def commit(self, offsets=None, timeout_ms: int | None = None) -> None:
        """commitSync."""
        self._drive(self._core.commit(offsets, timeout_ms))

    commit_sync = commit

    def commit_async(self, offsets=None, callback=None) -> concurrent.futures.Future:
        async def go():
            return await self._core.commit_async(offsets, callback)
        return self._loop.submit(go())

    def committed(self, partitions, timeout_ms: int | None = None) -> dict:
        return self._drive(self._core.committed(partitions, timeout_ms))

    def close(self, timeout_ms: int = 30000) -> None:
        if self._loop.loop.is_closed():
            return
        try:
            self._drive(self._core.close(timeout_ms), timeout=timeout_ms / 1000 + 5)
        finally:
            self._loop.stop()


class KafkaShareConsumer:
    """A blocking share consumer (KIP-932) with the asyncio
    :class:`~kgroup.client.share_consumer.ShareConsumer` inside."""

    def __init__(self, config=None, **configs):
        self._loop = _LoopThread("kgroup-share-consumer")
        self._requests: queue.Queue = queue.Queue()
        self._guard = threading.Lock()
        self._owner: int | None = None
        self._depth = 0
        try:
            self._core: ShareConsumer = self._loop.run(_call(ShareConsumer, config=config, **configs))
        except BaseException:
            self._loop.stop()
            raise

    def __enter__(self) -> "KafkaShareConsumer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _drive(self, coro, timeout: float | None = None):
        """KafkaConsumer._drive, for one thread at a time (Java's ConcurrentModificationException:
        calls from two threads would take each other's completions)."""
        me = threading.get_ident()
        with self._guard:
            if self._owner not in (None, me):
                coro.close()
                raise IllegalStateError("KafkaShareConsumer is not safe for multi-threaded access")
            self._owner = me
            self._depth += 1
        try:
            return KafkaConsumer._drive(self, coro, timeout)
        finally:
            with self._guard:
                self._depth -= 1
                if not self._depth:
                    self._owner = None

    _sync = KafkaConsumer._sync

    @property
    def member_id(self) -> str:
        return self._core.member_id

    def subscribe(self, topics: Iterable[str]) -> None:
        self._sync(self._core.subscribe, topics)

    def unsubscribe(self) -> None:
        self._drive(self._core.unsubscribe())

    def subscription(self) -> set[str]:
        return self._sync(self._core.subscription)

    def assignment(self) -> set[TopicPartition]:
        return self._sync(self._core.assignment)

    def poll(self, timeout_ms: int = 0) -> list[ConsumerRecord]:
        return self._drive(self._core.poll(timeout_ms))

    def __iter__(self):
        while True:
            yield from self.poll(1000)

    def acknowledge(self, record: ConsumerRecord, type: AcknowledgeType = AcknowledgeType.ACCEPT) -> None:
        self._sync(self._core.acknowledge, record, type)

    def acknowledge_offset(self, topic: str, partition: int, offset: int,
                           type: AcknowledgeType = AcknowledgeType.ACCEPT) -> None:
        self._sync(self._core.acknowledge_offset, topic, partition, offset, type)

    def commit_sync(self, timeout_ms: int | None = None) -> dict:
        return self._drive(self._core.commit_sync(timeout_ms))

    def commit_async(self) -> concurrent.futures.Future:
        """The results also go to the acknowledgement commit callback, from a later call."""
        async def go():
            return await self._core.commit_async()
        return self._loop.submit(go())

    def set_acknowledgement_commit_callback(self, callback) -> None:
        """``callback(offsets, exception)``, run on the thread blocked in poll / commit / close."""
        if callback is None:
            self._sync(self._core.set_acknowledgement_commit_callback, None)
            return

        async def hand_over(offsets, error):
            fut = asyncio.get_running_loop().create_future()
            self._requests.put((lambda args: callback(*args), (offsets, error), fut))
            return await fut
        self._sync(self._core.set_acknowledgement_commit_callback, hand_over)

    def acquisition_lock_timeout_ms(self) -> int | None:
        return self._sync(self._core.acquisition_lock_timeout_ms)

    def close(self, timeout_ms: int = 30000) -> None:
        if self._loop.loop.is_closed():
            return
        try:
            self._drive(self._core.close(timeout_ms), timeout=timeout_ms / 1000 + 5)
        finally:
            self._loop.stop()


class FutureRecordMetadata(concurrent.futures.Future):
    """``send()``'s future; ``get(timeout)`` as in the Java/kafka-python clients."""

    def get(self, timeout: float | None = None) -> RecordMetadata:
        return self.result(timeout)


class KafkaProducer:
    """A blocking producer with the asyncio :class:`~kgroup.client.producer.Producer` inside."""

    def __init__(self, config=None, **configs):
        self._loop = _LoopThread("kgroup-producer")
        try:
            self._core: Producer = self._loop.run(_call(Producer, config=config, **configs))
        except BaseException:
            self._loop.stop()
            raise

    def __enter__(self) -> "KafkaProducer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def send(self, topic: str, value=None, key=None, *, partition: int | None = None,
             timestamp_ms: int | None = None, headers=None) -> FutureRecordMetadata:
        """Append the record (blocking only while the topic's metadata is fetched); returns a future."""
        result = FutureRecordMetadata()
        inner = self._loop.run(self._core.send(topic, value, key, partition=partition, timestamp_ms=timestamp_ms,
                                               headers=headers))

        def relay(f: asyncio.Future) -> None:
            if f.cancelled():
                result.cancel()
            elif f.exception() is not None:
                result.set_exception(f.exception())
            else:
                result.set_result(f.result())
        self._loop.loop.call_soon_threadsafe(inner.add_done_callback, relay)
        return result

    def flush(self, timeout_ms: int | None = None) -> None:
        self._loop.run(self._core.flush(timeout_ms))

    # transactions
    def init_transactions(self, timeout_ms: int | None = None) -> None:
        self._loop.run(self._core.init_transactions(timeout_ms))

    def begin_transaction(self) -> None:
        self._loop.run(_call(self._core.begin_transaction))

    def send_offsets_to_transaction(self, offsets, consumer_group_metadata, timeout_ms: int | None = None) -> None:
        self._loop.run(self._core.send_offsets_to_transaction(offsets, consumer_group_metadata, timeout_ms))

    def commit_transaction(self, timeout_ms: int | None = None) -> None:
        self._loop.run(self._core.commit_transaction(timeout_ms))

    def abort_transaction(self, timeout_ms: int | None = None) -> None:
        self._loop.run(self._core.abort_transaction(timeout_ms))

    def partitions_for(self, topic: str) -> set[int]:
        return self._loop.run(self._core.partitions_for(topic))

    def close(self, timeout_ms: int | None = None) -> None:
        if self._loop.loop.is_closed():
            return
        try:
            self._loop.run(self._core.close(timeout_ms))
        finally:
            self._loop.stop()


class KafkaAdmin:
    """A blocking :class:`~kgroup.client.admin.Admin`: every coroutine method becomes blocking."""

    def __init__(self, config=None, **configs):
        self._loop = _LoopThread("kgroup-admin")
        self._core: Admin = self._loop.run(_call(Admin, config=config, **configs))

    def __getattr__(self, name):
        attr = getattr(self._core, name)
        if not asyncio.iscoroutinefunction(attr):
            return attr

        def blocking(*args, **kwargs):
            return self._loop.run(attr(*args, **kwargs))
        return blocking

    def __enter__(self) -> "KafkaAdmin":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if not self._loop.loop.is_closed():
            try:
                self._loop.run(self._core.close())
            finally:
                self._loop.stop()
