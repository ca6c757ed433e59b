"""Expected reply payloads, as exact bytes (the client's decoder is strict; protocol doc §0.4).

``NO_PAYLOAD`` stands for "the reply is [uid, op] only": what None-typed ops must answer.
"""

from .codec import encode
from .messages import ZERO_EVENT

NO_PAYLOAD = None

TRUE = b"\xc3"                 # PING
NOOP_OK = encode("OK")         # a2 4f 4b
EMPTY_LIST = encode([])        # 90: GET_EXPERIMENTAL with the KV-event log off
#: GET_EXPERIMENTAL while the KV-event log is on (the default): the channel's capability names (kv-events.md)
KV_EVENT_CAPABILITIES = encode(["kv_event_stream", "kv_events"])


def int_reply(n: int) -> bytes:
    """GET_CHUNK_SIZE (``cd 01 00`` for 256), QUERY_PREFETCH_STATUS (``02``, ``00``)."""
    return encode(n)


def transfer_reply(ok: bool, event_handle: bytes = ZERO_EVENT) -> bytes:
    """STORE/RETRIEVE: ``92 c4 40 <64-byte event> c3|c2`` (tuple[bytes, bool])."""
    return encode([event_handle, ok])


STORE_OK = transfer_reply(True)
STORE_FAILED = transfer_reply(False)


def describe(payload) -> str:
    """Short hex for check details; long frames are cut in the middle."""
    if payload is None:
        return "<no payload frame>"
    text = payload.hex(" ")
    return text if len(payload) <= 24 else f"{payload[:12].hex(' ')} … {payload[-6:].hex(' ')} ({len(payload)} bytes)"
