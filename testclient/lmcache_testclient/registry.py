"""The scenario registry: options, the decorator that registers a scenario, and the table. A module of its own so
that scenarios.py and hybrid_scenarios.py both register here without importing each other."""
import random
from dataclasses import dataclass
from typing import Callable

from .report import Report
from .shm_kv import BLOCK_SIZE


@dataclass(frozen=True)
class Options:
    endpoint: str
    chunk_size: int = 256
    seed: int = 0
    timeout_s: float = 10.0
    out_dir: str = ""

    def rng(self, label: str) -> random.Random:
        """An independent, reproducible stream per purpose (str seeds hash deterministically)."""
        return random.Random(f"{self.seed}:{label}")

    @property
    def blocks_per_chunk(self) -> int:
        return self.chunk_size // BLOCK_SIZE


@dataclass(frozen=True)
class Scenario:
    name: str
    help: str
    run: Callable[[Report, Options], None]


SCENARIOS: dict = {}


def scenario(name: str, help: str):
    def register(fn):
        SCENARIOS[name] = Scenario(name, help, fn)
        return fn
    return register
