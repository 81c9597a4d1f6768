"""The benchmark runner: N proofs of one kind at concurrency C, with OOM recovery.

A benchmark runs in a process of its own (``python -m cuzktui.bench ARGS`` is
``cuzk-tui bench --headless ARGS``; the TUI starts it with :func:`spawn_bench_process`, in a
new process session), owns its daemon through a :class:`~cuzktui.supervisor.Supervisor` and
records everything into the session directory, so it outlives an SSH drop of the TUI and the
TUI can follow it from the session files.

Proofs go through ``Prove`` (submit and wait in one call, as Curio and cuzk-bench do), with
Curio-style request ids. When the daemon dies under the benchmark and the supervisor
diagnoses an OOM kill, the runner asks :func:`cuzktui.diagnosis.oom_verdict` whether the budget
caused it, from the samples it recorded (:class:`~cuzktui.diagnosis.KillEvidenceLog`: the
partitions in flight at the last reading before the kill, the memory outside the budget). Only then
does it lower ``[memory].total_budget`` to what fits by that evidence, restart the daemon with that
config version and resubmit every proof that had not finished, up to ``oom_retries`` times;
otherwise it stops and says what filled the cgroup.
Any other death fails the run with the diagnosis.

A proof the daemon's log shows it lost (replaced in upstream's monolithic GPU queue, whose ``Prove``
never returns: :class:`LostJobWatch`) is not waited for: it is counted LOST with that reason, the run
finishes and fails, and the summary says what avoids it.

Times: a real daemon's figures are wall-clock time. An engine runs ``[engine] time_scale`` times
faster than the box it models, so its figures are converted to the modelled box's time (real ÷
time_scale) and labelled so: emulator speed is never shown as a GPU's.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, cast

from . import events as ev
from . import proofinputs as pi
from .client import DaemonCallError, DaemonDied, DaemonUnreachable
from .config import ConfigDocument
from .controller import BenchRequest
from .daemon_config import read_config
from .daemon_facts import BY_CLI_NAME, ProofKind
from .diagnosis import KillEvidenceLog, client_view, oom_verdict
from .knobs import TomlValue
from .planner import cgroup_aware_budget
from .proto import proving_pb2 as pb
from .session import LogFollower, open_private_append
from .supervisor import DaemonStartError, Supervisor, SupervisorError, free_loopback_port, gather_budget_facts
from .timeline import LOST_REMEDY, Timeline, lost_reason

# Curio's ProveTimeout (docs/daemon-interface.md §1.8).
DEFAULT_PROOF_TIMEOUT_S: Final = 30 * 60.0
# After the daemon's calls failed, how long to wait for the supervisor's exit diagnosis.
_EXIT_DIAGNOSIS_WAIT_S: Final = 10.0
# How often the runner reads its daemon's log for jobs the daemon lost (real seconds), and at most how much.
_LOG_WATCH_S: Final = 0.25
_LOG_WATCH_BYTES: Final = 4 << 20


class BenchUsageError(ValueError):
    """Bad benchmark input (exit status 2): the message names the file or option."""


@dataclass(frozen=True, slots=True)
class BenchSummary:
    bench_id: str
    kind: str
    count: int
    concurrency: int
    outcome: Literal["completed", "failed", "cancelled"]
    completed: int
    failed: int
    wall_s: float
    proofs_per_hour: float
    results: tuple[ev.ProofFinished, ...]
    restarts: tuple[ev.BenchRestart, ...]
    session: str
    error: str | None = None
    # None: a real daemon, figures in wall time; else the engine's time_scale, figures in box time.
    time_scale: float | None = None
    real_wall_s: float = 0.0  # wall_s as the clock here measured it
    killed_s: float = 0.0  # of wall_s: daemon runs that were killed
    restart_s: float = 0.0  # of wall_s: restarting the daemon after a kill
    lost_in_queue: int = 0  # of the LOST proofs: replaced in the daemon's monolithic GPU queue (LostJobWatch)

    @property
    def time_basis(self) -> str:
        """Which clock the figures are on, in words."""
        if self.time_scale is None:
            return "wall clock"
        scale = self.time_scale
        return f"the modelled box's time (engine time_scale {scale:g}: real seconds × {1 / scale:g})"

    def box_ms(self, ms: int) -> int:
        """A duration the daemon reported, in the summary's time basis."""
        return ms if self.time_scale is None else round(ms / self.time_scale)

    def to_json(self) -> dict[str, Any]:
        return {
            "bench_id": self.bench_id,
            "kind": self.kind,
            "count": self.count,
            "concurrency": self.concurrency,
            "outcome": self.outcome,
            "completed": self.completed,
            "failed": self.failed,
            # Of failed: never answered (with their daemon, or replaced in its monolithic GPU queue).
            "lost": sum(1 for r in self.results if r.status == "LOST"),
            "lost_in_queue": self.lost_in_queue,
            "time_basis": "modelled" if self.time_scale is not None else "wall",
            "time_scale": self.time_scale,
            "wall_s": round(self.wall_s, 3),
            "real_wall_s": round(self.real_wall_s, 3),
            "killed_s": round(self.killed_s, 3),
            "restart_s": round(self.restart_s, 3),
            "proofs_per_hour": round(self.proofs_per_hour, 3),
            "restarts": [
                {
                    "attempt": r.attempt,
                    "reason": r.reason,
                    "evidence": list(r.evidence),
                    "total_budget": r.total_budget,
                    "explanation": r.explanation,
                    "resubmitted": r.resubmitted,
                }
                for r in self.restarts
            ],
            "proofs": [
                {
                    "job_id": p.job_id,
                    "status": p.status,
                    "error": p.error,
                    # Absent timings are null, not 0: the daemon never reported them.
                    **{
                        name: self.box_ms(value) if p.answered else None
                        for name, value in (
                            ("wall_ms", p.wall_ms),
                            ("total_ms", p.total_ms),
                            ("queue_wait_ms", p.queue_wait_ms),
                            ("synthesis_ms", p.synthesis_ms),
                            ("gpu_compute_ms", p.gpu_compute_ms),
                        )
                    },
                }
                for p in self.results
            ],
            "session": self.session,
            "error": self.error,
        }


# --------------------------------------------------------------------------------------------
# Inputs and request ids
# --------------------------------------------------------------------------------------------


def input_name(kind: str) -> str:
    """What ``--input`` holds for a proof kind, in words."""
    return "a C1 output JSON" if kind == "porep" else "a vanilla proof file"


def input_file_problem(path: Path, kind: str) -> str | None:
    """Why ``path`` cannot be the kind's input file, said before anything starts; None: it is a file."""
    if path.is_dir():
        return f"{path} is a directory: give {input_name(kind)} file (its path, not its directory's)"
    if not path.exists():
        return f"{path}: no such file"
    if not path.is_file():
        return f"{path} is not a regular file: give {input_name(kind)} file"
    return None


def read_vanilla_file(path: Path) -> list[bytes]:
    """A vanilla-proof file as cuzk-bench reads it: a JSON array of base64 strings, else one proof."""
    data = path.read_bytes()
    if not data:
        raise BenchUsageError(f"{path}: the vanilla proof file is empty")
    try:
        return pi.read_vanilla(data)
    except pi.InputError as error:
        raise BenchUsageError(f"{path}: {error}") from None


# What read_c1_file checks before anything is sent; the rest is the daemon's to parse (c1_parse_warning).
C1_SHAPES: Final = (
    "checked before sending: a JSON object, either Curio's C1 wrapper (SectorNum, Phase1Out, SectorSize) or a "
    "bare SealCommitPhase1Output (wrapped as Curio does); what is inside is the daemon's to parse"
)


def read_c1_file(path: Path) -> tuple[bytes, int]:
    """(vanilla_proof payload, the wrapper's SectorNum) for a PoRep C1 file.

    The payload is Curio's wrapper ``{"SectorNum", "Phase1Out" (base64), "SectorSize"}``; a bare
    SealCommitPhase1Output JSON is wrapped as Curio would wrap it (sector 1). Only that shape is checked
    (C1_SHAPES): ``{}`` passes and the daemon fails it, ``[1, 2]`` is refused.
    """
    data = path.read_bytes()
    try:
        return data, pi.parse_c1_wrapper(data).sector_num
    except pi.InputError:
        pass
    try:
        document = json.loads(data)
    except ValueError as error:
        raise BenchUsageError(f"{path}: not a C1 output JSON ({error}); {C1_SHAPES}") from error
    if not isinstance(document, dict):
        raise BenchUsageError(f"{path}: not a C1 output JSON (a {type(document).__name__}); {C1_SHAPES}")
    return pi.wrap_phase1(data, 1), 1


def c1_parse_warning(payload: bytes) -> str | None:
    """Why the daemon will fail every proof of this C1 at its parse, as far as this tool reads one like it
    (proofinputs follows upstream's parse); None when it reads. Said before sending: only the shape was
    checked (C1_SHAPES), and a wrong file otherwise shows only as FAILED proofs."""
    try:
        pi.parse_c1(payload)
    except pi.InputError as error:
        return (
            f"the C1 does not read as a SealCommitPhase1Output ({error}): the daemon will fail its proofs ({C1_SHAPES})"
        )
    return None


def c1_identity_warning(payload: bytes, miner_id: int, sector_number: int) -> str | None:
    """Why the daemon's self-check would fail this C1 for this miner and sector (None: it passes).

    The C1's replica id is bound to one miner and sector; the daemon proves with the request's and
    its self-check then reports the proof FAILED (cuzk-core prover.rs ``verify_porep_proof``)."""
    try:
        _, c1 = pi.parse_c1(payload)
    except pi.InputError:
        return None  # the daemon reports its own parse error
    if pi.replica_id(miner_id, sector_number, c1.ticket, c1.comm_d, c1.ffi_id) == c1.replica_id:
        return None
    return (
        f"the C1's replica id is not that of miner {miner_id}, sector {sector_number}: the daemon will prove it"
        " and its self-check will report FAILED (give --miner-id / --sector-num)"
    )


def _sibling_file(input_path: Path | None, name: str) -> Path | None:
    if input_path is None:
        return None
    sibling = input_path.parent / name
    return sibling if sibling.is_file() else None


def _hex32_file(path: Path, key: str, *, bare: bool = False) -> bytes:
    """A value from a file beside the input: its ``--KEY HEX`` line, as ``cuzk-engine sample-inputs``
    writes them; with ``bare`` (a file of one value: the randomness), also a file that is that value in
    hex alone. A file of several values needs their flags: nothing else tells them apart."""
    try:
        lines = [line.strip() for line in path.read_text().splitlines() if line.strip()]
        for line in lines:
            flag, _, value = line.partition(" ")
            if flag == f"--{key}":
                return pi.parse_hex32(value.strip(), key)
        if bare and len(lines) == 1 and not lines[0].startswith("-"):
            return pi.parse_hex32(lines[0], key)
    except (OSError, ValueError) as error:  # pi.InputError and UnicodeDecodeError are ValueErrors
        raise BenchUsageError(f"{path}: {error}") from None
    alone = ", nor a bare 32-byte hex value alone" if bare else ""
    raise BenchUsageError(f"{path}: no --{key} line{alone}")


def snap_commitments(params: pi.RequestParams, input_path: Path | None, seed: str) -> pi.SnapCommitments:
    """Flags first, then ``snap-comms.txt`` beside the input; random only for synthetic inputs."""
    comms_file = _sibling_file(input_path, pi.SNAP_COMMS_FILE)
    values: list[bytes] = []
    for name in ("comm-r-old", "comm-r-new", "comm-d-new"):
        flag: bytes | None = getattr(params, name.replace("-", "_"))
        if flag is None and comms_file is not None:
            flag = _hex32_file(comms_file, name)
        if flag is None and input_path is not None:
            raise BenchUsageError(
                f"SnapDeals with --input needs --{name} (or {pi.SNAP_COMMS_FILE} beside the input):"
                " the daemon rejects a request without its commitments"
            )
        values.append(flag if flag is not None else pi.fr_safe(pi.det_bytes(f"{seed}/{name}", 32)))
    return pi.SnapCommitments(*values)


def post_randomness(params: pi.RequestParams, input_path: Path | None, seed: str) -> bytes:
    """``--randomness``, then ``post-randomness.txt`` beside the input, then zeros as cuzk-bench
    (a real input) or deterministic bytes (synthetic)."""
    if params.randomness is not None:
        return params.randomness
    randomness_file = _sibling_file(input_path, pi.POST_RANDOMNESS_FILE)
    if randomness_file is not None:
        return _hex32_file(randomness_file, "randomness", bare=True)
    return bytes(32) if input_path is not None else pi.fr_safe(pi.det_bytes(seed + "/randomness", 32))


def build_requests(
    kind: str,
    count: int,
    *,
    input_path: Path | None,
    bench_id: str,
    params: pi.RequestParams | None = None,
) -> list[pb.SubmitProofRequest]:
    """The ``count`` requests of a benchmark, with Curio-style request ids.

    With ``input_path`` every request carries the file's proof (the ids get a ``-<n>`` suffix to
    stay unique among in-flight jobs, docs/daemon-interface.md §1.5), with the identity the file carries (a C1
    wrapper's SectorNum) unless a flag gives it. Without it the inputs come from the generator
    :mod:`cuzktui.proofinputs` (structurally complete, as the daemon parses them), each request a
    different sector / partition.
    """
    p = params or pi.RequestParams()
    facts = BY_CLI_NAME[kind]
    miner_id = p.miner_id
    registered_proof = pi.DEFAULT_REGISTERED_PROOF[kind] if p.registered_proof is None else p.registered_proof
    shared_vanilla = read_vanilla_file(input_path) if input_path is not None and kind != "porep" else None
    c1 = read_c1_file(input_path) if input_path is not None and kind == "porep" else None
    requests: list[pb.SubmitProofRequest] = []
    for i in range(count):
        seed = f"{bench_id}/{i}"
        sector = p.sector_num if p.sector_num is not None else (c1[1] if c1 is not None else i + 1)
        request = pb.SubmitProofRequest(
            proof_kind=int(facts.kind),  # type: ignore[arg-type]
            sector_size=pi.SECTOR_SIZE_32G,
            registered_proof=registered_proof,
            miner_id=miner_id,
            sector_number=sector,
        )
        if facts.kind == ProofKind.POREP_SEAL_COMMIT:
            request.vanilla_proof = (
                c1[0]
                if c1 is not None
                else pi.generate_c1(
                    miner_id=miner_id,
                    sector_num=sector,
                    size=p.synthetic_size,
                    registered_proof=registered_proof,
                    seed=seed,
                )
            )
            request_id = f"porep-{miner_id}-{sector}"
        elif facts.kind == ProofKind.SNAP_DEALS_UPDATE:
            request.vanilla_proofs.extend(
                shared_vanilla or [pi.generate_snap_vanilla(n, seed=seed) for n in range(pi.SNAP_PARTITIONS)]
            )
            comms = snap_commitments(p, input_path, seed)
            request.comm_r_old, request.comm_r_new, request.comm_d_new = (
                comms.comm_r_old,
                comms.comm_r_new,
                comms.comm_d_new,
            )
            request_id = f"snap-{miner_id}-{sector}"
        elif facts.kind == ProofKind.WINDOW_POST_PARTITION:
            request.vanilla_proofs.extend(
                shared_vanilla or [pi.generate_post_vanilla(sector, pi.WINDOW_CHALLENGES_PER_SECTOR, seed=seed)]
            )
            request.randomness = randomness = post_randomness(p, input_path, seed)
            request.partition_index = 0 if input_path is not None else i
            # Go prints the first 8 randomness bytes as a bracketed decimal list.
            request_id = f"wdpost-{miner_id}-{request.partition_index}-[{' '.join(str(b) for b in randomness[:8])}]"
        else:
            request.vanilla_proofs.extend(shared_vanilla or [pi.generate_post_vanilla(sector, 1, seed=seed)])
            request.randomness = randomness = post_randomness(p, input_path, seed)
            request_id = f"winpost-{miner_id}-{randomness[:8].hex()}"
        request.request_id = f"{request_id}-{i + 1}" if input_path is not None else request_id
        requests.append(request)
    return requests


def checked_requests(
    kind: str,
    count: int,
    *,
    real_daemon: bool,
    input_path: Path | None,
    params: pi.RequestParams,
    bench_id: str,
    flag: str = "--input",
) -> list[pb.SubmitProofRequest]:
    """A benchmark's requests, built before anything runs, so that inputs the daemon cannot be given are
    bad usage (BenchUsageError: exit status 2), never a run that fails: the input a real daemon needs, a
    file that is the kind's input, the values beside it (SnapDeals commitments, the PoSt randomness).
    ``cuzk-tui bench`` builds its requests here, and ``cuzk-tui tune`` checks its trials' inputs here.
    The TUI checks here too before it hands its daemon to a runner (live.LiveController), so a mistyped
    path changes nothing. ``flag`` is the name the input was given under (``--c1``, ``--vanilla``; the
    TUI's ``input file``), so an error says it as typed."""
    if real_daemon and input_path is None:
        raise BenchUsageError(f"{flag} is required with the real daemon ({input_name(kind)} for {kind})")
    problem = input_file_problem(input_path, kind) if input_path is not None else None
    if problem is not None:
        raise BenchUsageError(f"{flag} {problem}")
    try:
        return build_requests(kind, count, input_path=input_path, bench_id=bench_id, params=params)
    except OSError as error:
        raise BenchUsageError(f"{flag} {input_path}: {error.strerror or error}") from None


def input_warning(requests: Sequence[pb.SubmitProofRequest]) -> str | None:
    """Why the daemon will fail every proof of a PoRep benchmark's C1 (the requests share one): it does not
    parse (:func:`c1_parse_warning`), or it is another miner's or sector's (:func:`c1_identity_warning`);
    None when neither, and for other kinds."""
    first = requests[0] if requests else None
    if first is None or first.proof_kind != int(ProofKind.POREP_SEAL_COMMIT):
        return None
    return c1_parse_warning(first.vanilla_proof) or c1_identity_warning(
        first.vanilla_proof, first.miner_id, first.sector_number
    )


# --------------------------------------------------------------------------------------------
# Config helpers
# --------------------------------------------------------------------------------------------


def set_config_value(config_text: str, section: str, key: str, value: TomlValue) -> str:
    """``config_text`` with ``[section].key = value``; comments and other keys stay as they were."""
    document = ConfigDocument.parse(config_text)
    document.set(section, key, value)
    return document.text()


def with_engine_status(config_text: str, mode: str) -> str:
    """An engine's config with a /status endpoint (a free loopback port) where it has none: the session's
    budget line and the box's RSS (the engine's own figure, which the memory chart shows) come from
    there. A real daemon's config is left as given."""
    if mode != "engine" or read_config(config_text).status_address is not None:
        return config_text
    return set_config_value(config_text, "daemon", "status_listen", f"127.0.0.1:{free_loopback_port()}")


# --------------------------------------------------------------------------------------------
# The runner
# --------------------------------------------------------------------------------------------


class LostJobWatch:
    """The jobs a daemon run's log shows it lost: replaced in upstream's monolithic GPU queue, so their
    ``Prove`` never returns (engine.rs PriorityWorkQueue keys every monolithic job (0, 0); the daemon logs
    nothing then). Read as the log grows, by the timeline that report and the TUI read (Timeline.overtaken)."""

    def __init__(self, follower: LogFollower) -> None:
        self._follower = follower
        self._timeline = Timeline()
        self._seen = 0

    def poll(self) -> list[tuple[str, str]]:
        """(job id, why) of each job found lost since the last poll."""
        for _, event in self._follower.read(final=False, limit=_LOG_WATCH_BYTES):
            self._timeline.apply(cast(ev.LogEvent, event))
        lost = self._timeline.overtaken[self._seen :]
        self._seen += len(lost)
        return [(job.job_id, lost_reason(job)) for job in lost]


class _LostInQueue(Exception):
    """The daemon's log says it lost the job: its answer never comes."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(slots=True)
class _Round:
    """What one daemon run of the benchmark ended with."""

    exit: ev.DaemonExited | None = None
    lost_contact: str | None = None


@dataclass(slots=True)
class _State:
    unfinished: dict[int, pb.SubmitProofRequest]
    results: dict[int, ev.ProofFinished] = field(default_factory=dict)


class BenchRunner:
    """Runs one benchmark against the supervisor's daemon (which must be started and ready)."""

    def __init__(
        self,
        supervisor: Supervisor,
        options: BenchRequest,
        config_text: str,
        *,
        requests: Sequence[pb.SubmitProofRequest],
        bench_id: str,
        on_progress: Callable[[str], None] | None = None,
        host_mem_total: int | None = None,
    ) -> None:
        self.supervisor = supervisor
        self.options = options
        self.config_text = config_text
        self.bench_id = bench_id
        self._requests = list(requests)
        self._on_progress = on_progress
        # The OOM verdict's evidence, from the samples fed to observe(); an engine's RSS in its units.
        scale = read_config(config_text).engine.memory_scale if supervisor.mode == "engine" else 1.0
        self._evidence = KillEvidenceLog(rss_scale=1 / scale)
        self._host_mem_total = host_mem_total
        self._state = _State(unfinished=dict(enumerate(self._requests)))
        self._restarts: list[ev.BenchRestart] = []
        self._cancelled = asyncio.Event()
        self._killed_s = 0.0
        self._restart_s = 0.0
        # Per request id in flight, set with the reason when the daemon's log shows the job lost.
        self._lost_waits: dict[str, asyncio.Future[str]] = {}
        self._lost_in_queue = 0

    def observe(self, event: ev.ObservedEvent) -> None:
        """A sample the daemon's recorder took (memory, ``/status``): evidence for an OOM kill's verdict."""
        self._evidence.observe(event)

    def _emit(self, event: ev.ObservedEvent) -> None:
        self.supervisor.session.append_event(event)

    def _progress(self, text: str) -> None:
        if self._on_progress is not None:
            self._on_progress(text)

    def outstanding(self) -> int:
        """Proofs not finished yet (the drain condition for the benchmark's own work)."""
        return len(self._state.unfinished)

    async def wait_cancelled(self) -> None:
        """Return once :meth:`cancel` has been called."""
        await self._cancelled.wait()

    def cancel(self) -> None:
        """Stop submitting and abandon the proofs in flight; run() then returns outcome "cancelled"."""
        self._cancelled.set()

    async def run(self) -> BenchSummary:
        o = self.options
        scale = self.supervisor.time_scale
        self._emit(ev.BenchStarted(time.time(), self.bench_id, o.kind, o.count, o.concurrency, o.oom_retries, scale))
        started = time.monotonic()
        error: str | None = None
        outcome: Literal["completed", "failed", "cancelled"] = "completed"
        while self._state.unfinished:
            round_started = time.monotonic()
            result = await self._run_round()
            if self._cancelled.is_set():
                outcome = "cancelled"
                break
            if result.exit is None and result.lost_contact is None:
                continue
            self._killed_s += time.monotonic() - round_started
            restart_started = time.monotonic()
            error = await self._recover(result)
            self._restart_s += time.monotonic() - restart_started
            if error is not None:
                outcome = "failed"
                break
        real_wall_s = time.monotonic() - started
        now = time.time()
        for index in sorted(self._state.unfinished):
            request = self._state.unfinished[index]
            lost = ev.ProofFinished(
                now, self.bench_id, request.request_id, o.kind, "LOST", error or outcome, answered=False
            )
            self._state.results[index] = lost
            self._emit(lost)
        results = tuple(self._state.results[i] for i in sorted(self._state.results))
        completed = sum(1 for r in results if r.status == "COMPLETED")
        failed = len(results) - completed
        in_queue = None
        if self._lost_in_queue:
            in_queue = (
                f"{self._lost_in_queue} of {o.count} proofs lost: the daemon replaced them in its monolithic GPU "
                f"queue and never answered them; {LOST_REMEDY}"
            )
        if outcome == "completed" and failed:
            outcome = "failed"
            error = in_queue if failed == self._lost_in_queue else f"{failed} of {o.count} proofs failed"
        if in_queue is not None and error != in_queue:
            error = f"{error}; {in_queue}" if error else in_queue
        box = 1.0 if scale is None else 1 / scale  # the modelled box's seconds per real second
        wall_s, killed_s, restart_s = real_wall_s * box, self._killed_s * box, self._restart_s * box
        per_hour = completed / wall_s * 3600 if wall_s > 0 else 0.0
        self._emit(
            ev.BenchFinished(
                time.time(), self.bench_id, completed, failed, wall_s, per_hour, outcome, scale, killed_s, restart_s
            )
        )
        return BenchSummary(
            self.bench_id, o.kind, o.count, o.concurrency, outcome, completed, failed, wall_s, per_hour,
            results, tuple(self._restarts), str(self.supervisor.session.path), error,
            scale, real_wall_s, killed_s, restart_s, self._lost_in_queue,
        )  # fmt: skip

    async def _recover(self, result: _Round) -> str | None:
        """Restart after an OOM kill the budget caused (returns None), or say why the run fails."""
        exit = result.exit
        if exit is None:
            return f"lost contact with the daemon: {result.lost_contact}"
        diagnosis = f"the daemon died ({exit.cause}): " + "; ".join(exit.evidence)
        if exit.error_report:
            diagnosis += "\n" + exit.error_report
        if exit.cause != "oom_kill":
            return diagnosis
        facts = gather_budget_facts(
            self.config_text, self.supervisor.mode, self.supervisor.memory_limit, self._host_mem_total
        )
        allowance = cgroup_aware_budget(facts.limit)
        verdict = oom_verdict(facts, allowance=allowance, evidence=self._evidence.evidence(), kind=self.options.kind)
        if verdict.lower_to is None:
            self._emit(ev.Notice(time.time(), "error", f"OOM kill not retried: {verdict.explanation}"))
            return f"{diagnosis}\nnot retried: {verdict.explanation}"
        attempt = len(self._restarts) + 1
        if attempt > self.options.oom_retries:
            return f"{diagnosis}\n{verdict.explanation} (no OOM retries left of {self.options.oom_retries})"
        budget = verdict.lower_to
        self.config_text = set_config_value(self.config_text, "memory", "total_budget", budget)
        restart = ev.BenchRestart(
            time.time(), self.bench_id, attempt, exit.cause, exit.evidence, budget, len(self._state.unfinished),
            verdict.explanation,
        )  # fmt: skip
        self._restarts.append(restart)
        self._emit(restart)
        self._progress(
            f"daemon OOM-killed: {verdict.explanation}; restart {attempt}/{self.options.oom_retries} with "
            f"total_budget = {budget}, resubmitting {len(self._state.unfinished)} proofs"
        )
        self._evidence.new_daemon()
        try:
            await self.supervisor.start(self.config_text, changes=(f"memory.total_budget = {budget!r}",))
        except (DaemonStartError, SupervisorError) as error:
            return f"restart after the OOM kill failed: {error}"
        return None

    async def _run_round(self) -> _Round:
        """Prove the unfinished proofs until all finish, the daemon exits, or the run is cancelled."""
        queue = sorted(self._state.unfinished)
        round_ = _Round()
        client = self.supervisor.client

        async def worker() -> None:
            while queue and not self._cancelled.is_set():
                index = queue.pop(0)
                if not await self._prove_one(client, index, round_):
                    return

        workers = [asyncio.ensure_future(worker()) for _ in range(min(self.options.concurrency, len(queue)))]
        exit_task = asyncio.ensure_future(self.supervisor.exited())
        cancel_task = asyncio.ensure_future(self._cancelled.wait())
        follower = self.supervisor.run_log_follower(skip_inert=True)
        watch = asyncio.ensure_future(self._watch_lost(LostJobWatch(follower))) if follower is not None else None
        try:
            pending: set[asyncio.Future[Any]] = set(workers)
            while pending and not exit_task.done() and not cancel_task.done():
                _, pending = await asyncio.wait(pending | {exit_task, cancel_task}, return_when=asyncio.FIRST_COMPLETED)
                pending -= {exit_task, cancel_task}
            if not exit_task.done() and round_.lost_contact is not None:
                # The calls failed as if the daemon died: its exit diagnosis follows within moments.
                await asyncio.wait([exit_task], timeout=_EXIT_DIAGNOSIS_WAIT_S)
            if exit_task.done():
                round_.exit = exit_task.result()
            for worker_task in workers:
                # A bug in a worker must surface, not leave its proofs unfinished for ever (the run
                # would start round after round).
                failure = worker_task.exception() if worker_task.done() and not worker_task.cancelled() else None
                if failure is not None:
                    raise failure
        finally:
            tasks = [*workers, exit_task, cancel_task, *([watch] if watch is not None else [])]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        return round_

    async def _watch_lost(self, watch: LostJobWatch) -> None:
        """Tell each proof in flight that the daemon's log shows lost (until cancelled with the round)."""
        while True:
            for job_id, why in await asyncio.to_thread(watch.poll):
                waiter = self._lost_waits.get(job_id)
                if waiter is not None and not waiter.done():
                    waiter.set_result(why)
            await asyncio.sleep(_LOG_WATCH_S)

    async def _answer(self, client: Any, request: pb.SubmitProofRequest) -> pb.AwaitProofResponse:
        """The daemon's answer to ``request``; _LostInQueue as soon as its log shows the job lost."""
        lost: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._lost_waits[request.request_id] = lost
        call = asyncio.ensure_future(client.prove(request, timeout=DEFAULT_PROOF_TIMEOUT_S))
        try:
            await asyncio.wait({call, lost}, return_when=asyncio.FIRST_COMPLETED)
            if not call.done():
                raise _LostInQueue(lost.result())
            return cast(pb.AwaitProofResponse, call.result())
        finally:
            self._lost_waits.pop(request.request_id, None)
            if not call.done():
                call.cancel()
                await asyncio.gather(call, return_exceptions=True)

    async def _prove_one(self, client: Any, index: int, round_: _Round) -> bool:
        """Prove one request; False when the daemon is gone (the request stays unfinished)."""
        request = self._requests[index]
        kind = self.options.kind
        self._emit(ev.ProofSubmitted(time.time(), self.bench_id, request.request_id, kind))
        started = time.monotonic()
        try:
            response = await self._answer(client, request)
        except (DaemonDied, DaemonUnreachable) as error:
            round_.lost_contact = f"{error} ({error.status_text})"
            return False
        except DaemonCallError as error:
            finished = ev.ProofFinished(
                time.time(), self.bench_id, request.request_id, kind, "FAILED", str(error), answered=False
            )
        except _LostInQueue as lost:
            self._lost_in_queue += 1
            finished = ev.ProofFinished(
                time.time(), self.bench_id, request.request_id, kind, "LOST", lost.reason, answered=False
            )
        else:
            status_name = pb.AwaitProofResponse.Status.Name(response.status)
            finished = ev.ProofFinished(
                t=time.time(),
                bench_id=self.bench_id,
                job_id=request.request_id,
                kind=kind,
                status="COMPLETED" if status_name == "COMPLETED" else "FAILED",
                error=response.error_message or ("" if status_name == "COMPLETED" else status_name),
                queue_wait_ms=response.queue_wait_ms,
                synthesis_ms=response.synthesis_ms,
                gpu_compute_ms=response.gpu_compute_ms,
                total_ms=response.total_ms,
                wall_ms=int((time.monotonic() - started) * 1000),
            )
        del self._state.unfinished[index]
        self._state.results[index] = finished
        self._emit(finished)
        done = len(self._state.results)
        what = f"{finished.wall_ms / 1000:.1f}s" if finished.answered else "no result"
        if finished.error:
            what += f": {finished.error}"
        self._progress(f"[{done}/{self.options.count}] {finished.status} {finished.job_id} — {what}")
        return True


def format_summary(summary: BenchSummary) -> str:
    """cuzk-bench's ``batch`` report (cuzk-bench/src/main.rs, Commands::Batch), honest where we differ.

    Where cuzk-bench prints every result with its timings, a proof that got no answer (the call
    failed, or it was lost with its daemon) is printed without made-up ``(prove=0 ms, queue=0 ms)``;
    total time and throughput say whether they include killed daemon runs and restarts; an
    engine's figures are in the modelled box's time, labelled so (cuzk-bench would print the
    emulator's speed as if it were a GPU's).
    """
    lines = [
        "=== Batch Benchmark ===",
        f"proof type:  {summary.kind}",
        f"count:       {summary.count}",
        f"concurrency: {summary.concurrency}",
    ]
    if summary.time_scale is not None:
        lines.append(
            f"times:       {summary.time_basis}; the engine ran {summary.real_wall_s:.1f}s on this machine's clock"
        )
    lines.append("")
    n = len(summary.results)
    for i, r in enumerate(summary.results, 1):
        if r.answered and r.status == "COMPLETED":
            lines.append(
                f"  [{i}/{n}] {r.status} — {summary.box_ms(r.wall_ms) / 1000:.1f}s "
                f"(prove={summary.box_ms(r.gpu_compute_ms)} ms, queue={summary.box_ms(r.queue_wait_ms)} ms)"
            )
        elif r.answered:
            # The daemon's own words; its timings of a FAILED proof are all 0 (engine.rs), so none are shown.
            why = " | ".join(r.error.splitlines()) if r.error else "the daemon gave no reason"
            lines.append(f"  [{i}/{n}] {r.status} — {summary.box_ms(r.wall_ms) / 1000:.1f}s: {why}")
        else:
            why = r.error.splitlines()[0] if r.error else r.status
            why = why if r.status == "LOST" else f"the call failed ({why})"
            lines.append(f"  [{i}/{n}] {r.status} — no result: {why}")
    total = f"total time:    {summary.wall_s:.1f}s"
    if summary.restarts or summary.killed_s:
        total += (
            f" (includes {summary.killed_s:.1f}s in killed daemon runs and {summary.restart_s:.1f}s "
            f"restarting, {len(summary.restarts)} restart(s))"
        )
    lines += ["", "=== Batch Summary ===", total]
    lines += [f"completed:     {summary.completed}", f"failed:        {summary.failed}"]
    lost = sum(1 for r in summary.results if r.status == "LOST")
    with_daemon = lost - summary.lost_in_queue
    if lost:
        how = [f"{with_daemon} with their daemon"] if with_daemon else []
        how += [f"{summary.lost_in_queue} replaced in its monolithic GPU queue"] if summary.lost_in_queue else []
        lines.append(f"  of which lost: {lost} (never answered: {', '.join(how)})")
    completed = [r for r in summary.results if r.status == "COMPLETED"]
    if completed:
        walls = [summary.box_ms(r.wall_ms) / 1000 for r in completed]
        proves = [summary.box_ms(r.gpu_compute_ms) / 1000 for r in completed]
        for label, values in (("wall time:  ", walls), ("prove time: ", proves)):
            lines.append(
                f"{label}   avg={sum(values) / len(values):.1f}s min={min(values):.1f}s max={max(values):.1f}s"
            )
        # cuzk-bench prints prove= and prove time unexplained: the daemon's gpu_compute of a partitioned
        # proof is the sum over its partitions (engine.rs, total_gpu_duration), so it can exceed the wall time.
        lines.append("  (prove: the daemon's GPU time summed over the proof's partitions)")
        scope = " over the whole run, killed runs and restarts included" if summary.killed_s else ""
        lines.append(
            f"throughput:    {len(completed) / summary.wall_s * 60:.3f} proofs/min "
            f"({summary.wall_s / len(completed):.1f}s/proof){scope}"
        )
    lines.append(f"proofs/hour:   {summary.proofs_per_hour:.1f}")
    for restart in summary.restarts:
        lines.append(
            f"restart {restart.attempt}:     {restart.reason} → total_budget = {restart.total_budget} "
            f"({'; '.join(restart.evidence)})"
        )
        if restart.explanation:
            lines.append(f"  why:         {restart.explanation}")
    if summary.restarts:
        lines.append("clients saw:   " + "\n               ".join(client_view(summary.restarts[0].reason)))
    if summary.error:
        lines.append(f"error:         {summary.error}")
    lines.append(f"session:       {summary.session}")
    return "\n".join(lines)


# A runner's stdout and stderr, in the session it records (every run of the session appends to it).
RUNNER_OUTPUT: Final = "bench.log"
# What ``cuzk-tui bench`` starts its error with (commands/bench.py, and argparse's usage errors).
ERROR_PREFIX: Final = "cuzk-tui bench: "
# How much of a runner's output is read back for its error: the end of it, where the error is.
_ERROR_TAIL_BYTES: Final = 64 << 10


def spawn_bench_process(session: Path, args: Sequence[str]) -> subprocess.Popen[bytes]:
    """Start ``python -m cuzktui.bench --session SESSION ARGS`` detached from the caller (the TUI).

    It runs in its own process session, with stdout and stderr on ``bench.log`` in the session,
    so it survives the TUI; stop it early with SIGTERM (it cancels and stops its daemon). Unbuffered,
    so its lines are there in the order it wrote them: its error last (:func:`runner_error`), not
    before the summary a buffered stdout wrote at its exit.
    """
    log_fd = open_private_append(session / RUNNER_OUTPUT)
    try:
        return subprocess.Popen(
            [sys.executable, "-u", "-m", "cuzktui.bench", "--session", str(session), *args],
            stdin=subprocess.DEVNULL,
            stdout=log_fd,
            stderr=log_fd,
            start_new_session=True,
        )
    finally:
        os.close(log_fd)


def runner_error(output: Path, start: int) -> str:
    """What a runner wrote of why it failed, in its output file from ``start`` (where its run began): from
    its last ``cuzk-tui bench:`` line to the end (the daemon's own report may follow on more lines),
    else its last line (an uncaught exception's); "" when it wrote nothing there."""
    try:
        with output.open("rb") as f:
            end = f.seek(0, os.SEEK_END)
            f.seek(max(start, end - _ERROR_TAIL_BYTES))
            lines = f.read().decode("utf-8", "replace").rstrip().splitlines()
    except OSError:
        return ""
    said = next((i for i in reversed(range(len(lines))) if lines[i].startswith(ERROR_PREFIX)), None)
    if said is None:
        return lines[-1].strip() if lines else ""
    return "\n".join(lines[said:]).removeprefix(ERROR_PREFIX).strip()


def install_cancel_signals(runner: BenchRunner) -> None:
    """SIGTERM / SIGINT / SIGHUP cancel the benchmark cleanly (the daemon is then stopped and recorded)."""
    loop = asyncio.get_running_loop()
    for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(number, runner.cancel)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m cuzktui.bench ARGS`` = ``cuzk-tui bench --headless ARGS``."""
    from .cli import main as cli_main

    return cli_main(["bench", "--headless", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
