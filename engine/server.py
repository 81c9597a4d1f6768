"""The ``cuzk.v1.ProvingEngine`` gRPC service with the daemon's semantics (docs/daemon-interface.md §1)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, Final, TypeVar

import grpc

from cuzktui import daemon_messages as msg
from cuzktui.daemon_facts import ProofKind
from cuzktui.proto import proving_pb2 as pb

from . import tracing
from .jobs import JobResult, ProofRequest, Status
from .pipeline import Engine
from .srs import UnknownCircuit
from .views import metrics_text
from .wire import WireRequest, read_prove, read_submit

T = TypeVar("T")
MESSAGE_LIMIT: Final = 128 * 1024 * 1024
# grpcio would reject oversized requests itself with another code and text; it accepts up to
# this much so the servicer can answer exactly like tonic does.
TRANSPORT_RECEIVE_LIMIT: Final = 4 * MESSAGE_LIMIT
GRPC_OPTIONS: Final = [
    ("grpc.max_send_message_length", MESSAGE_LIMIT),
    ("grpc.max_receive_message_length", TRANSPORT_RECEIVE_LIMIT),
    ("grpc.so_reuseport", 0),
]


def _request(msg: pb.SubmitProofRequest) -> ProofRequest:
    """The request's fields; its payload is handed on where it lies (:mod:`engine.wire`)."""
    return ProofRequest(
        request_id=msg.request_id,
        kind=ProofKind(msg.proof_kind),
        priority=int(msg.priority),
        registered_proof=msg.registered_proof,
        sector_size=msg.sector_size,
        sector_number=msg.sector_number,
        miner_id=msg.miner_id,
        randomness=msg.randomness,
        partition_index=msg.partition_index,
        comm_r_old=msg.comm_r_old,
        comm_r_new=msg.comm_r_new,
        comm_d_new=msg.comm_d_new,
    )


def _response(job_id: str, result: JobResult) -> pb.AwaitProofResponse:
    if result.status is Status.FAILED:
        return pb.AwaitProofResponse(job_id=job_id, status=pb.AwaitProofResponse.FAILED, error_message=result.error)
    return pb.AwaitProofResponse(
        job_id=job_id,
        status=pb.AwaitProofResponse.COMPLETED,
        proof=result.proof,
        queue_wait_ms=result.queue_wait_ms,
        srs_load_ms=0,
        synthesis_ms=result.synthesis_ms,
        gpu_compute_ms=result.gpu_ms,
        total_ms=result.total_ms,
    )


class ProvingService:
    """The eight RPCs (service.rs ``ProvingService``)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.log = engine.log

    async def _check_submit(self, size: int, msg: pb.SubmitProofRequest, context: Any) -> None:
        if size > MESSAGE_LIMIT:
            await context.abort(
                grpc.StatusCode.OUT_OF_RANGE,
                f"Error, decoded message length too large: found {size} bytes, the limit is: {MESSAGE_LIMIT} bytes",
            )
        if int(msg.proof_kind) not in {int(k) for k in ProofKind}:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"invalid proof_kind: {int(msg.proof_kind)}")

    def _log_arrival(self, rpc: str, wire: WireRequest) -> None:
        msg, payload = wire.message, wire.payload
        self.log.info(
            tracing.SERVICE,
            rpc,
            ("request_id", msg.request_id),
            ("proof_kind", int(msg.proof_kind)),
            ("input_size", payload.end - payload.start),
        )

    async def _within_deadline(self, pending: Awaitable[T], context: Any) -> T:
        """A grpc-timeout that runs out on the server ends the call as tonic's timeout layer does
        (CANCELLED, "Timeout expired"). What is awaited is dropped, as tonic drops the handler's
        future: a Prove's own waiter (the job goes on: engine.rs drops only that receiver)."""
        remaining = context.time_remaining()
        try:
            return await asyncio.wait_for(pending, remaining) if remaining is not None else await pending
        except TimeoutError:
            await context.abort(grpc.StatusCode.CANCELLED, msg.TIMEOUT_EXPIRED)
            raise AssertionError("abort returns only by raising") from None

    async def SubmitProof(self, request: bytes, context: Any) -> pb.SubmitProofResponse:
        """``request``: the message's bytes (:mod:`engine.wire`), which grpcio holds until this returns."""
        self.engine.inputs_held.hold()
        try:
            wire = read_submit(request)
            self._log_arrival(msg.RPC_SUBMIT, wire)
            await self._check_submit(len(request), wire.message, context)
            job, position = self.engine.submit(_request(wire.message), wire.payload)
            return pb.SubmitProofResponse(job_id=job.job_id, queue_position=position, assigned_gpu="")
        finally:
            self.engine.inputs_held.release()

    async def AwaitProof(self, request: pb.AwaitProofRequest, context: Any) -> pb.AwaitProofResponse:
        self.log.info(tracing.SERVICE, msg.RPC_AWAIT, ("job_id", request.job_id))
        found = self.engine.await_result(request.job_id)
        if found is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"job not found: {request.job_id}")
            raise AssertionError("abort returns only by raising")
        result = found if isinstance(found, JobResult) else await self._within_deadline(found, context)
        return _response(request.job_id, result)

    async def Prove(self, request: bytes, context: Any) -> pb.ProveResponse:
        """``request``: the message's bytes (:mod:`engine.wire`), which grpcio holds until this returns."""
        self.engine.inputs_held.hold()
        try:
            wire = read_prove(request)
            if wire is None:
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "missing submit field")
                raise AssertionError("abort returns only by raising")
            self._log_arrival(msg.RPC_PROVE, wire)
            await self._check_submit(len(request), wire.message, context)
            request_id = wire.message.request_id
            waiter = self.engine.prove(_request(wire.message), wire.payload)
        finally:
            self.engine.inputs_held.release()
        result = await self._within_deadline(waiter, context)
        # Prove echoes the request id, so a generated UUID is not returned (docs/daemon-interface.md §1.5).
        return pb.ProveResponse(result=_response(request_id, result))

    async def CancelProof(self, request: pb.CancelProofRequest, context: Any) -> pb.CancelProofResponse:
        self.log.warn(tracing.SERVICE, msg.CANCEL_NOT_IMPLEMENTED, ("job_id", request.job_id))
        return pb.CancelProofResponse(was_running=False)

    async def GetStatus(self, request: pb.GetStatusRequest, context: Any) -> pb.GetStatusResponse:
        engine = self.engine
        vram = engine.config.engine.gpu_memory
        gpus = [
            pb.GPUStatus(
                ordinal=w.gpu,
                name=f"cuzk-engine emulated GPU {w.gpu}",
                vram_total_bytes=vram,
                vram_free_bytes=max(0, vram - engine.gpu_vram_used.get(w.gpu, 0)),
                current_job_id="" if w.job is None else w.job.job_id,
                current_proof_kind=w.kind,
            )
            for w in engine.workers
        ]
        # service.rs get_status: loaded_srs lists what PreloadSRS itself loaded (engine.rs
        # preloaded_srs); queues list the kinds with queued jobs, in_progress counting busy workers.
        loaded = [
            pb.SRSStatus(circuit_id=circuit_id, tier=pb.SRSStatus.HOT, size_bytes=0, ref_count=0)
            for circuit_id in engine.preloaded_srs
        ]
        running = engine.running_by_kind()
        queues = [
            pb.QueueStatus(proof_kind=kind, pending=n, in_progress=running.get(kind, 0))
            for kind, n in engine.waiting_by_kind().items()
        ]
        return pb.GetStatusResponse(
            gpus=gpus,
            loaded_srs=loaded,
            queues=queues,
            total_proofs_completed=engine.counters.completed,
            total_proofs_failed=engine.counters.failed,
            uptime_seconds=int(engine.uptime()),
            pinned_memory_bytes=0,
            pinned_memory_limit_bytes=0,
        )

    async def GetMetrics(self, request: pb.GetMetricsRequest, context: Any) -> pb.GetMetricsResponse:
        return pb.GetMetricsResponse(prometheus_text=metrics_text(self.engine))

    async def PreloadSRS(self, request: pb.PreloadSrsRequest, context: Any) -> pb.PreloadSrsResponse:
        self.log.info(tracing.SERVICE, msg.RPC_PRELOAD, ("circuit_id", request.circuit_id))
        try:
            # engine.rs preload_srs loads on a blocking thread, which a timed-out call leaves
            # running: the SRS ends up loaded but not recorded in loaded_srs.
            load = asyncio.ensure_future(self.engine.residency.acquire_srs(request.circuit_id, preload=True))
            already, load_ms = await self._within_deadline(asyncio.shield(load), context)
        except UnknownCircuit:
            await context.abort(grpc.StatusCode.INTERNAL, f"unknown circuit ID: {request.circuit_id}")
            raise AssertionError("abort returns only by raising") from None
        if not already:  # engine.rs preload_srs: an already loaded circuit returns early, unrecorded
            self.engine.preloaded_srs[request.circuit_id] = load_ms
        return pb.PreloadSrsResponse(already_loaded=already, load_time_ms=0 if already else load_ms)

    async def EvictSRS(self, request: pb.EvictSrsRequest, context: Any) -> pb.EvictSrsResponse:
        self.log.warn(tracing.SERVICE, msg.EVICT_NOT_IMPLEMENTED, ("circuit_id", request.circuit_id))
        return pb.EvictSrsResponse(was_loaded=False, freed_bytes=0)


def _message(descriptor: Any) -> Any:
    return getattr(pb, descriptor.name)


# The RPCs whose requests carry proof inputs: their handlers take the message's bytes (engine/wire.py).
RAW_REQUESTS: Final = frozenset({"SubmitProof", "Prove"})


def make_server(engine: Engine) -> Any:
    """The gRPC server with the service's handlers (those of :data:`RAW_REQUESTS` taking bytes)."""
    server = grpc.aio.server(options=GRPC_OPTIONS)
    service = ProvingService(engine)
    descriptor = pb.DESCRIPTOR.services_by_name["ProvingEngine"]
    handlers = {
        method.name: grpc.unary_unary_rpc_method_handler(
            getattr(service, method.name),
            request_deserializer=None
            if method.name in RAW_REQUESTS
            else getattr(pb, method.input_type.name).FromString,
            response_serializer=getattr(pb, method.output_type.name).SerializeToString,
        )
        for method in descriptor.methods
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(descriptor.full_name, handlers),))
    server.add_registered_method_handlers(descriptor.full_name, handlers)
    return server
