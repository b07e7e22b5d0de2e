"""vLLM's KV connector base classes, or clean-room stand-ins with the same names.

From vLLM only the leaf module `vllm.distributed.kv_transfer.kv_connector.v1.base` is imported
(its package __init__s would pull in most of vLLM). Each name is taken from it when it has it,
so the connector runs on every vLLM since the v1 API and uses what a newer base adds:
SupportsHMA (hybrid models), KVConnectorTransferResults (failed loads by request) and
KVConnectorWorkerMetadata (worker to scheduler reports), as of vLLM 00f4240 (late 2026).
Without vLLM (tests, tools) the stand-ins below have the same names, signatures and defaults.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
from abc import ABC, abstractmethod
from typing import Any, Dict, Iterable, List, Optional, Set, Tuple

try:
    _vllm_base = importlib.import_module("vllm.distributed.kv_transfer.kv_connector.v1.base")
except ImportError:
    _vllm_base = None

HAVE_VLLM = _vllm_base is not None


class _KVConnectorRole(enum.Enum):
    SCHEDULER = 0
    WORKER = 1


class _KVConnectorMetadata(ABC):  # noqa: B024
    """Base of the per-step metadata the scheduler sends to the workers."""


class _KVConnectorWorkerMetadata(ABC):
    """Per-step metadata a worker sends to the scheduler, aggregated across workers."""

    @abstractmethod
    def aggregate(self, other: "_KVConnectorWorkerMetadata") -> "_KVConnectorWorkerMetadata":
        ...


@dataclasses.dataclass
class _KVConnectorTransferResults:
    finished_sending: Set[str] = dataclasses.field(default_factory=set)
    finished_recving: Set[str] = dataclasses.field(default_factory=set)
    failed_recving: Set[str] = dataclasses.field(default_factory=set)
    prefix_replay_checkpoints: Dict[str, Tuple[str, int, str]] = dataclasses.field(
        default_factory=dict)


class _SupportsHMA(ABC):
    @abstractmethod
    def request_finished_all_groups(self, request: Any, block_ids: Tuple[List[int], ...]
                                    ) -> Tuple[bool, Optional[Dict[str, Any]]]:
        raise NotImplementedError


class _KVConnectorBase_V1(ABC):
    """Stand-in for vllm's KVConnectorBase_V1 when vLLM is not installed."""

    def __init__(self, vllm_config: Any, role: Any, kv_cache_config: Any = None):
        if getattr(vllm_config, "kv_transfer_config", None) is None:
            raise ValueError("kv_transfer_config must be set to use a KV connector")
        self._vllm_config = vllm_config
        self._kv_transfer_config = vllm_config.kv_transfer_config
        self._kv_cache_config = kv_cache_config
        self._kv_cache_manager: Any = None
        self._role = role
        self._connector_metadata: Optional[_KVConnectorMetadata] = None

    @property
    def role(self) -> Any:
        return self._role

    @property
    def requires_kv_delivery(self) -> bool:
        return bool(getattr(self._kv_transfer_config, "is_kv_producer", False))

    def bind_connector_metadata(self, connector_metadata: _KVConnectorMetadata) -> None:
        self._connector_metadata = connector_metadata

    def clear_connector_metadata(self) -> None:
        self._connector_metadata = None

    def _get_connector_metadata(self) -> _KVConnectorMetadata:
        assert self._connector_metadata is not None
        return self._connector_metadata

    def has_connector_metadata(self) -> bool:
        return self._connector_metadata is not None

    def register_kv_caches(self, kv_caches: Dict[str, Any]) -> None:
        return

    def handle_preemptions(self, kv_connector_metadata: Any) -> None:
        return

    def get_finished(self, finished_req_ids: Set[str]) -> Tuple[Optional[Set[str]], Optional[Set[str]]]:
        return None, None

    def get_transfer_results(self, finished_req_ids: Set[str]) -> _KVConnectorTransferResults:
        sending, recving = self.get_finished(finished_req_ids)
        return _KVConnectorTransferResults(finished_sending=set(sending or ()),
                                           finished_recving=set(recving or ()))

    def get_block_ids_with_load_errors(self) -> Set[int]:
        return set()

    def get_kv_connector_stats(self) -> Any:
        return None

    def get_kv_connector_kv_cache_events(self) -> Any:
        return None

    def build_connector_worker_meta(self) -> Any:
        return None

    def shutdown(self) -> None:
        return

    def bind_kv_cache_manager(self, kv_cache_manager: Any) -> None:
        self._kv_cache_manager = kv_cache_manager
        self.bind_gpu_block_pool(getattr(kv_cache_manager, "block_pool", None))

    def bind_gpu_block_pool(self, gpu_block_pool: Any) -> None:
        return

    def on_new_request(self, request: Any) -> None:
        return

    def request_finished(self, request: Any, block_ids: List[int]) -> Tuple[bool, Optional[Dict[str, Any]]]:
        return False, None

    def update_connector_output(self, connector_output: Any) -> None:
        return

    def take_events(self) -> Iterable[Any]:
        return ()

    def has_pending_block_frees(self) -> bool:
        return False

    def has_pending_push_work(self) -> bool:
        return False

    def reset_cache(self) -> Optional[bool]:
        return None

    @classmethod
    def get_required_kvcache_layout(cls, vllm_config: Any) -> Optional[str]:
        return None

    @classmethod
    def requires_piecewise_for_cudagraph(cls, extra_config: Dict[str, Any]) -> bool:
        return False

    @classmethod
    def build_kv_connector_stats(cls, data: Optional[Dict[str, Any]] = None) -> Any:
        return None

    @classmethod
    def build_prom_metrics(cls, vllm_config: Any, metric_types: Dict[type, type],
                           labelnames: List[str], per_engine_labelvalues: Dict[int, List[object]]
                           ) -> Any:
        return None

    # The abstract methods (vLLM's ABC refuses to instantiate a class that lacks them).
    @abstractmethod
    def get_num_new_matched_tokens(self, request: Any, num_computed_tokens: int) -> Tuple[Optional[int], bool]:
        ...

    @abstractmethod
    def update_state_after_alloc(self, request: Any, blocks: Any, num_external_tokens: int) -> None:
        ...

    @abstractmethod
    def build_connector_meta(self, scheduler_output: Any) -> _KVConnectorMetadata:
        ...

    @abstractmethod
    def start_load_kv(self, forward_context: Any, **kwargs: Any) -> None:
        ...

    @abstractmethod
    def wait_for_layer_load(self, layer_name: str) -> None:
        ...

    @abstractmethod
    def save_kv_layer(self, layer_name: str, kv_layer: Any, attn_metadata: Any, **kwargs: Any) -> None:
        ...

    @abstractmethod
    def wait_for_save(self) -> None:
        ...


def _pick(name: str, fallback: Any) -> Any:
    return getattr(_vllm_base, name, fallback) if _vllm_base is not None else fallback


KVConnectorRole = _pick("KVConnectorRole", _KVConnectorRole)
KVConnectorMetadata = _pick("KVConnectorMetadata", _KVConnectorMetadata)
KVConnectorBase_V1 = _pick("KVConnectorBase_V1", _KVConnectorBase_V1)
SupportsHMA = _pick("SupportsHMA", _SupportsHMA)
KVConnectorTransferResults = _pick("KVConnectorTransferResults", _KVConnectorTransferResults)
KVConnectorWorkerMetadata = _pick("KVConnectorWorkerMetadata", _KVConnectorWorkerMetadata)
# Whether the engine asks get_transfer_results (else get_finished) and reads worker metadata.
BASE_HAS_TRANSFER_RESULTS = hasattr(KVConnectorBase_V1, "get_transfer_results")
BASE_HAS_WORKER_META = hasattr(KVConnectorBase_V1, "build_connector_worker_meta")
