"""The gRPC client for ``cuzk.v1.ProvingEngine`` and the poller of the HTTP ``/status`` endpoint.

Errors are translated into what an operator needs to know (docs/daemon-interface.md §1.2, docs/architecture.md):

* a daemon that dies while a call is in flight (the kernel OOM killer's SIGKILL is the usual
  reason) shows up in gRPC as UNAVAILABLE, "Socket closed", "connection reset", "broken pipe"
  or "stream closed" — that becomes :class:`DaemonDied`, which tells the caller to look at the
  supervisor's exit diagnosis rather than at the transport text;
* a daemon that cannot be reached at all (nothing listening yet, or no longer) is
  :class:`DaemonUnreachable` — the supervisor's readiness poll waits through it;
* any other gRPC status is a :class:`DaemonCallError` with its code and message.

Proof failures are not errors on this API: ``Prove`` / ``AwaitProof`` return OK with status
FAILED (docs/daemon-interface.md §1.2), and so do these methods.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final, TypeVar
from urllib.parse import urlsplit

import grpc
import grpc.aio

from .events import StatusSnapshot
from .proto import proving_pb2 as pb
from .proto import proving_pb2_grpc as pb_grpc

# The daemon decodes and encodes up to 128 MiB (docs/daemon-interface.md §1.1); Curio's client allows 256 MiB,
# and a PoRep C1 input is ~51-68 MB (up to ~200 MB quoted), so match Curio.
MAX_MESSAGE_BYTES: Final = 256 * 1024 * 1024
_CHANNEL_OPTIONS: Final = (
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    # A single attempt per call: a retried Prove after the daemon died would be a silent resubmission.
    ("grpc.enable_retries", 0),
    # A daemon restarted on the same address (systemd's Restart=, an OOM recovery) is reached again within a
    # second: grpc-core's reconnect backoff otherwise grows to 120 s while nothing listens, and every call
    # in between fails without trying.
    ("grpc.initial_reconnect_backoff_ms", 250),
    ("grpc.max_reconnect_backoff_ms", 1000),
)
# The HTTP/2 :authority sent over a unix socket. grpc-core would send the socket's path, percent-encoded
# (``tmp%2F…%2Fdaemon.sock``); the daemon's tonic server (cuzk-daemon main.rs ``serve_with_incoming`` on a
# UnixListenerStream, hyper's h2) parses :authority as a URI authority and resets every stream whose
# authority is not one, so nothing worked over a socket (issue 23). A plain host name is what it accepts.
UNIX_SOCKET_AUTHORITY: Final = "localhost"
# Curio gives GetStatus a 5 s deadline (docs/daemon-interface.md §1.8).
STATUS_TIMEOUT_S: Final = 5.0

# Texts grpc-core uses when the connection could not be made at all.
_UNREACHABLE_MARKERS: Final = (
    "failed to connect",
    "connection refused",
    "no such file or directory",
    "connect failed",
    "dns resolution failed",
)
# Texts that mean the peer went away under a call (grpc-core, h2, tonic-style).
_DIED_MARKERS: Final = (
    "socket closed",
    "connection reset",
    "broken pipe",
    "stream closed",
    "stream removed",
    "connection closed",
    "goaway",
    "end of tcp stream",
)


class ClientError(Exception):
    """Base of the errors raised by :class:`DaemonClient`; ``rpc`` names the call."""

    def __init__(self, message: str, rpc: str, status_text: str) -> None:
        super().__init__(message)
        self.rpc = rpc
        self.status_text = status_text


class DaemonDied(ClientError):
    """The daemon went away while the call was in flight; the supervisor knows why."""

    def __init__(self, rpc: str, status_text: str) -> None:
        super().__init__(f"the daemon died during {rpc} — see exit diagnosis", rpc, status_text)


class DaemonUnreachable(ClientError):
    """Nothing answers at the address (not started yet, not listening, or gone)."""

    def __init__(self, rpc: str, address: str, status_text: str) -> None:
        super().__init__(f"no daemon answers at {address} ({rpc}): {status_text}", rpc, status_text)
        self.address = address


class DaemonCallError(ClientError):
    """Any other gRPC error: ``code`` is the status code name (e.g. ``NOT_FOUND``)."""

    def __init__(self, rpc: str, code: str, message: str) -> None:
        super().__init__(f"{rpc} failed: {code}: {message}", rpc, message)
        self.code = code
        self.message = message


def grpc_target(address: str) -> str:
    """The grpc target for a daemon address: ``host:port``, ``http://host:port`` or ``unix:///path``."""
    address = address.strip()
    if address.startswith(("http://", "https://")):
        return urlsplit(address).netloc
    return address


def open_channel(address: str) -> grpc.aio.Channel:
    """The one way the tool opens a gRPC channel to a daemon: :class:`DaemonClient`'s, which the
    supervisor's readiness and liveness probes, benchmarks, knob searches and the metrics use."""
    target = grpc_target(address)
    options: list[tuple[str, int | str]] = list(_CHANNEL_OPTIONS)
    if target.startswith("unix:"):
        options.append(("grpc.default_authority", UNIX_SOCKET_AUTHORITY))
    return grpc.aio.insecure_channel(target, options=options)


def translate_error(rpc: str, address: str, error: grpc.aio.AioRpcError) -> ClientError:
    """Map a gRPC error of one call to the client's error classes (see the module docstring)."""
    code = error.code()
    details = str(error.details() or "")
    text = f"{code.name}: {details}" if code is not None else details
    lowered = details.lower()
    if code == grpc.StatusCode.UNAVAILABLE and any(m in lowered for m in _UNREACHABLE_MARKERS):
        return DaemonUnreachable(rpc, address, text)
    if code == grpc.StatusCode.UNAVAILABLE or any(m in lowered for m in _DIED_MARKERS):
        return DaemonDied(rpc, text)
    return DaemonCallError(rpc, code.name if code is not None else "UNKNOWN", details)


_Resp = TypeVar("_Resp")


class DaemonClient:
    """An asyncio client for the eight RPCs; use as ``async with DaemonClient(addr) as c``."""

    def __init__(self, address: str) -> None:
        self.address = address
        self._channel = open_channel(address)
        self._stub = pb_grpc.ProvingEngineStub(self._channel)

    async def __aenter__(self) -> DaemonClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._channel.close()

    async def _call(self, rpc: str, call: Callable[[], Awaitable[_Resp]]) -> _Resp:
        try:
            return await call()
        except grpc.aio.AioRpcError as error:
            raise translate_error(rpc, self.address, error) from error

    async def submit_proof(
        self, request: pb.SubmitProofRequest, timeout: float | None = 60.0
    ) -> pb.SubmitProofResponse:
        return await self._call("SubmitProof", lambda: self._stub.SubmitProof(request, timeout=timeout))

    async def await_proof(self, job_id: str, timeout: float | None = None) -> pb.AwaitProofResponse:
        """Wait for a job (the daemon ignores its own timeout field; ``timeout`` is a client deadline)."""
        request = pb.AwaitProofRequest(job_id=job_id)
        return await self._call("AwaitProof", lambda: self._stub.AwaitProof(request, timeout=timeout))

    async def prove(self, request: pb.SubmitProofRequest, timeout: float | None = None) -> pb.AwaitProofResponse:
        """Submit and wait in one call, as Curio does; returns the result (COMPLETED or FAILED)."""
        wrapped = pb.ProveRequest(submit=request)
        response: pb.ProveResponse = await self._call("Prove", lambda: self._stub.Prove(wrapped, timeout=timeout))
        return response.result

    async def cancel_proof(self, job_id: str, timeout: float | None = STATUS_TIMEOUT_S) -> bool:
        """Ask the daemon to cancel (a no-op in the real daemon); True when it says the job was running."""
        request = pb.CancelProofRequest(job_id=job_id)
        response: pb.CancelProofResponse = await self._call(
            "CancelProof", lambda: self._stub.CancelProof(request, timeout=timeout)
        )
        return response.was_running

    async def get_status(self, timeout: float | None = STATUS_TIMEOUT_S) -> pb.GetStatusResponse:
        request = pb.GetStatusRequest()
        return await self._call("GetStatus", lambda: self._stub.GetStatus(request, timeout=timeout))

    async def get_metrics(self, timeout: float | None = STATUS_TIMEOUT_S) -> str:
        request = pb.GetMetricsRequest()
        response: pb.GetMetricsResponse = await self._call(
            "GetMetrics", lambda: self._stub.GetMetrics(request, timeout=timeout)
        )
        return response.prometheus_text

    async def preload_srs(self, circuit_id: str, timeout: float | None = None) -> pb.PreloadSrsResponse:
        request = pb.PreloadSrsRequest(circuit_id=circuit_id)
        return await self._call("PreloadSRS", lambda: self._stub.PreloadSRS(request, timeout=timeout))

    async def evict_srs(self, circuit_id: str, timeout: float | None = STATUS_TIMEOUT_S) -> pb.EvictSrsResponse:
        request = pb.EvictSrsRequest(circuit_id=circuit_id)
        return await self._call("EvictSRS", lambda: self._stub.EvictSRS(request, timeout=timeout))


# --------------------------------------------------------------------------------------------
# HTTP /status (docs/daemon-interface.md §5)
# --------------------------------------------------------------------------------------------


class StatusError(Exception):
    """The status endpoint answered, but not with the JSON of docs/daemon-interface.md §5."""


def status_hostport(url: str) -> tuple[str, int]:
    """(host, port) of a status address given as ``host:port`` or ``http://host:port[/status]``."""
    text = url.strip()
    parts = urlsplit(text if "://" in text else f"http://{text}")
    if parts.hostname is None or parts.port is None:
        raise StatusError(f"status address {url!r} is not host:port")
    return parts.hostname, parts.port


def status_endpoint(address: str) -> str:
    """The status endpoint as a URL, for an address given as ``host:port`` (``status_listen``) or as a URL."""
    text = address.strip()
    return text if "://" in text else f"http://{text}/status"


async def fetch_status_json(url: str, timeout: float = 2.0) -> dict[str, Any] | None:
    """GET /status and return the decoded JSON; None when nothing listens (connection refused)."""
    host, port = status_hostport(url)
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    except (ConnectionRefusedError, ConnectionResetError):
        return None
    try:
        request = f"GET /status HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n"
        writer.write(request.encode("ascii"))
        await writer.drain()
        # The daemon closes the connection after each response (Connection: close).
        raw = await asyncio.wait_for(reader.read(), timeout)
    except (ConnectionResetError, BrokenPipeError):
        return None
    finally:
        writer.close()
    head, sep, body = raw.partition(b"\r\n\r\n")
    status_line = head.split(b"\r\n", 1)[0].decode("latin-1")
    if not sep or " 200 " not in f"{status_line} ":
        raise StatusError(f"{host}:{port}/status answered {status_line or 'nothing'!r}")
    try:
        document = json.loads(body)
    except ValueError as error:
        raise StatusError(f"{host}:{port}/status sent a body that is not JSON: {error}") from error
    if not isinstance(document, dict):
        raise StatusError(f"{host}:{port}/status sent {type(document).__name__}, not a JSON object")
    return document


def _allocated(document: dict[str, Any], table: str) -> int | None:
    """Bytes of one /status ``allocations`` table (srs or pce); None when the document has none."""
    allocations = document.get("allocations")
    entries = allocations.get(table) if isinstance(allocations, dict) else None
    if not isinstance(entries, list):
        return None
    return sum(int(entry["bytes"]) for entry in entries)


def _partition_rows(document: dict[str, Any]) -> tuple[str, ...]:
    """Each partition of /status ``pipelines`` as one StatusSnapshot.partitions row, with the GPU worker
    that holds it (``gpu_workers`` current_job / current_partition, status.rs)."""
    holders = {
        (str(w["current_job"]), int(w["current_partition"])): int(w["worker_id"])
        for w in document["gpu_workers"]
        if w.get("current_job") is not None and w.get("current_partition") is not None
    }

    def field(value: Any) -> str:
        return "" if value is None else str(int(value))

    rows = []
    for pipeline in document["pipelines"]:
        job_id = str(pipeline["job_id"])
        for partition in pipeline["partitions"]:
            index = int(partition["index"])
            worker = holders.get((job_id, index))
            synth, gpu = field(partition["synth_ms"]), field(partition["gpu_ms"])
            rows.append("\t".join((job_id, str(index), str(partition["state"]), synth, gpu, field(worker))))
    return tuple(rows)


def _resident_srs(document: dict[str, Any]) -> tuple[str, ...] | None:
    """The circuit ids under ``allocations.srs`` (status.rs AllocationsSnapshot), None when absent."""
    allocations = document.get("allocations")
    if not isinstance(allocations, dict) or not isinstance(allocations.get("srs"), list):
        return None
    return tuple(str(entry["circuit_id"]) for entry in allocations["srs"])


def _emulated_box_scale(document: dict[str, Any], key: str) -> float | None:
    """A positive, finite scale from cuzk-engine's own ``emulated_box`` (engine/views.py); None for the
    real daemon's document (it has no such key), or a malformed one."""
    box = document.get("emulated_box")
    try:
        scale = float(box[key]) if isinstance(box, dict) else None
    except (KeyError, TypeError, ValueError):
        return None
    return scale if scale is not None and 0 < scale < math.inf else None


def engine_memory_scale(document: dict[str, Any]) -> float | None:
    """An engine's memory_scale (real bytes per byte of the box it emulates): its ``emulated_box`` says the
    daemon is the engine; None for the real daemon."""
    return _emulated_box_scale(document, "memory_scale")


def engine_time_scale(document: dict[str, Any]) -> float | None:
    """An engine's time_scale (real seconds per second of the box it emulates); None for the real daemon,
    or an engine too old to say it."""
    return _emulated_box_scale(document, "time_scale")


def engine_box_pid(document: dict[str, Any]) -> int | None:
    """The pid of an engine's box process (``--box-cgroup``: the process the kernel names when it OOM-kills
    the box, engine/box.py); None for the real daemon, an engine whose box is its own process, or junk."""
    box = document.get("emulated_box")
    pid = box.get("box_pid") if isinstance(box, dict) else None
    return pid if isinstance(pid, int) and not isinstance(pid, bool) and pid > 0 else None


def engine_rss_bytes(document: dict[str, Any]) -> int | None:
    """cuzk-engine's own ``emulated_box`` (engine/views.py): the RSS of the box it emulates (the model's
    allocations and the daemon's process) in real bytes (× its memory_scale, a MemorySample's units);
    None for the real daemon's document, or a malformed one."""
    scale = engine_memory_scale(document)
    try:
        return None if scale is None else round(int(document["emulated_box"]["rss_bytes"]) * scale)
    except (KeyError, TypeError, ValueError):
        return None


def snapshot_from_status(document: dict[str, Any], t: float, partitions: bool = False) -> StatusSnapshot:
    """Summarise one /status document (with every partition's state when ``partitions``); StatusError
    names the first missing or mistyped field."""
    try:
        memory = document["memory"]
        counters = document["counters"]
        workers = document["gpu_workers"]
        waiting = sum(
            1
            for pipeline in document["pipelines"]
            for partition in pipeline["partitions"]
            if partition["state"] == "synth_done"
        )
        return StatusSnapshot(
            t=t,
            uptime_secs=float(document["uptime_secs"]),
            budget_total_bytes=int(memory["total_bytes"]),
            budget_used_bytes=int(memory["used_bytes"]),
            synthesizing=int(document["synthesis"]["active"]),
            gpu_workers_busy=sum(1 for w in workers if w["state"] == "proving"),
            gpu_workers_total=len(workers),
            partitions_waiting_gpu=waiting,
            status_json_completed=int(counters["total_completed"]),
            status_json_failed=int(counters["total_failed"]),
            srs_resident=_resident_srs(document),
            partitions=_partition_rows(document) if partitions else (),
            worker_gpus=tuple(f"{int(w['worker_id'])}\t{int(w['gpu_ordinal'])}" for w in workers) if partitions else (),
            srs_resident_bytes=_allocated(document, "srs"),
            pce_resident_bytes=_allocated(document, "pce"),
        )
    except (KeyError, TypeError, ValueError) as error:
        raise StatusError(f"unexpected /status document: {type(error).__name__}: {error}") from error


async def poll_status(url: str, timeout: float = 2.0, partitions: bool = False) -> StatusSnapshot | None:
    """One poll of the status endpoint as an event; None when nothing listens there."""
    document = await fetch_status_json(url, timeout)
    if document is None:
        return None
    return snapshot_from_status(document, time.time(), partitions)
