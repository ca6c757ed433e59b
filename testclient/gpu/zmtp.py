"""A minimal ZeroMQ DEALER over ZMTP 3.0 (NULL security), for hosts without pyzmq (the GPU host).

Enough for LMCache's request/reply pattern: connect, handshake as a DEALER, send multipart
messages, receive multipart replies. Frames: flags (MORE=1, LONG=2, COMMAND=4), a 1- or 8-byte
size, the body.
"""

import select
import socket
import struct

MORE, LONG, COMMAND = 0x01, 0x02, 0x04


class Dealer:
    def __init__(self, host: str, port: int, timeout: float = 60.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        greeting = b"\xff" + b"\x00" * 8 + b"\x7f" + bytes([3, 0]) + b"NULL".ljust(20, b"\x00") + b"\x00" + b"\x00" * 31
        self.sock.sendall(greeting)
        peer = self._read(64)
        if peer[0] != 0xFF or peer[9] != 0x7F or peer[10] < 3:
            raise ConnectionError(f"not a ZMTP 3 peer: {peer[:12].hex()}")
        self._send_frame(self._ready(), COMMAND)
        flags, body = self._read_frame()
        if not flags & COMMAND or not body.startswith(b"\x05READY"):
            raise ConnectionError("the peer did not answer READY")

    @staticmethod
    def _ready() -> bytes:
        name, value = b"Socket-Type", b"DEALER"
        return b"\x05READY" + bytes([len(name)]) + name + struct.pack(">I", len(value)) + value

    def _read(self, n: int) -> bytes:
        data = bytearray()
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("connection closed")
            data += chunk
        return bytes(data)

    def _send_frame(self, body: bytes, flags: int) -> None:
        if len(body) > 255:
            self.sock.sendall(bytes([flags | LONG]) + struct.pack(">Q", len(body)) + body)
        else:
            self.sock.sendall(bytes([flags, len(body)]) + body)

    def _read_frame(self):
        flags = self._read(1)[0]
        size = struct.unpack(">Q", self._read(8))[0] if flags & LONG else self._read(1)[0]
        return flags, self._read(size)

    def send(self, frames) -> None:
        for i, frame in enumerate(frames):
            self._send_frame(frame, MORE if i < len(frames) - 1 else 0)

    def recv(self):
        frames = []
        while True:
            flags, body = self._read_frame()
            if flags & COMMAND:
                continue  # PING/PONG commands carry nothing for us
            frames.append(body)
            if not flags & MORE:
                return frames

    def recv_within(self, timeout_s: float):
        """recv(), or None when nothing is readable within timeout_s. Only the wait for the first byte is bounded: once a
        message has begun, it is read whole with the connection's own timeout, so a frame is never cut."""
        readable, _, _ = select.select([self.sock], [], [], max(0.0, timeout_s))
        return self.recv() if readable else None

    def close(self) -> None:
        self.sock.close()
