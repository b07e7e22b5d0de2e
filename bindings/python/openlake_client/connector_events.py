"""KV cache events of the vLLM connector: which prefix blocks OpenLake holds.

KV-aware routers (llm-d, Dynamo, vLLM's router) follow vLLM's KV event stream to send a request
to the engine that holds its prefix. vLLM publishes, each step, the events of its own GPU cache
and those the scheduler connector's `take_events()` returns. OpenLakeConnector announces:

- BlockStored, with vLLM's block hashes, the parent hash, the blocks' token ids and the block
  size, once every worker (every TP and PP rank) reported the blocks stored: a router then
  knows a request with this prefix hits the pool on this engine's node;
- BlockRemoved, for blocks it announced that a later lookup found gone from the pool (evicted
  or reset) and for everything it announced when the connector's cache is reset.

The medium is "OPENLAKE" by default (openlake_event_medium), so routers can tell the pool from
the GPU cache ("GPU") and vLLM's own CPU offload ("CPU").

Event classes come from vllm.distributed.kv_events when vLLM is installed (imported when the
first event is made), else from the stand-ins below with the same fields.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Any, Dict, List, Optional, Tuple

DEFAULT_MEDIUM = "OPENLAKE"
# Announced blocks remembered (for BlockRemoved): beyond this, the oldest are forgotten.
MAX_ANNOUNCED = 1 << 20


@dataclasses.dataclass
class BlockStoredStandIn:
    block_hashes: List[Any]
    parent_block_hash: Any
    token_ids: List[int]
    block_size: int
    lora_id: Optional[int]
    medium: Optional[str]
    lora_name: Optional[str]
    group_idx: Optional[int] = None


@dataclasses.dataclass
class BlockRemovedStandIn:
    block_hashes: List[Any]
    medium: Optional[str]
    group_idx: Optional[int] = None


def _classes() -> Tuple[Any, Any]:
    try:
        from vllm.distributed.kv_events import BlockRemoved, BlockStored  # type: ignore
        return BlockStored, BlockRemoved
    except Exception:
        return BlockStoredStandIn, BlockRemovedStandIn


def _with_group(cls: Any, kwargs: Dict[str, Any], group: int) -> Dict[str, Any]:
    # group_idx exists in newer vLLM only; group 0 is what an older router assumes anyway.
    fields = getattr(cls, "__struct_fields__", None) or [f.name for f in dataclasses.fields(cls)]
    if "group_idx" in fields:
        kwargs["group_idx"] = group
    return kwargs


class EventLog:
    """What the scheduler connector has announced, and the events it has not handed out yet."""

    def __init__(self, medium: str = DEFAULT_MEDIUM):
        self.medium = medium
        self._pending: List[Any] = []
        # our key -> (vLLM block hash, group), oldest first
        self._announced: "collections.OrderedDict[Tuple[int, bytes], Any]" = collections.OrderedDict()

    def stored(self, group: int, keys: List[bytes], hashes: List[Any], parent: Any,
               token_ids: List[int], block_size: int, lora_name: Optional[str]) -> None:
        if not keys:
            return
        stored_cls, _ = _classes()
        self._pending.append(stored_cls(**_with_group(stored_cls, dict(
            block_hashes=list(hashes), parent_block_hash=parent, token_ids=list(token_ids),
            block_size=int(block_size), lora_id=None, medium=self.medium, lora_name=lora_name),
            group)))
        for k, h in zip(keys, hashes):
            self._announced[(group, k)] = h
            self._announced.move_to_end((group, k))
        while len(self._announced) > MAX_ANNOUNCED:
            self._announced.popitem(last=False)

    def missing(self, group: int, keys: List[bytes]) -> None:
        """Keys a lookup found absent: those announced are announced removed."""
        gone = [self._announced.pop((group, k)) for k in keys if (group, k) in self._announced]
        if gone:
            _, removed_cls = _classes()
            self._pending.append(removed_cls(**_with_group(
                removed_cls, dict(block_hashes=gone, medium=self.medium), group)))

    def cleared(self) -> None:
        by_group: Dict[int, List[Any]] = {}
        for (group, _), h in self._announced.items():
            by_group.setdefault(group, []).append(h)
        self._announced.clear()
        if by_group:
            _, removed_cls = _classes()
            for group, hashes in sorted(by_group.items()):
                self._pending.append(removed_cls(**_with_group(
                    removed_cls, dict(block_hashes=hashes, medium=self.medium), group)))

    def take(self) -> List[Any]:
        out, self._pending = self._pending, []
        return out
