"""A mutation fuzzer for the Kafka wire protocol, run against a live broker.

Seeds are real requests recorded from confluent-kafka, kafka-python and aiokafka
(`seeds/*.jsonl`, made by `record_seeds.py`). Half the requests sent are structured
mutations (`structured.py`: decoded, one value changed, encoded again), so they reach the
handlers; the other half are one seed with one to three byte-level mutations: bit flips, interesting bytes, extreme 16/32/64-bit integers and 5-byte
varints written over any position (which is how length and count fields get changed),
truncation, insertion, deletion and duplication of chunks, a splice of two seeds, and a
change of api version under an unchanged body. The size prefix is then made to match,
so every frame is read as one request by the broker (a wrong size prefix is a separate,
simpler case covered by tests/integration/test_hostile_input.py).

Many connections run at once. Each sends a few mutated frames pipelined, then an
ApiVersions request as a sentinel, and reads responses until the sentinel's arrives, the
broker closes the connection (then a new one is opened) or a deadline passes (a fetch
whose wait was mutated to hours; the connection is dropped). A request counts as sent
once the broker has answered it or closed the connection on it.
"""

from __future__ import annotations

import asyncio
import json
import random
import struct
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from headwater.wire.client import RawClient
from tests.fuzz.generated import RequestGenerator
from tests.fuzz.structured import StructuredMutator, decode_seeds

SEEDS_DIR = Path(__file__).parent / "seeds"
_SIZE = struct.Struct(">i")
SENTINEL_ID = -7


def load_seeds(directory: Path = SEEDS_DIR) -> list[bytes]:
    """Every recorded frame (size prefix included), in a stable order."""
    frames = []
    for path in sorted(directory.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            frames.append(bytes.fromhex(json.loads(line)["frame"]))
    return frames


_INTERESTING_8 = [0x00, 0x01, 0x7F, 0x80, 0xFF]
_INTERESTING_INTS = [0, 1, -1, -2, 0x7F, 0x80, 0xFF, 0x7FFF, -0x8000, 0xFFFF, 0x7FFFFFFF,
                     -0x80000000, 0x10000, 1 << 20, 1 << 24]
_VARINTS = [b"\xff\xff\xff\xff\x0f", b"\xff\xff\xff\xff\x07", b"\x80\x80\x80\x80\x08",
            b"\xfe\xff\xff\xff\x0f", b"\xff\xff\x03", b"\x80\x01", b"\x00", b"\x01"]


class Mutator:
    """Deterministic for a given RNG: the same seed gives the same campaign."""

    def __init__(self, seeds: list[bytes], rng: random.Random,
                 structured: float = 0.5, generator: RequestGenerator | None = None,
                 generated: float = 0.0) -> None:
        self.seeds = [s[4:] for s in seeds]  # bodies without the size prefix
        self.rng = rng
        self.structured = StructuredMutator(decode_seeds(seeds), rng)
        self.structured_share = structured
        self.generator = generator
        self.generated_share = generated if generator is not None else 0.0
        self.ops = [self.flip_bits, self.interesting_byte, self.extreme_int,
                    self.huge_varint, self.truncate, self.insert, self.delete,
                    self.duplicate, self.splice, self.other_version]
        self.used: Counter[str] = Counter()

    def frame(self) -> bytes:
        rng = self.rng
        if self.generator is not None and rng.random() < self.generated_share:
            frame = self.generator.frame()
            if frame is not None:
                self.used["generated"] += 1
                return frame
        if rng.random() < self.structured_share:
            frame = self.structured.frame()
            if frame is not None:
                self.used["structured"] += 1
                return frame
        data = bytearray(rng.choice(self.seeds))
        for _ in range(rng.choice((1, 1, 1, 2, 3))):
            op = rng.choice(self.ops)
            self.used[op.__name__] += 1
            op(data)
        return _SIZE.pack(len(data)) + bytes(data)

    def _pos(self, data: bytearray, width: int = 1) -> int:
        # Mostly past the fixed header (api key, version, correlation id): the body and
        # the client id are where the lengths are.
        low = 8 if len(data) > 8 + width and self.rng.random() < 0.9 else 0
        return self.rng.randint(low, max(low, len(data) - width))

    def flip_bits(self, data: bytearray) -> None:
        if data:
            for _ in range(self.rng.randint(1, 8)):
                data[self._pos(data)] ^= 1 << self.rng.randrange(8)

    def interesting_byte(self, data: bytearray) -> None:
        if data:
            data[self._pos(data)] = self.rng.choice(_INTERESTING_8)

    def extreme_int(self, data: bytearray) -> None:
        width = self.rng.choice((2, 4, 4, 8))
        if len(data) < width:
            return
        at = self._pos(data, width)
        value = self.rng.choice(_INTERESTING_INTS) if width < 8 else self.rng.choice(
            [0, -1, 1 << 62, -(1 << 63), (1 << 63) - 1])
        value &= (1 << (8 * width)) - 1
        data[at:at + width] = value.to_bytes(width, "big")

    def huge_varint(self, data: bytearray) -> None:
        at = self._pos(data)
        data[at:at + 1] = self.rng.choice(_VARINTS)

    def truncate(self, data: bytearray) -> None:
        del data[self.rng.randint(0, len(data)):]

    def insert(self, data: bytearray) -> None:
        at = self._pos(data)
        data[at:at] = self.rng.randbytes(self.rng.randint(1, 16))

    def delete(self, data: bytearray) -> None:
        if data:
            at = self._pos(data)
            del data[at:at + self.rng.randint(1, 16)]

    def duplicate(self, data: bytearray) -> None:
        if data:
            at = self._pos(data)
            chunk = data[at:at + self.rng.randint(1, 64)]
            where = self._pos(data)
            data[where:where] = chunk

    def splice(self, data: bytearray) -> None:
        other = self.rng.choice(self.seeds)
        cut = self._pos(data)
        data[cut:] = other[self.rng.randint(0, len(other)):]

    def other_version(self, data: bytearray) -> None:
        if len(data) >= 4:
            data[2:4] = self.rng.randint(0, 17).to_bytes(2, "big")


def advertised_apis(host: str, port: int) -> list[tuple[int, int, int]]:
    """(api key, min, max version) of every API the broker advertises."""
    client = RawClient(host, port)
    try:
        resp = client.request(18, 3, {"client_software_name": "fuzz",
                                       "client_software_version": "1"})
    finally:
        client.close()
    return [(a.api_key, a.min_version, a.max_version) for a in resp.api_keys]


@dataclass
class CampaignStats:
    sent: int = 0          # mutated requests the broker answered or closed on
    answered: int = 0      # ... of which it answered
    closed: int = 0        # connections the broker closed
    timeouts: int = 0      # connections dropped by us (a long wait)
    ops: Counter[str] = field(default_factory=Counter)


_SENTINEL = (lambda body: _SIZE.pack(len(body)) + body)(
    struct.pack(">hhih", 18, 0, SENTINEL_ID, 4) + b"fuzz")


async def _worker(host: str, port: int, mutator: Mutator, stats: CampaignStats,
                  budget: list[int], pipeline: int, deadline_s: float) -> None:
    writer = None
    try:
        while budget[0] > 0:
            reader, writer = await asyncio.open_connection(host, port)
            while budget[0] > 0:
                count = min(pipeline, budget[0])
                budget[0] -= count
                frames = []
                for i in range(count):
                    f = bytearray(mutator.frame())
                    if len(f) >= 12:  # our own correlation ids: 0..count-1
                        f[8:12] = struct.pack(">i", i)
                    frames.append(bytes(f))
                writer.write(b"".join(frames) + _SENTINEL)
                outcome = await _read_until_sentinel(reader, count, deadline_s)
                stats.answered += outcome[0]
                if outcome[1] == "sentinel":
                    stats.sent += count
                    continue
                stats.sent += outcome[0] + 1  # the request the broker closed on
                budget[0] += count - outcome[0] - 1  # the rest were never read
                if outcome[1] == "closed":
                    stats.closed += 1
                else:
                    stats.timeouts += 1
                break
            writer.close()
            writer = None
    finally:
        if writer is not None:
            writer.close()


async def _read_until_sentinel(reader: asyncio.StreamReader, count: int,
                               deadline_s: float) -> tuple[int, str]:
    """(responses to mutated frames, 'sentinel' | 'closed' | 'timeout')."""
    answered = 0
    try:
        async with asyncio.timeout(deadline_s):
            while True:
                size = _SIZE.unpack(await reader.readexactly(4))[0]
                body = await reader.readexactly(size)
                if _SIZE.unpack_from(body, 0)[0] == SENTINEL_ID:
                    return answered, "sentinel"
                answered += 1
    except (asyncio.IncompleteReadError, ConnectionError):
        return answered, "closed"
    except TimeoutError:
        return min(answered, count - 1), "timeout"


async def run_campaign(host: str, port: int, requests: int, seed: int,
                       connections: int = 16, pipeline: int = 4,
                       deadline_s: float = 2.0) -> CampaignStats:
    """Send `requests` mutated requests; returns what happened to them. A third are
    generated from the schema of every API the broker advertises (`generated.py`), the
    rest mutate recorded seeds (half of those structurally)."""
    rng = random.Random(seed)
    generator = RequestGenerator(advertised_apis(host, port), rng)
    mutator = Mutator(load_seeds(), rng, generator=generator, generated=1 / 3)
    stats = CampaignStats()
    budget = [requests]
    await asyncio.gather(*(_worker(host, port, mutator, stats, budget, pipeline, deadline_s)
                           for _ in range(connections)))
    stats.ops = mutator.used
    return stats
