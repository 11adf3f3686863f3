"""A response given later: the one way the broker answers a request it cannot answer at once.

Who returns one: the group runtime (an OffsetCommit waiting for its fsync, a parked
JoinGroup/SyncGroup, a multi-group request gathered from several shards), the data path (a
group-commit flush wait, a parked Fetch) and the handlers built on them (an acks=-1 Produce, an
OffsetCommit merged with its unknown topics). The server listens to it and writes the response
in its request's slot when it is answered.

Why not an asyncio future: one group commit answers hundreds of pipelined requests, and a future
per request costs its creation, a done callback, and a loop callback (``call_soon``) per answer
before the server even sees it. A PendingResponse calls its one listener directly when answered.

``flush_only``: the request has done everything it does (its records are appended and replayed,
visible to every later request) and only its answer waits, for the group-commit fsync of those
records, or, for an acks=-1 Produce in a cluster, for the ISR to have them (the records are in
the leader's log; consumers see them once the high watermark passes them, as they would behind
the answer). The server keeps dispatching the connection's later requests behind such a request;
behind any other unanswered one (a parked JoinGroup, SyncGroup or Fetch) it mutes the
connection, as Kafka's socket server does (see server.py).
"""
from __future__ import annotations


class PendingResponse:
    __slots__ = ("response", "error", "answered", "listener", "flush_only")

    def __init__(self, flush_only: bool = False):
        self.flush_only = flush_only    # waits only for the fsync of what it did (see above)
        self.response = None
        self.error = None           # an exception instead of a response: the server closes the connection
        self.answered = False
        self.listener = None        # fn(self), called once when answered

    # -- the answering side --------------------------------------------------------------------
    def answer(self, response) -> None:
        """Give the response; the first answer (or failure) wins, later ones are ignored."""
        if not self.answered:
            self.response = response
            self.answered = True
            if self.listener is not None:   # none yet when answered at once (the common case)
                self._notify()

    def fail(self, error: BaseException) -> None:
        if not self.answered:
            self.error = error
            self.answered = True
            self._notify()

    def _notify(self) -> None:
        listener = self.listener
        if listener is not None:
            self.listener = None
            listener(self)

    # -- the listening side --------------------------------------------------------------------
    def listen(self, fn) -> None:
        """Call ``fn(self)`` once answered (now, if it already is). One listener at a time."""
        if self.answered:
            fn(self)
        else:
            self.listener = fn

    def stop_listening(self) -> None:
        """The requester went away: nobody listens any more (the operation itself goes on)."""
        self.listener = None

    # -- combining ------------------------------------------------------------------------------
    def then(self, fn=None, to: PendingResponse | None = None) -> PendingResponse:
        """Pass this answer on, once given (now, if it already is): ``to`` is answered with
        ``fn(response)`` (the response itself without ``fn``); this one's failure, or ``fn``
        raising, fails it. ``to`` defaults to a new PendingResponse that waits for the same
        reason (this one's ``flush_only``). Returns ``to``."""
        if to is None:
            to = PendingResponse(self.flush_only)

        def relay(answered):
            if answered.error is not None:
                to.fail(answered.error)
            elif fn is None:
                to.answer(answered.response)
            else:
                try:
                    response = fn(answered.response)
                except Exception as e:
                    to.fail(e)
                    return
                to.answer(response)
        self.listen(relay)
        return to

    @staticmethod
    def gather(parts: list[PendingResponse], combine):
        """``combine([part responses])``, in the order of ``parts``: returned at once when every
        part is answered already (the common case: nothing to listen to), else a PendingResponse
        answered when the last part is. A failed part (or ``combine`` raising) fails the whole."""
        waiting = 0
        for part in parts:
            if not part.answered:
                waiting += 1
            elif part.error is not None:
                failed = PendingResponse()
                failed.fail(part.error)
                return failed
        if not waiting:
            return combine([part.response for part in parts])
        # Waits only for fsyncs if every part still waiting does.
        gathered = PendingResponse(all(p.flush_only for p in parts if not p.answered))

        def part_answered(part):
            nonlocal waiting
            if gathered.answered:
                return
            if part.error is not None:
                gathered.fail(part.error)
                return
            waiting -= 1
            if not waiting:
                try:
                    gathered.answer(combine([p.response for p in parts]))
                except Exception as e:
                    gathered.fail(e)

        for part in parts:
            if not part.answered:
                part.listen(part_answered)
        return gathered
