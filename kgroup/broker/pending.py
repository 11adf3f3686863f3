"""A response given later: the coordinator runtime's handle on a request it could not answer at
once (an OffsetCommit waiting for its fsync, a parked JoinGroup/SyncGroup).

Why not an asyncio future: one group commit answers hundreds of pipelined OffsetCommits, and a
future per request costs its creation, a done callback, and a loop callback (``call_soon``) per
answer before the server even sees it. A PendingResponse calls its one listener (the server's
slot) directly when answered. It quacks like a finished future for the server's slot code
(``done``/``cancelled``/``exception``/``result``/``cancel``) and can be awaited, for callers that
combine answers (multi-group requests, the OffsetCommit merge of unknown topics).
"""
from __future__ import annotations

import asyncio


class PendingResponse:
    __slots__ = ("response", "error", "answered", "listener")

    def __init__(self):
        self.response = None
        self.error = None           # an exception instead of a response: the server closes the connection
        self.answered = False
        self.listener = None        # fn(self), called once when answered

    # -- the runtime's side --------------------------------------------------------------------
    def answer(self, response) -> None:
        """Give the response (the first answer wins, as set_result on a done future is skipped)."""
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

    # -- the server's side ---------------------------------------------------------------------
    def listen(self, fn) -> None:
        """Call ``fn(self)`` once answered (now, if it already is)."""
        if self.answered:
            fn(self)
        else:
            self.listener = fn

    def done(self) -> bool:
        return self.answered

    def cancel(self) -> None:
        """The requester went away: nobody listens any more (the operation itself goes on)."""
        self.listener = None

    @staticmethod
    def cancelled() -> bool:
        return False

    def exception(self):
        return self.error

    def result(self):
        if self.error is not None:
            raise self.error
        return self.response

    def __await__(self):
        if not self.answered:
            fut = asyncio.get_running_loop().create_future()
            self.listener = lambda _: fut.done() or fut.set_result(None)
            yield from fut
        return self.result()
