"""Check recording and output: one line per check, then one JSON summary line.

Output contract (the Java integration tests parse it):
  ``PASS <name>: <detail>`` / ``FAIL <name>: <detail>`` per check, lines starting with ``#`` for
  context, and last ``{"scenario": ..., "ok": bool, "checks": [{"name", "ok", "detail"}...]}``.
"""

import json
import sys
import threading
from dataclasses import asdict, dataclass
from typing import Optional

from .expect import NO_PAYLOAD, describe
from .wire import Reply


class Abort(Exception):
    """A step the rest of the scenario depends on failed; it is already recorded as a check."""


@dataclass
class Check:
    name: str
    ok: bool
    detail: str = ""


class Report:
    """Thread-safe: concurrent scenarios record from several threads."""

    def __init__(self, scenario: str, out=None):
        self.scenario = scenario
        self.checks: list = []
        self._out = out or sys.stdout
        self._lock = threading.Lock()

    def note(self, text: str) -> None:
        with self._lock:
            print(f"# {text}", file=self._out, flush=True)

    def check(self, name: str, ok: bool, detail: str = "") -> bool:
        ok = bool(ok)
        with self._lock:
            self.checks.append(Check(name, ok, detail))
            print(f"{'PASS' if ok else 'FAIL'} {name}: {detail}", file=self._out, flush=True)
        return ok

    def require(self, name: str, ok: bool, detail: str = "") -> None:
        if not self.check(name, ok, detail):
            raise Abort(name)

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(c.ok for c in self.checks)

    def summary(self) -> str:
        return json.dumps({"scenario": self.scenario, "ok": self.ok,
                           "checks": [asdict(c) for c in self.checks]})

    def finish(self) -> int:
        """Print the JSON line; returns the exit code (0 all passed, 1 otherwise)."""
        with self._lock:
            print(self.summary(), file=self._out, flush=True)
        return 0 if self.ok else 1


def reply_problems(reply: Reply, expected: Optional[bytes]) -> list:
    """What is wrong with ``reply`` against an exact expected payload (``NO_PAYLOAD`` = none)."""
    problems = []
    if reply.frames[:1] != reply.sent[:1]:
        problems.append(f"uid frame {reply.frames[0].hex()} != sent {reply.sent[0].hex()}")
    if len(reply.frames) < 2 or reply.frames[1] != reply.sent[1]:
        got = reply.frames[1].hex() if len(reply.frames) > 1 else "missing"
        problems.append(f"op frame {got} != sent {reply.sent[1].hex()}")
    if expected is NO_PAYLOAD:
        if len(reply.frames) != 2:
            problems.append(f"expected no payload frame, got {len(reply.frames) - 2}: "
                            f"{describe(reply.payload)}")
    else:
        if len(reply.frames) != 3:
            problems.append(f"expected exactly 1 payload frame, got {len(reply.frames) - 2}")
        if reply.payload != expected:
            problems.append(f"expected {describe(expected)}, got {describe(reply.payload)}")
    return problems


def check_reply(report: Report, name: str, reply: Reply, expected: Optional[bytes]) -> bool:
    problems = reply_problems(reply, expected)
    if problems:
        return report.check(name, False, "; ".join(problems))
    return report.check(name, True, f"reply {describe(reply.payload)} in {reply.elapsed_s * 1000:.1f} ms")
