"""ZeroMQ DEALER client: the framing of LMCache's ``MessageQueueClient`` (protocol doc §2.2).

Request frames: ``[msgpack(uid), msgpack(op), msgpack(payload_0), ...]``; reply frames:
``[uid, op]`` or ``[uid, op, payload]``. Replies are matched to requests by the decoded uid, so
they may come back in any order; whether uid and op were echoed *byte for byte* is reported on
the reply (``echo_ok``) for the caller to assert.

One socket per ``Client``, one uid counter per client starting at 0, like the real client. A
``Client`` is not thread-safe (neither are ZeroMQ sockets): use one per thread.
Every wait has a deadline and raises ``ReplyTimeout``; nothing here blocks forever.
"""

import time
from dataclasses import dataclass, field
from typing import Iterable, Optional, Sequence

import zmq

from .codec import decode, encode
from .protocol import Request

DEFAULT_TIMEOUT_S = 10.0


class WireError(Exception):
    """Transport-level failure: the request could not be sent or no reply came in time."""


class ReplyTimeout(WireError):
    pass


@dataclass
class Reply:
    uid: int
    frames: list                      # as received: [uid, op] or [uid, op, payload, ...]
    sent: list                        # the request frames, for echo checks
    elapsed_s: float = 0.0

    @property
    def payload(self) -> Optional[bytes]:
        """The reply frame, or None when the server sent only [uid, op] (a None result)."""
        return self.frames[2] if len(self.frames) >= 3 else None

    @property
    def echo_ok(self) -> bool:
        return self.frames[:2] == self.sent[:2]

    @property
    def extra_frames(self) -> int:
        return max(0, len(self.frames) - 3)

    def value(self):
        """Decoded payload (untyped); None when there is no payload frame."""
        return None if self.payload is None else decode(self.payload)


@dataclass
class _Pending:
    label: str
    sent: list
    sent_at: float = field(default_factory=time.monotonic)


class Client:
    """One DEALER connection to the server."""

    def __init__(self, endpoint: str, context: Optional[zmq.Context] = None,
                 timeout_s: float = DEFAULT_TIMEOUT_S):
        self.endpoint = endpoint
        self.timeout_s = timeout_s
        self._ctx = context or zmq.Context.instance()
        self._sock = self._ctx.socket(zmq.DEALER)
        # LINGER 0: closing never waits for unsent frames; SNDTIMEO: a full pipe raises, not hangs.
        self._sock.setsockopt(zmq.LINGER, 0)
        self._sock.setsockopt(zmq.SNDTIMEO, int(timeout_s * 1000))
        # The newest LMCache client sets these two; older ones set none.
        self._sock.setsockopt(zmq.CONNECT_TIMEOUT, 5000)
        self._sock.setsockopt(zmq.RECONNECT_IVL_MAX, 1000)
        self._sock.connect(endpoint)
        self._next_uid = 0
        self._pending: dict[int, _Pending] = {}
        self._arrived: dict[int, Reply] = {}
        self.strays: list = []        # replies nobody waits for (unknown uid, undecodable uid)

    # --- sending ---

    def next_uid(self) -> int:
        uid = self._next_uid
        self._next_uid += 1
        return uid

    def submit(self, request: Request) -> int:
        """Send without waiting; returns the uid to ``wait`` for."""
        uid = self.next_uid()
        frames = [encode(uid), encode(request.op)] + [encode(p) for p in request.payloads]
        self._send(frames, uid, request.label)
        return uid

    def send_raw(self, frames: Sequence[bytes], label: str = "raw") -> Optional[int]:
        """Send arbitrary frames (bad-input tests). If frame 0 decodes as an int uid, a reply to
        it can be awaited with ``wait``; the returned uid is then that int, else None."""
        frames = [bytes(f) for f in frames]
        uid = None
        if frames:
            try:
                decoded = decode(frames[0])
                if isinstance(decoded, int) and not isinstance(decoded, bool):
                    uid = decoded
            except Exception:
                uid = None
        self._send(frames, uid, label)
        return uid

    def _send(self, frames: list, uid: Optional[int], label: str) -> None:
        try:
            self._sock.send_multipart(frames)
        except zmq.Again:
            raise WireError(f"{label}: could not send to {self.endpoint} within "
                            f"{self.timeout_s:.1f}s (send queue full; is the server reading?)")
        if uid is not None:
            self._pending[uid] = _Pending(label, frames)

    # --- receiving ---

    def wait(self, uid: int, timeout_s: Optional[float] = None) -> Reply:
        return self.wait_all([uid], timeout_s)[uid]

    def wait_all(self, uids: Iterable[int], timeout_s: Optional[float] = None) -> dict:
        """Collect the replies of several requests, in whatever order they arrive."""
        wanted = list(uids)
        timeout_s = self.timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout_s
        while missing := [u for u in wanted if u not in self._arrived]:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                names = ", ".join(f"uid {u} ({self._pending[u].label})" if u in self._pending
                                  else f"uid {u}" for u in missing)
                raise ReplyTimeout(f"no reply from {self.endpoint} within {timeout_s:.1f}s "
                                   f"for {names}")
            if self._sock.poll(int(remaining * 1000) + 1, zmq.POLLIN):
                self._receive_one()
        return {u: self._arrived.pop(u) for u in wanted}

    def wait_frames(self, uid: int, last, timeout_s: Optional[float] = None) -> list:
        """Every reply of a request answered with several frames under its uid (LMCache's ``HandlerType.STREAMING``), up to
        and including the first for which ``last(reply)`` is true: the request stays registered after each earlier frame, as
        ``LayerwiseRawFuture.set_result`` re-arms itself (``futures_layerwise.py@3ed3c8ba``). ``timeout_s`` bounds each frame."""
        pending = self._pending.get(uid)
        frames = []
        while True:
            reply = self.wait(uid, timeout_s)
            frames.append(reply)
            if last(reply):
                return frames
            self._pending[uid] = pending

    def _receive_one(self) -> None:
        frames = self._sock.recv_multipart(zmq.NOBLOCK)
        try:
            uid = decode(frames[0]) if frames else None
        except Exception:
            uid = None
        pending = self._pending.pop(uid, None) if isinstance(uid, int) else None
        if pending is None:
            self.strays.append(frames)
            return
        self._arrived[uid] = Reply(uid, frames, pending.sent, time.monotonic() - pending.sent_at)

    def drain(self, window_s: float) -> list:
        """Receive for ``window_s`` seconds; returns the frames of replies nobody waited for."""
        deadline = time.monotonic() + window_s
        while (remaining := deadline - time.monotonic()) > 0:
            if self._sock.poll(int(remaining * 1000) + 1, zmq.POLLIN):
                self._receive_one()
        strays, self.strays = self.strays, []
        return strays

    # --- convenience ---

    def call(self, request: Request, timeout_s: Optional[float] = None) -> Reply:
        return self.wait(self.submit(request), timeout_s)

    def request(self, op, payloads: Sequence = (), timeout_s: Optional[float] = None) -> Reply:
        """``op`` is an ``Op`` (sent as its int id) or a str op name; returns the raw reply."""
        return self.call(Request(op, tuple(payloads)), timeout_s)

    def close(self) -> None:
        self._sock.close(linger=0)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

