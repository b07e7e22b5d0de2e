"""A vLLM-free engine that drives a KV connector exactly as vLLM's scheduler and workers do.

Written from VLLM_CONNECTOR.md §5-§6 (no vLLM code): a scheduler with a block pool, a waiting
queue, chunked prefill, preemption and async loads; N worker instances holding per-layer KV
tensors in a chosen layout (host memory, or the GPU with OPENLAKE_TEST_DEVICE=cuda); metadata pickled between them; worker outputs aggregated the
way vLLM does (a request is finished only when every worker reported it).

The KV written for (layer, token position, global head) is a deterministic function of the whole
token prefix up to that position, so a block loaded under a wrong key, at a wrong offset, in a
wrong layout or for the wrong rank is caught byte for byte (MiniEngine.verify).
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import math
import os
import pickle
import time
from typing import Any, Dict, List, Optional, Set, Tuple

import torch

# ---- Config fakes (the fields a connector reads) --------------------------------------------


@dataclasses.dataclass
class FakeKVTransferConfig:
    kv_connector: str = "OpenLakeConnector"
    kv_connector_module_path: str = "openlake_client.openlake_connector"
    kv_role: str = "kv_both"
    kv_connector_extra_config: Dict[str, Any] = dataclasses.field(default_factory=dict)
    engine_id: str = "mini-engine"
    kv_load_failure_policy: str = "recompute"

    def get_from_extra_config(self, key: str, default: Any) -> Any:
        return self.kv_connector_extra_config.get(key, default)

    @property
    def is_kv_producer(self) -> bool:
        return self.kv_role in ("kv_producer", "kv_both")

    @property
    def is_kv_consumer(self) -> bool:
        return self.kv_role in ("kv_consumer", "kv_both")


@dataclasses.dataclass
class FakeCacheConfig:
    block_size: int = 4
    enable_prefix_caching: bool = False
    prefix_caching_hash_algo: str = "sha256"
    cache_dtype: str = "auto"
    num_gpu_blocks: int = 64
    hash_block_size: Optional[int] = None
    mamba_cache_mode: str = "none"


@dataclasses.dataclass
class FakeParallelConfig:
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    rank: int = 0


@dataclasses.dataclass
class FakeModelConfig:
    model: str = "mini/tiny-llama"
    dtype: str = "float16"
    use_mla: bool = False
    num_layers: int = 2
    num_kv_heads: int = 4
    head_size: int = 8

    def get_num_layers(self, parallel_config: Any = None) -> int:
        return self.num_layers

    def get_num_kv_heads(self, parallel_config: Any = None) -> int:
        if self.use_mla:
            return 1
        tp = getattr(parallel_config, "tensor_parallel_size", 1) if parallel_config else 1
        return self.num_kv_heads // tp

    def get_head_size(self) -> int:
        return self.head_size


@dataclasses.dataclass
class FakeSchedulerConfig:
    max_num_seqs: int = 16
    max_num_batched_tokens: int = 64
    disable_hybrid_kv_cache_manager: bool = True


@dataclasses.dataclass(frozen=True)
class FullAttentionSpec:
    block_size: int
    num_kv_heads: int
    head_size: int
    sliding_window: Optional[int] = None


@dataclasses.dataclass(frozen=True)
class SlidingWindowSpec:
    block_size: int
    num_kv_heads: int
    head_size: int
    sliding_window: int


@dataclasses.dataclass(frozen=True)
class MambaSpec:
    """A Mamba2 layer's state, cached block by block ("align": the state after each block's
    last token, when a computation ends there)."""
    block_size: int
    shapes: Tuple[Tuple[int, ...], ...]
    dtypes: Tuple[Any, ...]
    mamba_cache_mode: str = "align"
    mamba_type: str = "mamba2"


@dataclasses.dataclass
class KVCacheGroupSpec:
    layer_names: List[str]
    kv_cache_spec: Any


@dataclasses.dataclass
class KVCacheConfig:
    """vLLM's KVCacheConfig as a connector sees it: the groups (hybrid models have several)."""
    num_blocks: int
    kv_cache_tensors: List[Any]
    kv_cache_groups: List[KVCacheGroupSpec]


@dataclasses.dataclass
class FakeVllmConfig:
    kv_transfer_config: FakeKVTransferConfig
    cache_config: FakeCacheConfig
    model_config: FakeModelConfig
    parallel_config: FakeParallelConfig
    scheduler_config: FakeSchedulerConfig
    speculative_config: Any = None


# ---- vLLM-compatible block hashing (reimplemented from the description in §4) ---------------

def none_hash() -> bytes:
    seed = os.environ.get("PYTHONHASHSEED")
    if seed is None:
        return os.urandom(32)
    return hashlib.sha256(pickle.dumps(seed)).digest()


def hash_block(parent: Optional[bytes], tokens: Tuple[int, ...], root: bytes) -> bytes:
    return hashlib.sha256(pickle.dumps((parent if parent is not None else root, tokens, None))).digest()


class RequestStatus(enum.Enum):
    WAITING = "waiting"
    WAITING_FOR_REMOTE_KVS = "waiting_for_remote_kvs"
    RUNNING = "running"
    PREEMPTED = "preempted"
    FINISHED = "finished"
    FINISHED_ABORTED = "aborted"


class Request:
    def __init__(self, request_id: str, prompt: List[int], max_tokens: int, block_size: int,
                 root: bytes):
        self.request_id = request_id
        self.prompt_token_ids = list(prompt)
        self.all_token_ids = list(prompt)
        self.num_prompt_tokens = len(prompt)
        self.num_computed_tokens = 0
        self.num_output_tokens = 0
        self.max_tokens = max_tokens
        self.block_hashes: List[bytes] = []
        self.status = RequestStatus.WAITING
        self.num_preemptions = 0
        self.num_external_computed_tokens = 0
        self.num_cached_tokens = 0
        self.kv_transfer_params = None
        self.lora_request = None
        self.cache_salt = None
        self.mm_features: List[Any] = []
        self.priority = 0
        self._bs = block_size
        self._root = root
        self._extend_hashes()

    @property
    def num_tokens(self) -> int:
        return len(self.all_token_ids)

    def _extend_hashes(self) -> None:
        while (len(self.block_hashes) + 1) * self._bs <= self.num_tokens:
            i = len(self.block_hashes)
            toks = tuple(self.all_token_ids[i * self._bs:(i + 1) * self._bs])
            parent = self.block_hashes[-1] if self.block_hashes else None
            self.block_hashes.append(hash_block(parent, toks, self._root))

    def append_output_token_ids(self, token: int) -> None:
        self.all_token_ids.append(token)
        self.num_output_tokens += 1
        self._extend_hashes()


# ---- Scheduler-side data (what SchedulerOutput carries) --------------------------------------

class KVCacheBlocks:
    """Block ids per KV-cache group (a flat list: one group)."""

    def __init__(self, block_ids: Any):
        if block_ids and isinstance(block_ids[0], (list, tuple)):
            self.groups = [list(g) for g in block_ids]
        else:
            self.groups = [list(block_ids)]
        self.block_ids = self.groups[0]

    def get_block_ids(self, allow_none: bool = False) -> Optional[Tuple[List[int], ...]]:
        if allow_none and not any(self.groups):
            return None
        return tuple(list(g) for g in self.groups)

    def new_empty(self) -> "KVCacheBlocks":
        return KVCacheBlocks([[] for _ in self.groups])


@dataclasses.dataclass
class NewRequestData:
    req_id: str
    prompt_token_ids: List[int]
    block_ids: Tuple[List[int], ...]
    num_computed_tokens: int
    sampling_params: Any = None
    mm_features: List[Any] = dataclasses.field(default_factory=list)
    lora_request: Any = None


@dataclasses.dataclass
class CachedRequestData:
    req_ids: List[str]
    resumed_req_ids: Set[str]
    new_token_ids: List[List[int]]
    all_token_ids: Dict[str, List[int]]
    new_block_ids: List[Optional[Tuple[List[int], ...]]]
    num_computed_tokens: List[int]
    num_output_tokens: List[int]


@dataclasses.dataclass
class SchedulerOutput:
    scheduled_new_reqs: List[NewRequestData]
    scheduled_cached_reqs: CachedRequestData
    num_scheduled_tokens: Dict[str, int]
    total_num_scheduled_tokens: int
    finished_req_ids: Set[str]
    preempted_req_ids: Set[str]
    kv_connector_metadata: Any = None
    has_sync_kv_loads: bool = True


@dataclasses.dataclass
class KVConnectorBlockState:
    """vLLM 0.29's SchedulerOutput.kv_connector_block_state: Mamba states committed this step."""
    boundary_state_offloads: Dict[str, List[Tuple[int, int, int]]]


@dataclasses.dataclass
class KVConnectorOutput:
    finished_sending: Optional[Set[str]] = None
    finished_recving: Optional[Set[str]] = None
    kv_connector_stats: Any = None
    kv_cache_events: Any = None
    kv_connector_worker_meta: Any = None
    invalid_block_ids: Set[int] = dataclasses.field(default_factory=set)
    failed_recving: Set[str] = dataclasses.field(default_factory=set)


# ---- Worker-side KV tensors -------------------------------------------------------------------

LAYOUTS = [
    "legacy_fa",        # (2, B, N, H, D)
    "legacy_fa_hnd",    # (2, B, N, H, D) logical, HND physical
    "flashinfer_nhd",   # (B, 2, N, H, D)
    "flashinfer_hnd",   # (B, 2, N, H, D) logical, (B, 2, H, N, D) physical
    "mla",              # (B, N, C)
    "packed",           # (B, H, N, 2D), one tensor per layer
    "std_lbnhc",        # [B, H, N, C] views into one (L, B, N, H, C) buffer
    "std_lbhnc",        # [B, H, N, C] views into one (L, B, H, N, C) buffer
    "kernel_r2",        # FlashInfer NHD with kernel blocks of half a scheduler block
]

MLA_DIM = 24  # latent width of the tiny MLA model (576 in DeepSeek)
# Where workers keep their KV tensors: "cpu", or "cuda" to run every scenario through the GPU
# data path (the connector then picks the torch copy engine).
KV_DEVICE = os.environ.get("OPENLAKE_TEST_DEVICE", "cpu")


# The Mamba model's layer 1: a Mamba2 mixer whose state is a conv state and an SSM state of two
# dtypes, strided views into one buffer of padded pages, as vLLM allocates them.
MAMBA_LAYER = "model.layers.1.mixer"
STATES = (((3, 8), torch.float16), ((2, 4, 4), torch.float32))
STATE_PAGE = 192  # 48 + 128 bytes, padded


def expected_state(prefix_digest: bytes, rank: int) -> List[torch.Tensor]:
    """The Mamba state after a token prefix (its digest), on one TP rank."""
    seed = int.from_bytes(hashlib.blake2b(prefix_digest + b"state" + bytes([rank]),
                                          digest_size=8).digest(), "little") >> 1
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=g).to(dtype) for shape, dtype in STATES]


class FakeAttention:
    def __init__(self, kv_cache: Any):
        self.kv_cache = [kv_cache]


@dataclasses.dataclass
class FakeAttnMetadata:
    slot_mapping: Any = None


class ForwardContext:
    def __init__(self, layers: Dict[str, Any]):
        self.attn_metadata = {name: FakeAttnMetadata() for name in layers}
        self.no_compile_layers = {name: FakeAttention(t) for name, t in layers.items()}
        self.virtual_engine = 0


class KVStore:
    """The KV cache of one worker: per-layer tensors in `layout`, and logical accessors."""

    def __init__(self, layout: str, num_layers: int, num_blocks: int, block_size: int,
                 heads: int, head_size: int, dtype: torch.dtype = torch.float16):
        self.layout = layout
        self.bs = block_size
        self.heads = 1 if layout == "mla" else heads
        self.d = head_size
        self.c = MLA_DIM if layout == "mla" else 2 * head_size
        self.n = block_size // 2 if layout == "kernel_r2" else block_size
        self.r = block_size // self.n
        kb = num_blocks * self.r
        self.names = [f"model.layers.{i}.self_attn.attn" for i in range(num_layers)]
        self.tensors: Dict[str, torch.Tensor] = {}
        z = lambda *s: torch.zeros(*s, dtype=dtype, device=KV_DEVICE)  # noqa: E731
        H, N, D, C = self.heads, self.n, self.d, self.c
        if layout in ("std_lbnhc", "std_lbhnc"):
            if layout == "std_lbnhc":
                buf = z(num_layers, kb, N, H, C)
                views = [buf[i].permute(0, 2, 1, 3) for i in range(num_layers)]
            else:
                buf = z(num_layers, kb, H, N, C)
                views = [buf[i] for i in range(num_layers)]
            self._buffer = buf
            self.tensors = dict(zip(self.names, views))
            return
        for name in self.names:
            if layout == "legacy_fa":
                t = z(2, kb, N, H, D)
            elif layout == "legacy_fa_hnd":
                t = z(2, kb, H, N, D).permute(0, 1, 3, 2, 4)
            elif layout in ("flashinfer_nhd", "kernel_r2"):
                t = z(kb, 2, N, H, D)
            elif layout == "flashinfer_hnd":
                t = z(kb, 2, H, N, D).permute(0, 1, 3, 2, 4)
            elif layout == "mla":
                t = z(kb, N, C)
            elif layout == "packed":
                t = z(kb, H, N, C)
            else:
                raise ValueError(layout)
            self.tensors[name] = t

    def make_state_layer(self, layer: int, name: str, num_blocks: int) -> None:
        """Turns `layer` into a Mamba layer named `name`: its cache is [conv, ssm] state."""
        del self.tensors[self.names[layer]]
        self.names[layer] = name
        buf = torch.zeros(num_blocks, STATE_PAGE, dtype=torch.uint8, device=KV_DEVICE)
        views, at = [], 0
        for shape, dtype in STATES:
            n = math.prod(shape) * torch.tensor([], dtype=dtype).element_size()
            views.append(buf[:, at:at + n].view(dtype).unflatten(1, shape))
            at += n
        self._state_buffer = buf
        self.tensors[name] = views

    def write_state(self, layer: int, block_id: int, values: List[torch.Tensor]) -> None:
        for t, v in zip(self.tensors[self.names[layer]], values):
            t[block_id] = v.to(t.device)

    def read_state(self, layer: int, block_id: int) -> List[torch.Tensor]:
        return [t[block_id].cpu() for t in self.tensors[self.names[layer]]]

    def _where(self, block_id: int, offset: int) -> Tuple[int, int]:
        return block_id * self.r + offset // self.n, offset % self.n

    def write(self, layer: int, block_id: int, offset: int, values: torch.Tensor) -> None:
        """values: (H, C) for this token."""
        t = self.tensors[self.names[layer]]
        k, n = self._where(block_id, offset)
        if self.layout in ("legacy_fa", "legacy_fa_hnd"):
            t[0, k, n] = values[:, :self.d]
            t[1, k, n] = values[:, self.d:]
        elif self.layout in ("flashinfer_nhd", "flashinfer_hnd", "kernel_r2"):
            t[k, 0, n] = values[:, :self.d]
            t[k, 1, n] = values[:, self.d:]
        elif self.layout == "mla":
            t[k, n] = values[0]
        else:  # [B, H, N, C]
            t[k, :, n] = values

    def read(self, layer: int, block_id: int, offset: int) -> torch.Tensor:
        t = self.tensors[self.names[layer]]
        k, n = self._where(block_id, offset)
        if self.layout in ("legacy_fa", "legacy_fa_hnd"):
            return torch.cat([t[0, k, n], t[1, k, n]], dim=-1).cpu()
        if self.layout in ("flashinfer_nhd", "flashinfer_hnd", "kernel_r2"):
            return torch.cat([t[k, 0, n], t[k, 1, n]], dim=-1).cpu()
        if self.layout == "mla":
            return t[k, n].unsqueeze(0).cpu()
        return t[k, :, n].cpu()

    def scribble(self, block_id: int) -> None:
        """Overwrites a block with garbage (what a new owner of a freed block does)."""
        for layer in range(len(self.names)):
            if isinstance(self.tensors[self.names[layer]], list):
                continue  # a Mamba layer's state
            for o in range(self.bs):
                self.write(layer, block_id, o, torch.full((self.heads, self.c), 7.0,
                                                          dtype=torch.float16))


def expected_kv(prefix_digest: bytes, layer: int, heads: List[int], width: int) -> torch.Tensor:
    """KV of one token: a function of the token prefix (its digest), the layer and the head."""
    rows = []
    for h in heads:
        seed = int.from_bytes(hashlib.blake2b(prefix_digest + bytes([layer, h]),
                                              digest_size=8).digest(), "little") >> 1
        g = torch.Generator().manual_seed(seed)
        rows.append(torch.randn(width, generator=g).to(torch.float16))
    return torch.stack(rows)


def prefix_digests(tokens: List[int]) -> List[bytes]:
    out, h = [], hashlib.sha256()
    for t in tokens:
        h.update(t.to_bytes(4, "little", signed=True))
        out.append(h.copy().digest())
    return out


# ---- The worker ---------------------------------------------------------------------------------

class Worker:
    def __init__(self, engine: "MiniEngine", rank: int):
        self.engine = engine
        self.rank = rank
        cfg = engine.worker_config(rank)
        from openlake_client.openlake_connector import OpenLakeConnector, KVConnectorRole

        self.connector = OpenLakeConnector(cfg, KVConnectorRole.WORKER, engine.kv_cache_config)
        mc = cfg.model_config
        heads = mc.get_num_kv_heads(cfg.parallel_config)
        self.heads = list(range(rank * heads, (rank + 1) * heads)) if not mc.use_mla else [0]
        self.kv = KVStore(engine.layout, mc.num_layers, cfg.cache_config.num_gpu_blocks,
                          cfg.cache_config.block_size, heads, mc.head_size)
        if engine.mamba:
            self.kv.make_state_layer(1, MAMBA_LAYER, cfg.cache_config.num_gpu_blocks)
        self.connector.register_kv_caches(self.kv.tensors)

    def step(self, out: SchedulerOutput, meta_blob: bytes) -> KVConnectorOutput:
        c = self.connector
        meta = pickle.loads(meta_blob)
        c.handle_preemptions(meta)
        c.bind_connector_metadata(meta)
        ctx = ForwardContext(self.kv.tensors)
        load_after = self.engine.load_after_forward and not out.has_sync_kv_loads
        if not load_after:
            c.start_load_kv(ctx)
        self.forward(out)
        if load_after:
            c.start_load_kv(ctx)
        c.wait_for_save()
        # vLLM's newest runner asks get_transfer_results (failed loads by request); older ones
        # get_finished.
        failed: Set[str] = set()
        if self.engine.transfer_results and hasattr(c, "get_transfer_results"):
            r = c.get_transfer_results(set(out.finished_req_ids))
            done_sending, done_recving = r.finished_sending or None, r.finished_recving or None
            failed = set(r.failed_recving)
            if not failed <= set(done_recving or ()):
                self.engine.errors.append(f"failed_recving {failed} not in finished_recving")
        else:
            done_sending, done_recving = c.get_finished(set(out.finished_req_ids))
        invalid = c.get_block_ids_with_load_errors()
        stats = c.get_kv_connector_stats()
        events = c.get_kv_connector_kv_cache_events()
        worker_meta = c.build_connector_worker_meta()
        c.clear_connector_metadata()
        return KVConnectorOutput(finished_sending=done_sending, finished_recving=done_recving,
                                 kv_connector_stats=stats, kv_cache_events=events,
                                 kv_connector_worker_meta=worker_meta,
                                 invalid_block_ids=set(invalid), failed_recving=failed)

    def forward(self, out: SchedulerOutput) -> None:
        eng = self.engine
        for layer, name in enumerate(self.kv.names):
            self.connector.wait_for_layer_load(name)
            # What this layer's attention would read of the blocks loaded in this step: with
            # layer-by-layer loads it must be in place now, whatever later layers are doing.
            for rid, ext in eng.sync_loaded.items():
                req = eng.requests[rid]
                stop = req.num_computed_tokens
                eng.layer_checks.append((self.rank, rid, layer,
                                         self.check(req, stop, start=stop - ext, layers=[layer])))
            for rid, n in out.num_scheduled_tokens.items():
                req = eng.requests[rid]
                start = eng.step_start[rid]
                if eng.mamba and layer == 1:
                    self.step_state(req, start, start + n)
                    continue
                for pos in range(start, start + n):
                    self.write_token(req, layer, pos)
            self.connector.save_kv_layer(name, self.kv.tensors[name], FakeAttnMetadata())

    def step_state(self, req: Request, start: int, end: int) -> None:
        """The Mamba layer over tokens [start, end): reads the state after token `start` from
        the block holding it (a loaded block when the prefix came from the pool: checked here),
        writes the state after `end` into the running block, the last of the table."""
        bs = self.engine.block_size
        table = self.engine.table(req.request_id, 1)
        digests = prefix_digests(req.all_token_ids[:end])
        if start > 0:
            block = table[(start - 1) // bs]
            got = self.kv.read_state(1, block)
            want = expected_state(digests[start - 1], self.rank)
            if block == 0 or not all(torch.equal(a, b) for a, b in zip(got, want)):
                self.engine.errors.append(f"{req.request_id}: worker {self.rank} read a wrong "
                                          f"Mamba state at token {start} (block {block})")
        state = expected_state(digests[-1], self.rank)
        self.kv.write_state(1, table[(end - 1) // bs], state)
        committed = self.engine.committed.get(req.request_id)
        if committed is not None:
            self.kv.write_state(1, committed, state)

    def write_token(self, req: Request, layer: int, pos: int) -> None:
        blocks = self.engine.table(req.request_id, layer)
        bs = self.engine.block_size
        digest = prefix_digests(req.all_token_ids[:pos + 1])[-1]
        self.kv.write(layer, blocks[pos // bs], pos % bs,
                      expected_kv(digest, layer, self.heads, self.kv.c))

    def check(self, req: Request, upto: int, start: int = 0,
              layers: Optional[List[int]] = None) -> List[int]:
        """Positions in [start, upto) whose KV (in `layers`, default all) differs from what a
        recompute writes (empty when right)."""
        bs = self.engine.block_size
        digests = prefix_digests(req.all_token_ids[:upto])
        bad = []
        for pos in range(start, upto):
            for layer in (range(len(self.kv.names)) if layers is None else layers):
                if not self.engine.needs(layer, pos, upto):
                    continue  # a sliding-window layer never reads it again
                blocks = self.engine.table(req.request_id, layer)
                got = self.kv.read(layer, blocks[pos // bs], pos % bs)
                want = expected_kv(digests[pos], layer, self.heads, self.kv.c)
                if not torch.equal(got, want):
                    bad.append(pos)
                    break
        return bad


# ---- The engine (scheduler + workers) ----------------------------------------------------------

class MiniEngine:
    def __init__(self, extra: Dict[str, Any], layout: str = "flashinfer_nhd", tp: int = 1,
                 num_blocks: int = 64, block_size: int = 4, token_budget: int = 64,
                 kv_role: str = "kv_both", load_after_forward: bool = False,
                 use_mla: bool = False, prefix_caching: bool = False,
                 window: Optional[int] = None, transfer_results: bool = True,
                 mamba: bool = False, handoff: bool = False):
        """`window`: a hybrid model (vLLM's HMA): layer 0 full attention (group 0), layer 1 a
        sliding window of `window` tokens (group 1, its own block table, blocks out of the
        window freed to vLLM's null block 0). `mamba`: a hybrid whose layer 1 is a Mamba2 layer
        (group 1: its conv and SSM state, cached in "align" mode as vLLM does: prefill chunks
        end on block boundaries, the state after a chunk lands in the chunk's last block, the
        blocks before the running one are freed); with `handoff` the engine also hands the
        states it commits to the connector, as vLLM 0.29 does. `transfer_results`: the worker answers
        through get_transfer_results (vLLM's newest runner) rather than get_finished."""
        if handoff and not mamba:
            raise ValueError("handoff is a Mamba model's")
        if mamba and (window is not None or prefix_caching):
            raise ValueError("the mini engine's Mamba model has no window and no local prefix cache")
        self.extra = dict(extra)
        self.layout = "mla" if use_mla else layout
        self.tp = tp
        self.block_size = block_size
        self.num_blocks = num_blocks
        self.budget = token_budget
        self.kv_role = kv_role
        self.load_after_forward = load_after_forward
        self.use_mla = use_mla or layout == "mla"
        self.prefix_caching = prefix_caching
        self.window = block_size if mamba else window
        self.mamba = mamba
        self.handoff = handoff
        self.committed: Dict[str, int] = {}  # request -> block its state is committed to (handoff)
        self.hybrid = mamba or window is not None
        self.transfer_results = transfer_results
        self.errors: List[str] = []
        self.root = none_hash()
        self.kv_cache_config = None
        if mamba:
            names = ["model.layers.0.self_attn.attn", MAMBA_LAYER]
            heads = FakeModelConfig().num_kv_heads // tp
            self.kv_cache_config = KVCacheConfig(num_blocks, [], [
                KVCacheGroupSpec([names[0]], FullAttentionSpec(block_size, heads, 8)),
                KVCacheGroupSpec([names[1]], MambaSpec(block_size, tuple(s for s, _ in STATES),
                                                       tuple(d for _, d in STATES)))])
        elif window is not None:
            names = [f"model.layers.{i}.self_attn.attn" for i in range(2)]
            heads = FakeModelConfig().num_kv_heads // tp
            self.kv_cache_config = KVCacheConfig(num_blocks, [], [
                KVCacheGroupSpec([names[0]], FullAttentionSpec(block_size, heads, 8)),
                KVCacheGroupSpec([names[1]], SlidingWindowSpec(block_size, heads, 8, window))])
        from openlake_client.openlake_connector import OpenLakeConnector, KVConnectorRole

        self.scheduler = OpenLakeConnector(self.worker_config(0), KVConnectorRole.SCHEDULER,
                                           self.kv_cache_config)
        if self.scheduler.requires_kv_delivery:
            self.errors.append("a cache connector must not require KV delivery")
        self.workers = [Worker(self, r) for r in range(tp)]
        self.requests: Dict[str, Request] = {}
        self.waiting: List[str] = []
        self.running: List[str] = []
        self.remote_wait: Set[str] = set()        # WAITING_FOR_REMOTE_KVS
        self.remote_ready: Set[str] = set()
        self.req_blocks: Dict[str, List[int]] = {}
        # Hybrid: block 0 is vLLM's null block, in both groups.
        self.free_blocks: List[int] = list(range(1 if self.hybrid else 0, num_blocks))
        self.win_blocks: Dict[str, List[int]] = {}  # group 1 (sliding window) block tables
        self.win_free: List[int] = list(range(1, num_blocks)) if self.hybrid else []
        self.win_held: Dict[str, List[int]] = {}
        self.events: List[Any] = []
        self.kv_stats: Any = None
        self.held: Dict[str, List[int]] = {}      # finished, blocks kept until finished_sending
        self.finished_ids: Set[str] = set()       # finished since the last step
        self.step_start: Dict[str, int] = {}
        self.pending_preempted: Set[str] = set()
        self.sync_loaded: Dict[str, int] = {}     # req -> tokens loaded synchronously this step
        self.external: Dict[str, int] = {}        # req -> external tokens at its last schedule
        self.lookup_answers: List[Tuple[str, Any]] = []
        self.done: List[str] = []
        self.steps = 0
        self.local_cache: Dict[bytes, int] = {}   # block hash -> block id (prefix caching)
        self.async_target: Dict[str, int] = {}    # req -> tokens computed once its load lands
        self.loaded_upto: Dict[str, int] = {}     # req -> tokens valid after its async load
        self.invalid_seen: Set[int] = set()
        self.failed_seen: Set[str] = set()
        # (worker, request, layer, wrong positions) of sync loads, checked as each layer ran
        self.layer_checks: List[Tuple[int, str, int, List[int]]] = []
        self.report_counts: Dict[str, Dict[str, int]] = {}

    def worker_config(self, rank: int) -> FakeVllmConfig:
        return FakeVllmConfig(
            kv_transfer_config=FakeKVTransferConfig(kv_role=self.kv_role,
                                                    kv_connector_extra_config=self.extra),
            cache_config=FakeCacheConfig(block_size=self.block_size, num_gpu_blocks=self.num_blocks,
                                         enable_prefix_caching=self.prefix_caching,
                                         mamba_cache_mode="align" if self.mamba else "none"),
            model_config=FakeModelConfig(use_mla=self.use_mla),
            parallel_config=FakeParallelConfig(tensor_parallel_size=self.tp, rank=rank),
            scheduler_config=FakeSchedulerConfig(max_num_batched_tokens=self.budget))

    def table(self, rid: str, layer: int) -> List[int]:
        """The block table a layer's KV of this request is in."""
        if self.hybrid and layer == 1:
            return self.win_blocks[rid]
        return self.req_blocks[rid]

    def needs(self, layer: int, pos: int, upto: int) -> bool:
        """Whether the token after `upto` attends position `pos` in this layer."""
        if not self.hybrid or layer == 0:
            return True
        return not self.mamba and pos >= upto - self.window

    def groups(self, rid: str) -> Tuple[List[int], ...]:
        """This request's block ids per KV-cache group, as vLLM hands them to the connector."""
        g0 = list(self.req_blocks.get(rid, []))
        if not self.hybrid:
            return (g0,)
        return (g0, list(self.win_blocks.get(rid, [])))

    # ---- Requests ---------------------------------------------------------------------------

    def add(self, rid: str, prompt: List[int], max_tokens: int = 2) -> Request:
        req = Request(rid, prompt, max_tokens, self.block_size, self.root)
        self.requests[rid] = req
        self.waiting.append(rid)
        return req

    def abort(self, rid: str) -> None:
        req = self.requests[rid]
        if rid in self.waiting:
            self.waiting.remove(rid)
        if rid in self.running:
            self.running.remove(rid)
        self.remote_ready.discard(rid)
        # A request waiting for remote KVs stays in remote_wait: its blocks are held until the
        # worker reports its load finished (finished_recving).
        self._finish(req, RequestStatus.FINISHED_ABORTED)

    def _finish(self, req: Request, status: RequestStatus) -> None:
        req.status = status
        rid = req.request_id
        groups = self.groups(rid)
        blocks = self.req_blocks.pop(rid, [])
        win = [b for b in self.win_blocks.pop(rid, []) if b]
        if self.hybrid:
            delay, _ = self.scheduler.request_finished_all_groups(req, groups)
        else:
            delay, _ = self.scheduler.request_finished(req, list(blocks))
        self.finished_ids.add(rid)
        if delay or rid in self.remote_wait:
            self.held[rid] = blocks  # freed on finished_sending / finished_recving
            self.win_held[rid] = win
        else:
            self._free(blocks)
            self._free_win(win)
        self.done.append(rid)

    def _free(self, blocks: List[int]) -> None:
        for b in blocks:
            if b not in self.free_blocks:
                self.free_blocks.append(b)

    def _free_win(self, blocks: List[int]) -> None:
        for b in blocks:
            if b and b not in self.win_free:
                self.win_free.append(b)

    def _alloc(self, rid: str, tokens: int) -> bool:
        have = self.req_blocks.setdefault(rid, [])
        need = -(-tokens // self.block_size) - len(have)
        if need <= 0:
            return True
        if need > len(self.free_blocks) or (self.hybrid and need > len(self.win_free)):
            return False
        for _ in range(need):
            have.append(self.free_blocks.pop(0))
            if self.hybrid:
                self.win_blocks.setdefault(rid, []).append(self.win_free.pop(0))
        return True

    def _skip_out_of_window(self) -> None:
        """vLLM's remove_skipped_blocks: a sliding-window group's blocks that no later token
        reads (a Mamba group's: those before the block holding the running state) go back to
        the pool, the table keeping the null block (0) in their place."""
        if not self.hybrid:
            return
        for rid in self.running:
            req = self.requests[rid]
            table = self.win_blocks.get(rid, [])
            for i in range(min(len(table), max(0, req.num_computed_tokens - self.window)
                               // self.block_size)):
                if table[i]:
                    self._free_win([table[i]])
                    table[i] = 0

    def _preempt_one(self, keep: str) -> Optional[str]:
        for rid in reversed(self.running):
            if rid == keep:
                continue
            self.running.remove(rid)
            req = self.requests[rid]
            self._free(self.req_blocks.pop(rid, []))
            self._free_win(self.win_blocks.pop(rid, []))
            req.num_computed_tokens = 0
            req.status = RequestStatus.PREEMPTED
            req.num_preemptions += 1
            self.waiting.insert(0, rid)
            self.pending_preempted.add(rid)
            return rid
        return None

    # ---- One step --------------------------------------------------------------------------

    def step(self) -> int:
        """One scheduler step on every worker; returns the tokens it scheduled."""
        self.steps += 1
        budget = self.budget
        new_reqs: List[NewRequestData] = []
        cached = CachedRequestData([], set(), [], {}, [], [], [])
        scheduled: Dict[str, int] = {}
        self.step_start = {}
        self.sync_loaded = {}
        preempted_this_step: Set[str] = set(self.pending_preempted)
        self.pending_preempted.clear()

        # Running requests first (decode, or the rest of a chunked prefill).
        for rid in list(self.running):
            if budget <= 0:
                break
            if rid not in self.running:  # preempted earlier in this loop
                continue
            req = self.requests[rid]
            n = self._split(req, req.num_computed_tokens,
                            min(budget, req.num_tokens - req.num_computed_tokens))
            if n <= 0:
                continue
            before = len(self.req_blocks.get(rid, []))
            while not self._alloc(rid, req.num_computed_tokens + n):
                if self.scheduler.has_pending_block_frees():
                    break  # finished requests' blocks come back when their saves are done
                victim = self._preempt_one(keep=rid)
                if victim is None:
                    break
                preempted_this_step.add(victim)
            if rid not in self.running:
                continue
            if not self._alloc(rid, req.num_computed_tokens + n):
                continue
            new_ids = self.req_blocks[rid][before:]
            new_win = self.win_blocks.get(rid, [])[before:]
            cached.req_ids.append(rid)
            cached.new_token_ids.append([])
            cached.all_token_ids[rid] = list(req.all_token_ids)
            if self.hybrid:
                cached.new_block_ids.append((new_ids, new_win) if new_ids else None)
            else:
                cached.new_block_ids.append((new_ids,) if new_ids else None)
            cached.num_computed_tokens.append(req.num_computed_tokens)
            cached.num_output_tokens.append(req.num_output_tokens)
            scheduled[rid] = n
            self.step_start[rid] = req.num_computed_tokens
            budget -= n

        # Requests whose async load finished: resume them.
        for rid in list(self.remote_ready):
            if budget <= 0:
                break
            req = self.requests[rid]
            self.remote_ready.discard(rid)
            req.num_computed_tokens = min(self.loaded_upto.pop(rid), req.num_tokens - 1)
            self.scheduler.update_state_after_alloc(req, KVCacheBlocks(self.groups(rid)), 0)
            n = self._split(req, req.num_computed_tokens,
                            min(budget, req.num_tokens - req.num_computed_tokens))
            if n <= 0 or not self._alloc(rid, req.num_computed_tokens + n):
                self.remote_ready.add(rid)
                continue
            self._schedule_new(req, n, new_reqs, scheduled)
            budget -= n

        # Waiting requests.
        for rid in list(self.waiting):
            if budget <= 0:
                break
            req = self.requests[rid]
            local = self._local_hit(req)
            first = self.scheduler.get_num_new_matched_tokens(req, local)
            again = self.scheduler.get_num_new_matched_tokens(req, local)
            self.lookup_answers.append((rid, first))
            if first[0] is not None and again != first:
                self.errors.append(f"{rid}: get_num_new_matched_tokens not idempotent: {first} vs {again}")
            ext, is_async = again
            if ext is None:
                continue  # lookup in progress: ask again next step
            if ext and local + ext >= req.num_tokens:
                self.errors.append(f"{rid}: connector claimed the whole prompt ({local}+{ext})")
            computed = local + ext
            n = 0 if (is_async and ext) else self._split(req, computed,
                                                         min(budget, req.num_tokens - computed))
            if n <= 0 and not (is_async and ext):
                continue
            if not self._alloc(rid, computed + n):
                self._free(self.req_blocks.pop(rid, []))
                self._free_win(self.win_blocks.pop(rid, []))
                break
            self.waiting.remove(rid)
            self.scheduler.update_state_after_alloc(req, KVCacheBlocks(self.groups(rid)), ext)
            self.external[rid] = ext
            if is_async and ext:
                req.status = RequestStatus.WAITING_FOR_REMOTE_KVS
                self.remote_wait.add(rid)
                self.async_target[rid] = computed
                continue
            req.num_computed_tokens = computed
            if ext:
                self.sync_loaded[rid] = ext
            self._schedule_new(req, n, new_reqs, scheduled)
            budget -= n

        out = SchedulerOutput(new_reqs, cached, scheduled, sum(scheduled.values()),
                              set(self.finished_ids), preempted_this_step)
        if self.handoff:
            out.kv_connector_block_state = KVConnectorBlockState(self._commit_states(scheduled))
        self.finished_ids = set()
        meta = self.scheduler.build_connector_meta(out)
        out.has_sync_kv_loads = any(not l.is_async for l in getattr(meta, "loads", []))
        blob = pickle.dumps(meta)  # metadata crosses a process boundary in vLLM
        outputs = [w.step(out, blob) for w in self.workers]
        # A committed copy is only pinned for its step: the next owner scribbles over it.
        for block in self.committed.values():
            for w in self.workers:
                w.kv.write_state(1, block, [torch.full(s, 9.0, dtype=d) for s, d in STATES])
            self.win_free.append(block)
        self.committed = {}
        self._update_from_output(out, outputs)
        return out.total_num_scheduled_tokens

    def _commit_states(self, scheduled: Dict[str, int]) -> Dict[str, List[Tuple[int, int, int]]]:
        """vLLM's hand-off of committed Mamba states (`handoff`): a step of a prompt's prefill
        that ends on a boundary of two blocks commits the state there into a block of its own
        (the workers copy it), offered as (group, block, boundary). Boundaries of one block only
        are not committed, so a connector reading the table instead would store more."""
        offers: Dict[str, List[Tuple[int, int, int]]] = {}
        for rid, n in scheduled.items():
            end = self.step_start[rid] + n
            if end % (2 * self.block_size) or end > self.requests[rid].num_prompt_tokens:
                continue
            if not self.win_free:
                continue
            block = self.win_free.pop(0)
            self.committed[rid] = block
            offers[rid] = [(1, block, end)]
        return offers

    def _split(self, req: Request, computed: int, n: int) -> int:
        """vLLM's _mamba_block_aligned_split (Mamba models, "align" mode): a prefill chunk ends
        on a block boundary, and the prompt's last full block ends a chunk of its own, so that
        the state at each boundary a chunk ends on is cached in that block."""
        if not self.mamba or computed >= max(req.num_prompt_tokens, req.num_tokens - 1):
            return n
        bs = self.block_size
        last = req.num_tokens - req.num_tokens % bs
        if computed + n < last:
            return n // bs * bs
        if computed < last < computed + n:
            return last - computed
        return n

    def _schedule_new(self, req: Request, n: int, new_reqs: List[NewRequestData],
                      scheduled: Dict[str, int]) -> None:
        rid = req.request_id
        req.status = RequestStatus.RUNNING
        self.running.append(rid)
        new_reqs.append(NewRequestData(rid, req.prompt_token_ids, self.groups(rid),
                                       req.num_computed_tokens))
        scheduled[rid] = n
        self.step_start[rid] = req.num_computed_tokens

    def _local_hit(self, req: Request) -> int:
        if not self.prefix_caching:
            return 0
        ids = []
        for h in req.block_hashes:
            b = self.local_cache.get(h)
            if b is None or b not in self.free_blocks:
                break
            ids.append(b)
        n = min(len(ids), (req.num_tokens - 1) // self.block_size)
        if n == 0:
            return 0
        for b in ids[:n]:
            self.free_blocks.remove(b)
        self.req_blocks[req.request_id] = ids[:n]
        return n * self.block_size

    def _update_from_output(self, out: SchedulerOutput, outputs: List[KVConnectorOutput]) -> None:
        n = len(outputs)

        def agg(field: str) -> Set[str]:
            # As vLLM's output aggregator: a request is done once every worker has reported
            # it, in whichever steps they did.
            counts = self.report_counts.setdefault(field, {})
            done = set()
            for o in outputs:
                for rid in getattr(o, field) or ():
                    counts[rid] = counts.get(rid, 0) + 1
                    if counts[rid] == n:
                        done.add(rid)
                        del counts[rid]
            return done

        sending = agg("finished_sending")
        recving = agg("finished_recving")
        invalid: Set[int] = set()
        failed: Set[str] = set()
        for o in outputs:
            invalid |= o.invalid_block_ids
            failed |= o.failed_recving
        self.invalid_seen |= invalid
        self.failed_seen |= failed
        if invalid and self.hybrid:
            # vLLM raises: block ids are only unique within a group.
            self.errors.append(f"invalid_block_ids {sorted(invalid)} reported for a hybrid model")
        # Worker metadata and stats, aggregated across workers as vLLM's output aggregator does.
        worker_meta = None
        for o in outputs:
            if o.kv_connector_worker_meta is not None:
                worker_meta = (o.kv_connector_worker_meta if worker_meta is None
                               else worker_meta.aggregate(o.kv_connector_worker_meta))
        stats = None
        for o in outputs + [KVConnectorOutput(kv_connector_stats=self.scheduler.get_kv_connector_stats())]:
            if o.kv_connector_stats is not None:
                stats = o.kv_connector_stats if stats is None else stats.aggregate(o.kv_connector_stats)
        if stats is not None and not stats.is_empty():
            # The logger process rebuilds stats from their dict (build_kv_connector_stats).
            rebuilt = type(self.scheduler).build_kv_connector_stats(dict(stats.to_dict()))
            self.kv_stats = rebuilt if self.kv_stats is None else self.kv_stats.aggregate(rebuilt)
        merged = KVConnectorOutput(finished_sending=sending or None,
                                   finished_recving=recving or None, invalid_block_ids=invalid,
                                   failed_recving=failed, kv_connector_worker_meta=worker_meta)

        # Sync loads that failed: recompute from the first bad block, discard this step's tokens.
        recompute: Set[str] = set()
        if invalid:
            for rid, ext in self.sync_loaded.items():
                blocks = self.req_blocks.get(rid, [])
                bad = [i for i, b in enumerate(blocks) if b in invalid]
                if bad:
                    req = self.requests[rid]
                    req.num_computed_tokens = bad[0] * self.block_size
                    recompute.add(rid)
        for rid, tokens in out.num_scheduled_tokens.items():
            if rid in recompute or rid not in self.running:
                continue
            req = self.requests[rid]
            req.num_computed_tokens += tokens
            if req.num_computed_tokens >= req.num_tokens:
                digest = prefix_digests(req.all_token_ids)[-1]
                req.append_output_token_ids(int.from_bytes(digest[:2], "little") % 1000)
                if req.num_output_tokens >= req.max_tokens:
                    self.running.remove(rid)
                    self.verify(req, req.num_tokens - 1)
                    if self.prefix_caching:
                        for i, h in enumerate(req.block_hashes):
                            if i < len(self.req_blocks.get(rid, [])):
                                self.local_cache[h] = self.req_blocks[rid][i]
                    self._finish(req, RequestStatus.FINISHED)

        self._skip_out_of_window()
        self.scheduler.update_connector_output(merged)
        for rid in sending:
            self._free(self.held.pop(rid, []))
            self._free_win(self.win_held.pop(rid, []))
        for rid in recving:
            if rid not in self.remote_wait:
                self.errors.append(f"{rid}: finished_recving for a request that was not loading")
                continue
            self.remote_wait.discard(rid)
            req = self.requests[rid]
            if req.status == RequestStatus.FINISHED_ABORTED:
                self._free(self.held.pop(rid, []))
                self._free_win(self.win_held.pop(rid, []))
                self.async_target.pop(rid, None)
                continue
            blocks = self.req_blocks[rid]
            computed = self.async_target.pop(rid)
            if rid in self.failed_seen:
                computed = 0  # kv_load_failure_policy "recompute": from the start
            bad = [i for i, b in enumerate(blocks) if b in self.invalid_seen and i * self.block_size < computed]
            if bad:
                computed = bad[0] * self.block_size
            self.loaded_upto[rid] = computed
            self.remote_ready.add(rid)
        self.events.extend(self.scheduler.take_events())

    # ---- Checks ----------------------------------------------------------------------------

    def verify(self, req: Request, upto: int) -> None:
        for w in self.workers:
            bad = w.check(req, upto)
            if bad:
                self.errors.append(f"{req.request_id}: worker {w.rank} has wrong KV at positions "
                                   f"{bad[:8]}{'...' if len(bad) > 8 else ''}")

    def run(self, max_steps: int = 200, idle_seconds: float = 20.0) -> None:
        """Steps until every request finished and every held block was released.

        A step that schedules nothing (waiting on async loads or saves) sleeps a millisecond,
        as vLLM's engine loop blocks on the workers' outputs instead of spinning.
        """
        busy = 0
        idle_deadline = time.monotonic() + idle_seconds
        while (self.waiting or self.running or self.remote_wait or self.remote_ready or self.held
               or self.scheduler.has_pending_push_work()):
            if busy >= max_steps or time.monotonic() > idle_deadline:
                w = self.workers[0].connector
                raise RuntimeError(
                    f"engine did not drain ({busy} busy steps): waiting={self.waiting} "
                    f"running={self.running} remote={self.remote_wait} held={list(self.held)} "
                    f"scheduler async={self.scheduler._async_saving} worker pending="
                    f"{w._pending_saves} finished={w._finished}")
            if self.step():
                busy += 1
            else:
                time.sleep(0.001)

    def shutdown(self) -> None:
        self.scheduler.shutdown()
        for w in self.workers:
            w.connector.shutdown()
