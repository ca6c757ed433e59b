"""Frozen operation ids (protocol doc §4.1; LMCache ``transport/zmq_impl/wire.py``).

The table is append-only upstream. Ops newer than id 34 travel as their snake_case name (a msgpack
str); pass such a name as a plain ``str`` wherever an ``Op`` is accepted.
"""

import enum


class Op(enum.IntEnum):
    REGISTER_KV_CACHE = 1
    UNREGISTER_KV_CACHE = 2
    REGISTER_Q_CACHE = 3
    UNREGISTER_Q_CACHE = 4
    STORE_Q = 5
    STORE = 6
    RETRIEVE = 7
    LOOKUP = 8
    QUERY_PREFETCH_STATUS = 9
    WAIT_PREFETCH_STATUS = 10
    QUERY_PREFETCH_LOOKUP_HITS = 11
    FREE_LOOKUP_LOCKS = 12
    END_SESSION = 13
    REGISTER_KV_CACHE_ENGINE_DRIVEN_CONTEXT = 14
    UNREGISTER_KV_CACHE_ENGINE_DRIVEN_CONTEXT = 15
    PREPARE_STORE = 16
    COMMIT_STORE = 17
    PREPARE_RETRIEVE = 18
    COMMIT_RETRIEVE = 19
    CLEAR = 20
    GET_CHUNK_SIZE = 21
    PING = 22
    REPORT_BLOCK_ALLOCATION = 23
    NOOP = 24
    CB_REGISTER_ROPE = 25
    CB_UNREGISTER_ROPE = 26
    CB_RETRIEVE_PRE_COMPUTED = 27
    CB_UNIFIED_LOOKUP = 28
    P2P_LOOKUP_AND_LOCK = 29
    P2P_QUERY_LOOKUP_RESULTS = 30
    P2P_UNLOCK_OBJECTS = 31
    GET_EXPERIMENTAL = 32
    CB_PROTOCOL_HANDSHAKE = 33
    POLL_KV_EVENTS = 34

    @property
    def wire_name(self) -> str:
        """The E4 string form of the op (lower-case enum name), e.g. ``"register_kv_cache"``."""
        return self.name.lower()


def op_from_wire(value) -> "Op | str":
    """Map a decoded op frame (int id or str name) back to an ``Op`` where the table knows it."""
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return Op(value)
        except ValueError:
            return str(value)
    if isinstance(value, str):
        try:
            return Op[value.upper()]
        except KeyError:
            return value
    return repr(value)


def op_label(op) -> str:
    """Readable name for logs: ``STORE`` for ``Op.STORE``, the string itself otherwise."""
    return op.name if isinstance(op, Op) else str(op)
