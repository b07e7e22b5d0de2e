"""The vLLM connector's statistics and Prometheus metrics.

vLLM collects a connector's KVConnectorStats from every worker and from the scheduler each step,
aggregates them, ships their `data` dict to its logger process, rebuilds them there with the
connector's `build_kv_connector_stats(data)`, logs `reduce()` each interval ("KV Transfer
metrics: ...") and feeds the dict to the metrics object `build_prom_metrics` made, so that
`vllm serve`'s /metrics shows OpenLake. Everything here is plain numbers, so it crosses process
boundaries as it is.

Imported only by the connector's methods (never when the connector module is imported): with
vLLM installed the classes subclass vLLM's KVConnectorStats and KVConnectorPromMetrics, without
it they stand alone with the same methods.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

try:
    from vllm.distributed.kv_transfer.kv_connector.v1.metrics import (  # type: ignore
        KVConnectorPromMetrics as _PromBase,
        KVConnectorStats as _StatsBase,
    )
except Exception:  # vLLM absent (or a version without connector metrics)
    import dataclasses

    @dataclasses.dataclass
    class _StatsBase:  # type: ignore[no-redef]
        data: Dict[str, Any] = dataclasses.field(default_factory=dict)

        def to_dict(self) -> Dict[str, Any]:
            return self.data

    class _PromBase:  # type: ignore[no-redef]
        def __init__(self, vllm_config: Any, metric_types: Dict[type, type],
                     labelnames: List[str], per_engine_labelvalues: Dict[int, List[object]]):
            self._kv_transfer_config = getattr(vllm_config, "kv_transfer_config", None)
            by_name = {k.__name__: v for k, v in metric_types.items()}
            self._gauge_cls = by_name.get("Gauge")
            self._counter_cls = by_name.get("Counter")
            self._histogram_cls = by_name.get("Histogram")
            self._labelnames = labelnames
            self.per_engine_labelvalues = per_engine_labelvalues


# Counters, each summed across workers and steps. Bytes and seconds are the workers' copies
# between the KV cache and the pool; tokens are the scheduler's lookups.
COUNTERS = {
    "lookups": "requests whose prompt was looked up in OpenLake",
    "lookup_tokens": "prompt tokens looked up beyond the engine's own prefix cache",
    "hit_tokens": "of those, tokens OpenLake could supply",
    "loads": "load jobs run by workers",
    "loaded_blocks": "blocks loaded into the KV cache and verified",
    "loaded_bytes": "bytes loaded into the KV cache",
    "load_seconds": "seconds workers spent loading",
    "load_errors": "blocks that failed to load (missing or failed verification)",
    "saves": "save jobs run by workers",
    "saved_blocks": "blocks stored",
    "saved_bytes": "bytes stored",
    "save_seconds": "seconds workers spent saving",
    "save_errors": "save jobs that failed",
}


class OpenLakeConnectorStats(_StatsBase):
    """KVConnectorStats of OpenLakeConnector: `data` maps each name of COUNTERS to a number."""

    def __init__(self, data: Optional[Dict[str, Any]] = None):
        clean = {k: float(v) for k, v in (data or {}).items() if k in COUNTERS}
        super().__init__(data=clean)

    def add(self, **delta: float) -> None:
        for k, v in delta.items():
            self.data[k] = self.data.get(k, 0.0) + float(v)

    def reset(self) -> None:
        self.data = {}

    def aggregate(self, other: Any) -> "OpenLakeConnectorStats":
        for k, v in (getattr(other, "data", None) or {}).items():
            if k in COUNTERS:
                self.data[k] = self.data.get(k, 0.0) + float(v)
        return self

    def reduce(self) -> Dict[str, Any]:
        d = self.data
        out: Dict[str, Any] = {k: d.get(k, 0.0) for k in COUNTERS if d.get(k)}
        if d.get("lookup_tokens"):
            out["hit_rate"] = round(d.get("hit_tokens", 0.0) / d["lookup_tokens"], 4)
        if d.get("load_seconds"):
            out["load_GBps"] = round(d.get("loaded_bytes", 0.0) / d["load_seconds"] / 1e9, 3)
        if d.get("save_seconds"):
            out["save_GBps"] = round(d.get("saved_bytes", 0.0) / d["save_seconds"] / 1e9, 3)
        return out

    def is_empty(self) -> bool:
        return not any(self.data.values())

    def clone_and_reset(self) -> "OpenLakeConnectorStats":
        out = OpenLakeConnectorStats(dict(self.data))
        self.reset()
        return out


class OpenLakePromMetrics(_PromBase):
    """One Prometheus counter per name of COUNTERS: vllm:openlake_<name> (with vLLM's labels,
    per engine)."""

    def __init__(self, vllm_config: Any, metric_types: Dict[type, type], labelnames: List[str],
                 per_engine_labelvalues: Dict[int, List[object]]):
        super().__init__(vllm_config, metric_types, labelnames, per_engine_labelvalues)
        self._counters: Dict[str, Dict[int, Any]] = {}
        for name, doc in COUNTERS.items():
            metric = self._counter_cls(name=f"vllm:openlake_{name}", documentation=f"OpenLake: {doc}",
                                       labelnames=labelnames)
            self._counters[name] = {idx: metric.labels(*values)
                                    for idx, values in per_engine_labelvalues.items()}

    def observe(self, transfer_stats_data: Dict[str, Any], engine_idx: int = 0) -> None:
        for name, value in (transfer_stats_data or {}).items():
            counters = self._counters.get(name)
            if counters is not None and value and engine_idx in counters:
                counters[engine_idx].inc(float(value))
