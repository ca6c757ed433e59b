"""A ZeroMQ DEALER on libzmq itself, through ctypes, for the GPU host (Python 3.12, no pyzmq there).

vLLM's worker talks to the server through pyzmq, which is libzmq underneath; the pure-Python ZMTP client (zmtp.py)
spends tens of microseconds per round trip in Python (a syscall per frame, a read per header byte), which the
one-in-flight benchmark would count against the server. This module loads the libzmq that pyzmq's own wheel bundles
(prepare.sh stages the wheel in .device/zmq/; only its two shared libraries are used, so the wheel's Python version
does not matter) and offers zmtp.Dealer's interface: send(frames), recv() -> [bytes], recv_within(seconds), close().

load() returns None when no libzmq is staged, or LMCACHE_BENCH_TRANSPORT=zmtp asks for the pure-Python client;
callers then fall back to zmtp.Dealer.
"""

import ctypes
import errno
import glob
import os
import tempfile
import zipfile

ZMQ_DEALER = 5
ZMQ_SNDMORE = 2
ZMQ_RCVMORE = 13
ZMQ_LINGER = 17
ZMQ_RCVTIMEO = 27
ZMQ_SNDTIMEO = 28
MSG_BYTES = 64  # sizeof(zmq_msg_t)

_here = os.path.dirname(os.path.abspath(__file__))
_lib = None


def _staged_wheel():
    roots = [os.environ.get("LMCACHE_ZMQ_WHEEL_DIR", ""), os.path.join(_here, "..", "..", ".device", "zmq")]
    for root in roots:
        if root:
            found = sorted(glob.glob(os.path.join(root, "pyzmq-*.whl")))
            if found:
                return found[-1]
    return None


def load():
    """libzmq as a ctypes library, or None when no pyzmq wheel is staged (or it does not load here)."""
    global _lib
    if _lib is not None:
        return _lib
    if os.environ.get("LMCACHE_BENCH_TRANSPORT") == "zmtp":  # A/B against the pure-Python client
        return None
    wheel = _staged_wheel()
    if wheel is None:
        return None
    target = tempfile.mkdtemp(prefix="libzmq-")
    with zipfile.ZipFile(wheel) as z:
        names = [n for n in z.namelist() if n.startswith("pyzmq.libs/") and ".so" in n]
        for name in names:
            with open(os.path.join(target, os.path.basename(name)), "wb") as out:
                out.write(z.read(name))
    try:
        # libzmq finds its libsodium through RPATH $ORIGIN, i.e. beside it
        path = next(os.path.join(target, os.path.basename(n)) for n in names if "libzmq" in n)
        lib = ctypes.CDLL(path)
    except (StopIteration, OSError):
        return None
    lib.zmq_ctx_new.restype = ctypes.c_void_p
    lib.zmq_socket.restype = ctypes.c_void_p
    lib.zmq_socket.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.zmq_setsockopt.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
    lib.zmq_getsockopt.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)]
    lib.zmq_connect.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    lib.zmq_send.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int]
    lib.zmq_msg_init.argtypes = [ctypes.c_void_p]
    lib.zmq_msg_recv.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
    lib.zmq_msg_data.restype = ctypes.c_void_p
    lib.zmq_msg_data.argtypes = [ctypes.c_void_p]
    lib.zmq_msg_size.restype = ctypes.c_size_t
    lib.zmq_msg_size.argtypes = [ctypes.c_void_p]
    lib.zmq_msg_more.argtypes = [ctypes.c_void_p]
    lib.zmq_msg_close.argtypes = [ctypes.c_void_p]
    lib.zmq_close.argtypes = [ctypes.c_void_p]
    lib.zmq_ctx_term.argtypes = [ctypes.c_void_p]
    lib.zmq_errno.restype = ctypes.c_int
    lib.zmq_strerror.restype = ctypes.c_char_p
    lib.zmq_strerror.argtypes = [ctypes.c_int]
    _lib = lib
    return lib


class Dealer:
    """zmtp.Dealer's interface on libzmq: one DEALER socket, connected over TCP."""

    def __init__(self, host: str, port: int, timeout: float = 60.0):
        lib = load()
        if lib is None:
            raise OSError("no libzmq staged (.device/zmq/pyzmq-*.whl)")
        self._lib = lib
        self._ctx = lib.zmq_ctx_new()
        self._sock = lib.zmq_socket(self._ctx, ZMQ_DEALER)
        for option, value in ((ZMQ_LINGER, 0), (ZMQ_RCVTIMEO, int(timeout * 1000)), (ZMQ_SNDTIMEO, int(timeout * 1000))):
            v = ctypes.c_int(value)
            self._check(lib.zmq_setsockopt(self._sock, option, ctypes.byref(v), ctypes.sizeof(v)), "setsockopt")
        self._check(lib.zmq_connect(self._sock, f"tcp://{host}:{port}".encode()), "connect")
        self._msg = ctypes.create_string_buffer(MSG_BYTES)

    def _check(self, rc, what):
        if rc < 0:
            errno = self._lib.zmq_errno()
            raise ConnectionError(f"zmq_{what}: {self._lib.zmq_strerror(errno).decode()}")
        return rc

    def send(self, frames) -> None:
        last = len(frames) - 1
        for i, frame in enumerate(frames):
            self._check(self._lib.zmq_send(self._sock, frame, len(frame), ZMQ_SNDMORE if i < last else 0), "send")

    def recv(self):
        lib, msg = self._lib, self._msg
        frames = []
        while True:
            lib.zmq_msg_init(msg)
            self._check(lib.zmq_msg_recv(msg, self._sock, 0), "msg_recv")
            frames.append(ctypes.string_at(lib.zmq_msg_data(msg), lib.zmq_msg_size(msg)))
            more = lib.zmq_msg_more(msg)
            lib.zmq_msg_close(msg)
            if not more:
                return frames

    def recv_within(self, timeout_s: float):
        """recv(), or None when no message arrives within timeout_s (a multipart message arrives whole or not at all, so a
        timeout never splits one). For a loop that also has to notice a stop flag (kv_subscriber.py)."""
        ms = ctypes.c_int(max(0, int(timeout_s * 1000)))
        self._check(self._lib.zmq_setsockopt(self._sock, ZMQ_RCVTIMEO, ctypes.byref(ms), ctypes.sizeof(ms)), "setsockopt")
        try:
            return self.recv()
        except ConnectionError:
            if self._lib.zmq_errno() == errno.EAGAIN:
                return None
            raise

    def close(self) -> None:
        self._lib.zmq_close(self._sock)
        self._lib.zmq_ctx_term(self._ctx)


def dealer(host: str, port: int, timeout: float = 60.0):
    """libzmq's DEALER where one is staged, the pure-Python ZMTP one otherwise."""
    if load() is not None:
        return Dealer(host, port, timeout)
    import zmtp
    return zmtp.Dealer(host, port, timeout)


def transport() -> str:
    """Which client dealer() gives: for the benchmark's JSON."""
    return "libzmq (ctypes)" if load() is not None else "pure-Python ZMTP"
