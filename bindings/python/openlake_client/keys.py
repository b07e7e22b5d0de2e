"""Keys, namespaces and the hash-stability check of the vLLM connector.

A block's key is vLLM's block hash (prefix-chained: it fingerprints the whole prefix up to and
including the block), at most 32 bytes. Keys are scoped by a namespace per model shard: one per
(TP rank, PP rank), whose fingerprint also pins dtype, layout, heads, head size and block size,
so an engine can never read bytes laid out for another.

vLLM seeds its hash chain (NONE_HASH) from PYTHONHASHSEED, and from os.urandom when that is unset:
then every process (and every restart) hashes the same prompt differently and nothing stored is
ever found again. The connector refuses to start in that case (require_stable_hashes).
"""

from __future__ import annotations

import hashlib
import os
from typing import Any, Dict, List, Optional, Sequence

MAX_KEY_BYTES = 32


class UnstableHashError(RuntimeError):
    """Block hashes would differ between processes: nothing stored could be found again."""


def block_key(h: Any) -> bytes:
    """OpenLake key of one vLLM block hash (bytes, int, or an older BlockHashType tuple)."""
    if isinstance(h, (bytes, bytearray, memoryview)):
        b = bytes(h)
        return b if 0 < len(b) <= MAX_KEY_BYTES else hashlib.sha256(b).digest()
    if isinstance(h, int):
        return h.to_bytes(16, "little", signed=True)
    value = getattr(h, "hash_value", None)  # BlockHashType(hash_value, token_ids, extra_keys)
    if value is not None:
        return block_key(value)
    return hashlib.sha256(repr(h).encode()).digest()


def hash_group(cache_config: Any) -> int:
    """How many vLLM hash blocks make one scheduler block (hash_block_size may be finer)."""
    block_size = int(getattr(cache_config, "block_size", 16))
    hbs = getattr(cache_config, "hash_block_size", None)
    if not hbs or int(hbs) <= 0 or block_size % int(hbs) != 0:
        return 1
    return block_size // int(hbs)


def request_hashes(request: Any, group: int = 1) -> List[Any]:
    """vLLM's hash of each of the request's full scheduler blocks, in order: with `group` > 1
    (hash blocks finer than scheduler blocks) the last hash of its group. Only the
    num_publishable_block_hashes first hashes count, where vLLM says how many."""
    hashes = list(getattr(request, "block_hashes", None) or [])
    publishable = getattr(request, "num_publishable_block_hashes", None)
    if isinstance(publishable, int):
        hashes = hashes[:publishable]
    return [hashes[(i + 1) * group - 1] for i in range(len(hashes) // group)]


def request_keys(request: Any, group: int = 1, limit: Optional[int] = None) -> List[bytes]:
    """Keys of the request's full scheduler blocks, in order (request_hashes as keys); `limit`
    caps the count."""
    hashes = request_hashes(request, group)
    return [block_key(h) for h in hashes[:limit]]


def require_stable_hashes(cache_config: Any, extra: Dict[str, Any]) -> None:
    """Raises UnstableHashError unless block hashes agree across processes and restarts."""
    if extra.get("openlake_allow_unstable_hashes"):
        return
    seed = os.environ.get("PYTHONHASHSEED")
    if seed is not None and seed != "random":
        return
    if extra.get("openlake_hash_seed_fixed"):
        return  # a vLLM whose NONE_HASH no longer depends on PYTHONHASHSEED
    algo = getattr(cache_config, "prefix_caching_hash_algo", "sha256")
    raise UnstableHashError(
        "OpenLakeConnector: vLLM's block hashes would differ in every process, so nothing stored "
        f"could ever be found again (PYTHONHASHSEED is {'unset' if seed is None else 'random'}; "
        f"prefix_caching_hash_algo={algo} seeds its hash chain from it). Start vLLM and its workers "
        "with the same PYTHONHASHSEED everywhere (e.g. PYTHONHASHSEED=0), or set "
        "kv_connector_extra_config.openlake_hash_seed_fixed=true on a vLLM whose hash seed is fixed.")


def _cfg(obj: Any, name: str, default: Any = None) -> Any:
    return getattr(obj, name, default) if obj is not None else default


def model_name(vllm_config: Any) -> str:
    mc = _cfg(vllm_config, "model_config")
    return str(_cfg(mc, "served_model_name", None) or _cfg(mc, "model", None) or "model")


def dtype_name(vllm_config: Any) -> str:
    cc = _cfg(vllm_config, "cache_config")
    cache_dtype = str(_cfg(cc, "cache_dtype", "auto") or "auto")
    if cache_dtype != "auto":
        return cache_dtype
    return str(_cfg(_cfg(vllm_config, "model_config"), "dtype", "auto")).replace("torch.", "")


def parallel_ranks(vllm_config: Any, rank: Optional[int] = None) -> Dict[str, int]:
    pc = _cfg(vllm_config, "parallel_config")
    tp = int(_cfg(pc, "tensor_parallel_size", 1) or 1)
    pp = int(_cfg(pc, "pipeline_parallel_size", 1) or 1)
    if rank is None:
        rank = int(_cfg(pc, "rank", 0) or 0)
    return {"tp_size": tp, "pp_size": pp, "tp_rank": rank % tp, "pp_rank": rank // tp}


def namespace_name(vllm_config: Any, extra: Dict[str, Any], tp_rank: int, pp_rank: int) -> str:
    """Name of the namespace of one (TP, PP) shard. Scheduler and workers compute the same."""
    prefix = str(extra.get("openlake_namespace") or model_name(vllm_config))
    cc = _cfg(vllm_config, "cache_config")
    r = parallel_ranks(vllm_config)
    block = int(_cfg(cc, "block_size", 16))
    return (f"vllm/{prefix}/{dtype_name(vllm_config)}/bs{block}/"
            f"tp{tp_rank}of{r['tp_size']}/pp{pp_rank}of{r['pp_size']}")


def all_namespace_names(vllm_config: Any, extra: Dict[str, Any]) -> List[str]:
    r = parallel_ranks(vllm_config)
    return [namespace_name(vllm_config, extra, t, p)
            for p in range(r["pp_size"]) for t in range(r["tp_size"])]


def fingerprint(vllm_config: Any, layout: Any, tp_rank: int, pp_rank: int) -> Dict[str, Any]:
    """The namespace fingerprint a worker opens its namespace with."""
    r = parallel_ranks(vllm_config)
    cc = _cfg(vllm_config, "cache_config")
    return {
        "model": model_name(vllm_config),
        "dtype": layout.dtype or dtype_name(vllm_config),
        # A canonical block (K then V, NHD, per layer) is named by that, not by the tensors'
        # kind: engines whose attention backends lay the cache out differently then share.
        "layout": ("kv-nhd" if getattr(layout, "canonical", False)
                   else f"{layout.kind}|{layout.signature}"),
        "num_layers": len(layout.layers),
        "num_kv_heads": int(layout.num_kv_heads),
        "head_size": int(layout.head_size),
        "block_tokens": int(_cfg(cc, "block_size", 16)),
        "tp_rank": tp_rank,
        "tp_size": r["tp_size"],
        "pp_rank": pp_rank,
        "pp_size": r["pp_size"],
        "extra": f"block_bytes={layout.block_bytes}",
    }


def split_keys(keys: Sequence[bytes], n: int) -> List[List[bytes]]:
    return [list(keys[i:i + n]) for i in range(0, len(keys), n)]
