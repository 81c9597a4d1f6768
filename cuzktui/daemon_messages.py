"""The real daemon's message texts, named once for the engine that writes them and the parser
that reads them (headless, stdlib only).

Each constant is the exact message of an upstream ``tracing`` event (or the fixed prefix of a
formatted one), grouped by the upstream file that emits it (filecoin-project/curio, extern/cuzk).
Field names and values are not part of the message; engine/tracing.py formats them.
"""

from __future__ import annotations

from typing import Final

# cuzk-daemon/src/main.rs -----------------------------------------------------------------------
DAEMON_STARTING: Final = "cuzk-daemon starting"
CONFIGURATION_LOADED: Final = "configuration loaded"
SET_GPU_THREADS: Final = "set CUZK_GPU_THREADS for C++ groth16_pool"
RAYON_CONFIGURED: Final = "rayon global thread pool configured"
STATUS_HTTP_LISTENING: Final = "status HTTP server listening"
STATUS_HTTP_BIND_FAILED: Final = "failed to bind status HTTP server"
LISTENING_UNIX: Final = "listening on unix socket"
LISTENING_TCP: Final = "listening on TCP"
READY_PREFIX: Final = "cuzk-daemon ready, serving on "  # followed by the address
RECEIVED_SIGINT: Final = "received SIGINT, shutting down"
DAEMON_STOPPED: Final = "cuzk-daemon stopped"

# cuzk-server/src/service.rs ----------------------------------------------------------------------
RPC_SUBMIT: Final = "SubmitProof"
RPC_AWAIT: Final = "AwaitProof"
RPC_PROVE: Final = "Prove"
RPC_PRELOAD: Final = "PreloadSRS"
CANCEL_NOT_IMPLEMENTED: Final = "CancelProof (not yet implemented)"
EVICT_NOT_IMPLEMENTED: Final = "EvictSRS (not yet implemented)"
PROVE_FAILED: Final = "prove failed"
# tonic's answer when a call's grpc-timeout runs out on the server (tonic GrpcTimeout layer).
TIMEOUT_EXPIRED: Final = "Timeout expired"

# cuzk-core/src/scheduler.rs ----------------------------------------------------------------------
JOB_ENQUEUED: Final = "job enqueued"
JOB_DEQUEUED: Final = "job dequeued for proving"

# cuzk-core/src/memory.rs -------------------------------------------------------------------------
ACQUIRE_EXCEEDS_BUDGET: Final = "acquire request exceeds total budget — will block until possible"
BUDGET_ACQUIRED: Final = "budget acquired"
EVICTOR_FREED: Final = "evictor freed memory, retrying acquire"
WAITING_FOR_BUDGET: Final = "waiting for budget (acquire blocked)"
PARTIAL_RELEASE: Final = "partial reservation release"

# cuzk-core/src/srs_manager.rs --------------------------------------------------------------------
SRS_EVICTED: Final = "SRS evicted"
SRS_CACHE_HIT: Final = "SRS already loaded (cache hit)"
SRS_LOADING: Final = "loading SRS from disk"
SRS_LOADED: Final = "SRS loaded successfully"

# cuzk-core/src/pinned_pool.rs --------------------------------------------------------------------
PINNED_ALLOCATED: Final = "pinned pool: allocated new buffer"
PINNED_CHECKIN: Final = "pinned pool: checkin"
PINNED_REUSE: Final = "pinned pool: checkout (reuse)"
PINNED_ALLOC_FAILED: Final = "pinned pool: cudaHostAlloc failed"
PINNED_ALLOC_FAILED_SHORT: Final = "cudaHostAlloc failed"
PINNED_FREED: Final = "pinned pool: freed buffer (evictor)"

# cuzk-pce (recording_cs.rs, disk.rs) ---------------------------------------------------------------
PCE_RECORDED: Final = "RecordingCS: extracted pre-compiled circuit"
PCE_SAVED_RAW: Final = "PCE saved to disk (raw format)"

# bellperson groth16/prover/supraseal.rs ----------------------------------------------------------
SYNTHESIS_TIME_PREFIX: Final = "synthesis time: "  # followed by the Duration's Debug
STARTING_PROOF_TIMER: Final = "starting proof timer"

# cuzk-core/src/pipeline.rs -----------------------------------------------------------------------
PCE_EVICTED: Final = "PCE evicted"
PCE_CACHED: Final = "PCE cached"
PCE_SAVED: Final = "PCE saved to disk"
PCE_EXTRACTION_COMPLETE: Final = "PCE extraction complete"
GPU_PROVE_COMPLETE_SPLIT: Final = "GPU prove complete (split)"
STANDARD_SYNTHESIS_PATH: Final = "using standard synthesis path (synthesize_with_hint)"
CACHED_HINT: Final = "using cached capacity hint for synthesis"
NO_HINT: Final = "no capacity hint cached — first synthesis will grow organically"
HINT_CACHED: Final = "cached synthesis capacity hint"
ATTEMPTING_PINNED: Final = "attempting pinned memory synthesis"
PINNED_CHECKOUT_FAILED: Final = "pinned pool checkout FAILED — falling back to unpinned"
PINNED_PROVER_CREATED: Final = "pinned prover created for partition synthesis"
# Monolithic syntheses (synthesize_porep_c2_multi, synthesize_snap_deals, synthesize_winning_post,
# synthesize_window_post), in their order.
MULTI_STARTING: Final = "starting multi-sector PoRep C2 synthesis"
MULTI_SYNTHESIZING: Final = "synthesizing all circuits (multi-sector batch)"
MULTI_COMPLETE: Final = "multi-sector batch synthesis complete"
SNAP_BUILDING: Final = "building SnapDeals circuits"
SNAP_SYNTHESIZING: Final = "synthesizing SnapDeals circuits"
SNAP_COMPLETE: Final = "SnapDeals synthesis complete"
WINNING_BUILDING: Final = "building WinningPoSt circuit"
WINNING_SYNTHESIZING: Final = "synthesizing WinningPoSt circuits"
WINNING_COMPLETE: Final = "WinningPoSt synthesis complete"
WINDOW_BUILDING: Final = "building WindowPoSt circuit"
WINDOW_SYNTHESIZING: Final = "synthesizing WindowPoSt circuit"
WINDOW_COMPLETE: Final = "WindowPoSt synthesis complete"
PARTITION_SYNTH_COMPLETE: Final = "partition synthesis complete"
SNAP_PARTITION_SYNTH_COMPLETE: Final = "SnapDeals partition synthesis complete"

# cuzk-core/src/engine.rs -------------------------------------------------------------------------
MEMORY_BUDGET_INITIALIZED: Final = "memory budget initialized"
PINNED_POOL_INITIALIZED: Final = "CUDA pinned memory pool initialized"
STARTING_ENGINE: Final = "starting cuzk engine"
EVICTOR_WIRED: Final = "evictor callback wired"
EVICTED_FOR_MEMORY_PRESSURE: Final = "evicted for memory pressure"
INITIALIZING_GPU_WORKERS: Final = "initializing GPU workers"
ENGINE_STARTED: Final = "cuzk engine started"
SHUTTING_DOWN_ENGINE: Final = "shutting down cuzk engine"
DISPATCHING_PARTITIONS: Final = "dispatching per-partition synthesis (budget-gated)"
DISPATCHING_SNAP_PARTITIONS: Final = "dispatching per-partition SnapDeals synthesis (budget-gated)"
ASSIGNED_SEQUENCE: Final = "assigned pipeline sequence number"
ASSIGNED_SNAP_SEQUENCE: Final = "assigned SnapDeals pipeline sequence number"
SKIPPING_SYNTHESIS_FAILED: Final = "skipping synthesis for failed job"
SKIPPING_GPU_FAILED: Final = "skipping GPU prove for failed partitioned job"
PARTITION_SYNTH_FAILED: Final = "partition synthesis failed"
PARTITION_GPU_COMPLETE: Final = "partition GPU prove complete"
ASSEMBLER_NOT_FOUND: Final = "assembler not found, discarding partition result"
DISCARDING_FAILED_RESULT: Final = "discarding GPU result for failed job"
PROOF_ASSEMBLED: Final = "Phase 7: all partitions complete, proof assembled"
SYNTHESIS_COMPLETE_TO_GPU: Final = "synthesis complete, sending to GPU"
BATCH_SPLITTING: Final = "batched proof completed — splitting results"
BATCH_SECTOR_DELIVERED: Final = "sector proof delivered from batch"
SPLIT_BATCH_FAILED: Final = "failed to split batched proofs"
PROOF_COMPLETED_PIPELINE: Final = "proof completed successfully (pipeline)"
MONO_WORKER_STARTED: Final = "monolithic GPU worker started"
MONO_WORKER_SHUTDOWN: Final = "monolithic GPU worker received shutdown signal"
MONO_WORKER_STOPPED: Final = "monolithic GPU worker stopped"
PROCESSING_MONOLITHIC: Final = "processing job (monolithic)"
PROOF_COMPLETED_MONOLITHIC: Final = "proof completed successfully (monolithic)"
PROOF_FAILED: Final = "proof failed"
PIPELINE_WORKER_STARTED: Final = "pipeline GPU worker started"
PIPELINE_WORKER_SHUTDOWN: Final = "pipeline GPU worker received shutdown signal"
PIPELINE_WORKER_STOPPED: Final = "pipeline GPU worker stopped"
SYNTH_WORKER_SHUTDOWN: Final = "synthesis worker received shutdown"
DISPATCHER_SHUTDOWN_SIGNAL: Final = "synthesis dispatcher received shutdown signal"
DISPATCHER_STOPPED: Final = "synthesis dispatcher stopped"
DISPATCHER_SHUTDOWN: Final = "dispatcher: shutdown"
PACER_ENABLED: Final = "GPU queue target dispatch pacer enabled"
PRIORITY_DISPATCHER_STARTED: Final = "synthesis priority dispatcher started (PI pacer)"
PIPELINE_STARTING: Final = "starting pipeline: synthesis task + GPU workers (budget-gated)"
DISPATCHER_STARTED: Final = "synthesis dispatcher started (budget-gated)"
SPAWNING_GPU_WORKERS: Final = "spawning GPU workers with Phase 8 dual-worker interlock"
PROCESSING_BATCH: Final = "processing batch"
SYNTHESIS_FAILED: Final = "synthesis failed"
PARTITION_TO_GPU_QUEUE: Final = "partition synthesis complete, pushing to GPU queue"
PACER_REBOOTSTRAP: Final = "pacer: pipeline drained, re-entering bootstrap"
PACER_BOOTSTRAP_DONE: Final = "pacer: bootstrap done, waiting for first GPU completion"
PACER_CALIBRATED: Final = "pacer: GPU rate calibrated, switching to PI control"
PACER_STATUS: Final = "pacer: status"
GPU_TIMING_HOT_PATH: Final = "GPU_TIMING hot_path pre-prove overhead"
GPU_TIMING_SPAWN: Final = "GPU_TIMING spawn_blocking prove_start"
GPU_TIMING_RETURNED: Final = "GPU_TIMING prove_start returned"
FIN_TIMING_PARTITION: Final = "FIN_TIMING finalizer partition"
FIN_TIMING_MONOLITHIC: Final = "FIN_TIMING finalizer monolithic"
FIN_TIMING_TRIM_SUCCESS: Final = "FIN_TIMING malloc_trim (success path)"
FIN_TIMING_TRIM_DISCARD: Final = "FIN_TIMING malloc_trim (discard path)"
BACKGROUND_PCE_STARTING_PREFIX: Final = "background PCE extraction starting for "  # + the kind's label
BACKGROUND_PCE_COMPLETE_PREFIX: Final = "background PCE extraction complete for "  # + the kind's label
# Input failures (error = %e beside them) and the prefixes engine.rs puts on the job's error text.
C1_PARSE_FAILED: Final = "Phase 7: C1 parse/SRS load failed"  # job error "C1 parse failed: <e>"
SNAP_PARSE_FAILED: Final = "SnapDeals parse/SRS load failed"  # job error "SnapDeals parse failed: <e>"
SYNTHESIS_TASK_PANICKED: Final = "synthesis task panicked"  # job error "synthesis panicked: <JoinError>"
# process_batch built without the cuda-supraseal feature: every pipeline job fails with it, logged in the
# dispatch span without a job id (the job error is "pipeline mode requires cuda-supraseal").
PIPELINE_NEEDS_CUDA: Final = "pipeline mode requires cuda-supraseal feature"
PIPELINE_NEEDS_CUDA_JOB_ERROR: Final = "pipeline mode requires cuda-supraseal"
# The spans the synthesis dispatcher runs process_batch in, one batch of dequeued requests each:
# ``proof_kind`` (Display, as "job dequeued for proving" prints it) in all but the last two, ``batch_size``
# in all but synth_single. A line in one names no job; it is about the requests the dispatcher last took.
DISPATCH_SPANS: Final = frozenset(
    {"synth_single", "synth_batch_full", "synth_preempt_flush", "synth_timeout_flush", "synth_shutdown_flush"}
)
# The PoRep self-check verdicts, "<site> PASSED" / "<site> FAILED — proof will NOT be returned to caller".
SELF_CHECK_PARTITIONED: Final = "Phase 7: PoRep proof self-check"  # process_partition_result
SELF_CHECK_SINGLE: Final = "Pipeline single-sector PoRep proof self-check"  # process_monolithic_result
SELF_CHECK_BATCHED: Final = "Batched PoRep proof self-check"  # process_batch_result, per sector
# process_batch's slotted partition pipeline (slot_size > 0), which the engine does not run.
SELF_CHECK_SLOTTED: Final = "Phase 6: PoRep proof self-check"
SELF_CHECK_PASSED_SUFFIX: Final = " PASSED"
SELF_CHECK_REJECTED_SUFFIX: Final = " — proof will NOT be returned to caller"
PARTITION_VERIFICATION_RESULTS: Final = "per-partition verification results (invalid partitions produced bad proofs)"

# cuzk-core/src/prover.rs (monolithic provers) -----------------------------------------------------
PARSED_C1_WRAPPER: Final = "parsed C1 wrapper"
DESERIALIZED_C1: Final = "deserialized SealCommitPhase1Output"
CALLING_SEAL_COMMIT_PHASE2: Final = "calling seal_commit_phase2 (includes SRS load + synthesis + GPU + verify)"
POREP_C2_PROOF_COMPLETED: Final = "PoRep C2 proof completed"
PROVING_WINNING_POST: Final = "proving WinningPoSt"
WINNING_POST_PROOF_COMPLETED: Final = "WinningPoSt proof completed"
PROVING_WINDOW_POST: Final = "proving WindowPoSt partition"
WINDOW_POST_PROOF_COMPLETED: Final = "WindowPoSt partition proof completed"
PROVING_SNAP_DEALS: Final = "proving SnapDeals update"
SNAP_DEALS_PROOF_COMPLETED: Final = "SnapDeals proof completed"
VERIFYING_POREP: Final = "verifying PoRep proof (self-check)"  # verify_porep_proof
POREP_SELF_CHECK_PASSED: Final = "PoRep proof self-check PASSED"
POREP_SELF_CHECK_INVALID: Final = "PoRep proof self-check FAILED — proof is invalid"

# extern/supraseal-c2/cuda (stderr, not tracing) --------------------------------------------------
CUZK_TIMING_PREFIX: Final = "CUZK_TIMING: "  # groth16_cuda.cu
CUZK_NTT_H_PREFIX: Final = "CUZK_NTT_H: "  # groth16_ntt_h.cu execute_ntt_msm_h

# Job failure texts: what a FAILED proof's error_message holds (anyhow's outermost context, after the
# prefix engine.rs may put before it) when the request, a file the daemon reads or its build is the
# cause. The same request fails the same way whatever the knobs: cuzk-tui tune stops on one.
# prover.rs (the monolithic provers) and pipeline.rs (the same parsers, the partitioned paths):
FAILED_C1_WRAPPER: Final = "failed to parse C1 output wrapper JSON"
FAILED_PHASE1_BASE64: Final = "failed to decode base64 Phase1Output"
FAILED_PHASE1_JSON: Final = "failed to deserialize SealCommitPhase1Output from JSON"
FAILED_VANILLA_CONVERT: Final = "failed to convert vanilla proofs: "
FAILED_SNAP_VANILLA: Final = "failed to deserialize SnapDeals partition proof: "
FAILED_WINNING_VANILLA: Final = "failed to deserialize WinningPoSt vanilla proof: "
FAILED_WINDOW_VANILLA: Final = "failed to deserialize WindowPoSt vanilla proof: "
NO_VANILLA_FOR_SECTOR: Final = "failed to find vanilla proof for sector "
NO_WINNING_VANILLA: Final = "no WinningPoSt vanilla proofs"
WINNING_ONE_SECTOR: Final = "WinningPoSt expected 1 sector proof, got "
NOT_32_BYTES: Final = " must be exactly 32 bytes, got "  # prover.rs to_array32: "<name> must be …"
INVALID_REGISTERED_PROOF: Final = "invalid registered proof for "  # + WinningPoSt / WindowPoSt / SnapDeals
UNKNOWN_POST_PROOF: Final = "unknown RegisteredPoStProof value: "
UNKNOWN_UPDATE_PROOF: Final = "unknown RegisteredUpdateProof value: "
ONLY_32_GIB: Final = " synthesis currently supports only 32 GiB sectors"  # "pipelined …" / "multi-sector …"
ZERO_SEED: Final = "Invalid porep challenge seed"
ZERO_COMMITMENT: Final = "Invalid all zero commitment"  # filecoin-proofs as_safe_commitment, via pipeline.rs
# srs_manager.rs ensure_loaded, pipeline.rs (the PCE cache): the parameter files.
SRS_FILE_NOT_FOUND: Final = "SRS param file not found for "
SRS_LOAD_FAILED: Final = "failed to load SRS from "
SRS_STAT_FAILED: Final = "failed to stat "
PCE_LOAD_FAILED: Final = "failed to load PCE from "
# A build without the CUDA backend (engine.rs, pipeline.rs: every "… requires cuda-supraseal feature").
NEEDS_CUDA_SUPRASEAL: Final = "requires cuda-supraseal"
KNOB_INDEPENDENT_FAILURES: Final = (
    FAILED_C1_WRAPPER, FAILED_PHASE1_BASE64, FAILED_PHASE1_JSON, FAILED_VANILLA_CONVERT, FAILED_SNAP_VANILLA,
    FAILED_WINNING_VANILLA, FAILED_WINDOW_VANILLA, NO_VANILLA_FOR_SECTOR, NO_WINNING_VANILLA, WINNING_ONE_SECTOR,
    NOT_32_BYTES, INVALID_REGISTERED_PROOF, UNKNOWN_POST_PROOF, UNKNOWN_UPDATE_PROOF, ONLY_32_GIB, ZERO_SEED,
    ZERO_COMMITMENT, SRS_FILE_NOT_FOUND, SRS_LOAD_FAILED, SRS_STAT_FAILED, PCE_LOAD_FAILED, NEEDS_CUDA_SUPRASEAL,
)  # fmt: skip
# Texts that hide their cause: the monolithic provers keep only the library call's context (a missing
# parameter file, an input its parser refused, a proof that did not verify all read the same), and the
# self-check (engine.rs) fails a proof whose C1 is not the request's miner's, or a bad GPU result.
# Every proof of a run failing with them is the input; one among completed proofs may be the GPU.
MONOLITHIC_CALL_FAILED: Final = (
    "seal_commit_phase2 failed",
    "generate_winning_post_with_vanilla failed",
    "generate_single_window_post_with_vanilla failed",
    "generate_empty_sector_update_proof_with_vanilla failed",
)
SELF_CHECK_FAILED: Final = "PoRep proof self-check failed"
