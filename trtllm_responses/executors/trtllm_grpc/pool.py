"""A pool of TensorRT-LLM gRPC engines (``serve --engine_url`` repeated, ``--engine_urls_file``): which engine
runs a generation, which engines are healthy, engines joining and leaving while serving
(docs/a-fleet-of-engines.md#a-pool-of-engines).

**Placement** (:meth:`EnginePool.choose`): a generation with a session key goes to the first engine of the
key's rendezvous order (highest-random-weight hashing: each engine's weight is a hash of the engine's URL and
the key; the order is by weight) that is healthy, not draining, not avoided, and under the load bound; one
without a key goes to the least loaded. The order depends only on the key and the set of URLs, so every
frontend and every replica in front of the same engines sends a session to the same engine, and an engine
joining or leaving moves only the sessions it wins or held. The **bound** (consistent hashing with bounded
loads, Mirrokni, Thorup and Zadimoghaddam 2018): an engine whose in-flight generations are at least
``ceil(c * (m + 1) / n)`` (``m`` in flight on the ``n`` placeable engines, this one counted) is passed over for
the next in the key's order, so a hot set of sessions that hashes to one engine spills to the next ones
instead of queueing there. :data:`LOAD_FACTOR` ``c`` = 1.25: at most 25 % above the mean (HAProxy's
``hash-balance-factor 125``, Vimeo's deployment of the paper); the paper bounds the sessions moved per
arrival by O(1/(c-1)^2), so a smaller ``c`` balances tighter but breaks more sessions' prefixes. Load is
this process's in-flight generations per engine (:meth:`EnginePool.running`), not the engine's.

**Health**: each engine is asked ``HealthCheck`` every ``interval`` seconds while healthy; an engine that
fails it, or that a generation found unreachable (:meth:`EnginePool.lost`), leaves placement and is asked
again after ``interval`` / 4 (at most 1 s), doubling to :data:`RECHECK_CAP_S`, and rejoins when it answers
``OK``. An engine not reached yet (down at start, or added) is connected and described the same way, then
checked (``check``: the executor's agreement on release, vocabulary and window) before it takes anything.

**Joining and leaving** (:meth:`EnginePool.update`, on SIGHUP): URLs new to the set are connected as above;
URLs gone from it drain: out of placement at once, closed when their last generation ends. What a pool is
configured with, flags and a file read again on SIGHUP, is an :class:`EngineList` (one a pool: the whole turns'
``--engine_url``/``--engine_urls_file``, or each side's, disaggregated).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import math
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from ..base import ExecutorError
from .engine import HEALTH_TIMEOUT_S, RECONNECT_CAP_S, Engine, EngineInfo, GrpcEngine
from .messages import engine_target

__all__ = [
    "LOAD_FACTOR",
    "RECHECK_CAP_S",
    "EngineList",
    "EnginePool",
    "load_bound",
    "place",
    "read_urls_file",
    "rendezvous_order",
]

logger = logging.getLogger(__name__)

#: ``c`` of the load bound (module docstring): an engine takes a session's generation while it runs fewer
#: than ``ceil(c * mean)`` (the mean counting this generation).
LOAD_FACTOR = 1.25
#: The longest wait between two checks of an engine out of placement (the channel's own reconnection backs
#: off no longer: ``engine.RECONNECT_CAP_S``).
RECHECK_CAP_S = RECONNECT_CAP_S
#: Health checks in a row that may time out before an engine in placement leaves it. A timed-out check is a busy
#: engine (or a busy frontend) as often as a dead one, and the only engine of a pool leaving placement fails every
#: turn: so, as Kubernetes' probes (``failureThreshold`` 3) and Envoy's ``unhealthy_threshold`` do, slowness must
#: repeat. An answer that says not OK, a refused connection, or a generation that fails takes it out at once.
SLOW_CHECKS_TO_LEAVE = 3
#: How a timed-out check reads (``engine.describe`` of gRPC's status).
_TIMED_OUT = "DEADLINE_EXCEEDED"

#: The executor's check of an engine's facts before it joins: ExecutorError saying why it cannot.
Check = Callable[[str, EngineInfo], None]


def rendezvous_order(key: str, urls: Iterable[str]) -> list[str]:
    """``urls`` by their rendezvous weight for ``key``, highest first (blake2b of URL and key: the same
    order in every process, whatever order the URLs were given in)."""

    def weight(url: str) -> tuple[int, str]:
        digest = hashlib.blake2b(f"{url}\0{key}".encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big"), url

    return sorted(urls, key=weight, reverse=True)


def load_bound(loads: Mapping[str, int], factor: float = LOAD_FACTOR) -> int:
    """The in-flight generations an engine of ``loads`` may hold before it is passed over:
    ``ceil(factor * (total + 1) / engines)``, at least 1."""
    return max(1, math.ceil(factor * (sum(loads.values()) + 1) / len(loads)))


def place(key: str | None, loads: Mapping[str, int], factor: float = LOAD_FACTOR, turn: int = 0) -> str:
    """The engine (a URL of ``loads``: engine → in-flight generations; not empty) a generation goes to:
    for a ``key``, the first of its rendezvous order under :func:`load_bound`; without one, the least
    loaded (ties taken in turn, ``turn`` counting the generations placed)."""
    if key is None:
        urls = sorted(loads)
        least = min(loads.values())
        tied = [url for url in urls if loads[url] == least]
        return tied[turn % len(tied)]
    bound = load_bound(loads, factor)
    order = rendezvous_order(key, loads)
    # Some engine is under the bound: the bounds sum to at least factor * (total + 1) > total.
    return next((url for url in order if loads[url] < bound), order[0])


def read_urls_file(path: str) -> list[str]:
    """The engine URLs of an ``--engine_urls_file``: one a line, blank lines and ``#`` comments (whole lines
    or a line's tail) skipped; ValueError naming the line of a malformed one (the file is read whole or not at
    all). OSError when it cannot be read."""
    with open(path, encoding="utf-8") as file:
        lines = file.read().splitlines()
    urls: list[str] = []
    for number, line in enumerate(lines, 1):
        url = line.split("#", 1)[0].strip()
        if not url:
            continue
        try:
            engine_target(url)
        except ValueError as exc:
            raise ValueError(f"{path}, line {number}: {exc}") from None
        if url not in urls:
            urls.append(url)
    return urls


class EngineList:
    """The engines one pool is configured with: ``urls`` (a flag's, repeated: ``flag`` names it in messages),
    kept whatever the file says, then those of the file at ``path`` (None: no file), read by :meth:`read` at
    start and again on each reload."""

    __slots__ = ("flag", "path", "urls")

    def __init__(self, urls: Sequence[str], path: str | None, flag: str) -> None:
        self.urls = list(urls)
        self.path = path
        self.flag = flag

    @property
    def given(self) -> bool:
        """Whether any engine was configured: a URL or a file."""
        return bool(self.urls) or self.path is not None

    def read(self) -> list[str]:
        """The flag's URLs, then the file's (read now); OSError or ValueError when the file does not read or
        no engine is left."""
        listed = read_urls_file(self.path) if self.path is not None else []
        urls = list(dict.fromkeys([*self.urls, *listed]))
        if urls:
            return urls
        if self.path is None:
            raise ValueError(f"no engine: pass {self.flag} grpc://HOST:PORT")
        raise ValueError(
            f"{self.path} lists no engine, and no {self.flag} is given: list one there (grpc://HOST:PORT, one a "
            f"line) or pass {self.flag} grpc://HOST:PORT"
        )

    def reread(self, what: str) -> list[str] | None:
        """:meth:`read` for a reload: the URLs, or None (logged: ``what`` not changed) when the file does not
        read or leaves no engine."""
        try:
            return self.read()
        except (OSError, ValueError) as exc:
            logger.error("%s not changed: cannot use %s: %s", what, self.path, exc)
            return None


class _Refused(ExecutorError):
    """An engine reached whose facts the executor's check refused (not one that could not be reached)."""


@dataclass(slots=True)
class _Member:
    """One engine of the pool and what the pool knows of it. ``why``: why it is out of placement (None: in);
    ``described``: it connected and passed ``check``; ``draining``: removed, closed once ``load`` is 0."""

    engine: Engine
    why: str | None = "not reached yet"
    described: bool = False
    draining: bool = False
    load: int = 0
    recheck: float = 0.0  # seconds until the next check while out of placement (backoff)
    slow: int = 0  # health checks in a row that timed out while in placement
    watch: asyncio.Task[None] | None = field(default=None, repr=False)
    woken: asyncio.Event = field(default_factory=asyncio.Event, repr=False)


class EnginePool:
    """Engines by URL (module docstring): :meth:`start`, then :meth:`choose` and :meth:`running` per
    generation; :meth:`update` to change the set; :meth:`close` at the end.

    ``check``: called with each engine's facts before it joins (ExecutorError: refused). ``interval``: seconds
    between health checks of a healthy engine. ``connect_timeout``: how long :meth:`start` waits for the
    engines. ``factor``: the load bound's ``c``. ``make``: the engine of a URL (its wire: :class:`GrpcEngine`,
    SMG's protocol, unless told).
    """

    def __init__(
        self,
        urls: Sequence[str],
        check: Check,
        *,
        interval: float,
        connect_timeout: float,
        factor: float = LOAD_FACTOR,
        make: Callable[[str], Engine] = GrpcEngine,
    ) -> None:
        if not urls:
            raise ValueError("a pool of engines needs at least one grpc://HOST:PORT")
        for url in urls:
            engine_target(url)  # ValueError before anything starts
        self._urls = list(dict.fromkeys(urls))
        self._check = check
        self._interval = interval
        self._connect_timeout = connect_timeout
        self._factor = factor
        self._make = make
        self._members: dict[str, _Member] = {}
        self._turn = 0
        self._closing: set[asyncio.Task[None]] = set()
        self._draining: set[Engine] = set()  # removed, with generations still running

    async def start(self) -> None:
        """Connect every engine at once; start each one's health watch. ExecutorError when one is refused
        by ``check``, or when none can be reached (the first one's error); engines not reached yet join later."""
        members = {url: _Member(self._make(url)) for url in self._urls}
        self._members = members
        results = await asyncio.gather(
            *(self._describe(m, self._connect_timeout) for m in members.values()), return_exceptions=True
        )
        refused = [r for r in results if isinstance(r, _Refused)]
        reached = [m for m in members.values() if m.described]
        if refused or not reached:
            await self.close()
            raise refused[0] if refused else next(r for r in results if isinstance(r, BaseException))
        for member in members.values():
            if member.why is None:
                member.why = await member.engine.health()
            self._watch(member)

    async def _describe(self, member: _Member, timeout: float) -> None:
        """Connect ``member`` and check its facts; ExecutorError (logged, member kept out) when either fails."""
        engine = member.engine
        try:
            info = await engine.connect(timeout)
        except ExecutorError as exc:
            member.why = str(exc)
            raise
        try:
            self._check(engine.url, info)
        except ExecutorError as exc:
            member.why = str(exc)
            logger.error("Engine %s kept out of the pool: %s", engine.url, exc)
            raise _Refused(str(exc)) from exc
        member.described, member.why = True, None

    def _watch(self, member: _Member) -> None:
        member.watch = asyncio.get_running_loop().create_task(self._watch_health(member))

    async def _watch_health(self, member: _Member) -> None:
        """Check ``member`` every ``interval`` while healthy; out of placement, with capped doubling backoff."""
        url = member.engine.url
        while not member.draining:
            wait = self._interval if member.why is None else member.recheck
            member.woken.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(member.woken.wait(), wait)
            if member.draining:
                return
            was = member.why
            if not member.described:
                with contextlib.suppress(ExecutorError):
                    await self._describe(member, HEALTH_TIMEOUT_S)
            else:
                member.why = self._judged(member, await member.engine.health())
            if member.why is None:
                member.recheck = 0.0
                if was is not None:
                    logger.info("Engine %s is healthy: back in placement", url)
            else:
                first = min(1.0, self._interval / 4)
                member.recheck = min(RECHECK_CAP_S, max(first, member.recheck * 2))
                if was is None:
                    logger.error("Engine %s is not healthy, out of placement: %s", url, member.why)

    def _judged(self, member: _Member, why: str | None) -> str | None:
        """What a health check's answer makes of ``member``: in placement, a check that timed out leaves it in
        until :data:`SLOW_CHECKS_TO_LEAVE` have in a row (logged); any other answer counts as it reads."""
        if why is not None and why.startswith(_TIMED_OUT) and member.why is None:
            member.slow += 1
            if member.slow < SLOW_CHECKS_TO_LEAVE:
                logger.warning(
                    "Engine %s answered no health check in time (%d in a row): %s",
                    member.engine.url,
                    member.slow,
                    why,
                )
                return None
        member.slow = 0
        return why

    def lost(self, engine: Engine, why: str) -> None:
        """A generation found ``engine`` unreachable: out of placement at once, rechecked with backoff."""
        member = self._members.get(engine.url)
        if member is None or member.engine is not engine or member.why is not None:
            return
        logger.error("Engine %s is not reachable, out of placement: %s", engine.url, why)
        member.why = why
        member.recheck = min(1.0, self._interval / 4)
        member.woken.set()  # the watch sleeps the backoff from now, not the healthy interval

    def choose(self, key: str | None, *, avoid: Collection[str] = ()) -> Engine:
        """The engine a generation of session ``key`` runs on (module docstring); ``avoid``: URLs not to pick
        (the engine a retry leaves). ExecutorError when no healthy engine is left."""
        loads = {
            url: m.load
            for url, m in self._members.items()
            if m.why is None and not m.draining and url not in avoid
        }
        if not loads:
            raise ExecutorError(
                "no healthy TensorRT-LLM gRPC engine is left to generate on"
                + (f" (besides {', '.join(sorted(avoid))})" if avoid else "")
                + ": "
                + "; ".join(f"{url}: {m.why or 'draining'}" for url, m in self._members.items())
            )
        self._turn += 1
        return self._members[place(key, loads, self._factor, self._turn)].engine

    @contextlib.contextmanager
    def running(self, engine: Engine) -> Iterator[None]:
        """Count one in-flight generation on ``engine`` while the block runs (the load :meth:`choose` bounds);
        an engine removed meanwhile is closed once its last one ends."""
        member = self._members.get(engine.url)
        if member is not None and member.engine is engine:
            member.load += 1
        try:
            yield
        finally:
            if member is not None and member.engine is engine:
                member.load -= 1
                if member.draining and member.load == 0:
                    self._close_later(member)

    async def update(self, urls: Sequence[str]) -> None:
        """Serve from ``urls`` from now on: new ones connect and join once checked; ones gone drain (out of
        placement now, closed when their in-flight generations end). Nothing changes for the others."""
        for url in urls:
            engine_target(url)
        wanted = list(dict.fromkeys(urls))
        for url in [u for u in self._members if u not in wanted]:
            member = self._members.pop(url)
            member.draining = True
            member.woken.set()
            logger.info("Engine %s removed: draining %d generation(s)", url, member.load)
            self._draining.add(member.engine)
            if member.load == 0:
                self._close_later(member)
        for url in wanted:
            if url not in self._members:
                member = self._members[url] = _Member(self._make(url))
                logger.info("Engine %s added: connecting", url)
                self._watch(member)
                member.woken.set()  # describe it now rather than after a wait
        self._urls = wanted

    def _close_later(self, member: _Member) -> None:
        """Close a drained member's channel (on the loop; its watch ends by itself)."""
        logger.info("Engine %s drained: closed", member.engine.url)
        self._draining.discard(member.engine)
        task = asyncio.get_running_loop().create_task(member.engine.close())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    def healthy(self) -> bool:
        """Whether some engine is in placement."""
        return any(m.why is None for m in self._members.values())

    def health(self) -> dict[str, bool]:
        """Each engine of the set (URL: in placement); draining ones are no longer of it."""
        return {url: m.why is None for url, m in self._members.items()}

    def engines(self) -> list[Engine]:
        """The engines of the set (draining ones are no longer of it)."""
        return [m.engine for m in self._members.values()]

    def loads(self) -> dict[str, int]:
        """Each engine's in-flight generations from this process."""
        return {url: m.load for url, m in self._members.items()}

    @property
    def urls(self) -> list[str]:
        """The URLs served from, in the order given."""
        return list(self._urls)

    async def close(self) -> None:
        """Stop every watch and close every channel (running calls end cancelled)."""
        members = list(self._members.values())
        self._members = {}
        for member in members:
            member.draining = True
            if member.watch is not None:
                member.watch.cancel()
        engines = [m.engine for m in members] + list(self._draining)
        self._draining.clear()
        await asyncio.gather(*(engine.close() for engine in engines), return_exceptions=True)
        if self._closing:
            await asyncio.wait(set(self._closing), timeout=2.0)
