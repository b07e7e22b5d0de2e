"""KV-cache groups of a hybrid model, as the vLLM connector stores them.

With vLLM's hybrid KV cache manager (HMA) a model's layers fall into groups, each with its own
block size, layout and block table: full attention, sliding-window attention, MLA, Mamba state.
The connector stores each group in a namespace of its own and decides hits across all of them:
a prefix of N tokens is a hit when every group holds the blocks it needs to resume at token N.

- full attention (and MLA, and a sliding window promoted to full when HMA is off): every block
  before N;
- sliding window of W tokens: the blocks holding the last W tokens before N (the ones before
  them are never read again);
- Mamba and linear-attention state, when vLLM caches it block by block (`mamba_cache_mode`
  "align" or "all"): only block N/B - 1, which holds the recurrent state after token N (vLLM
  copies it into the running block before the next token); the connector saves a state block
  only in the step whose computation ends exactly on its boundary, the one moment vLLM's
  running state is that block;
- anything else (Mamba state without block caching, chunked-local attention): not stored; a
  model with such a group is served by the connector but never loads (its requests compute
  their prefix), which is always correct.

Plain data and pure functions: the scheduler and the workers compute the same.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, List, Optional, Sequence

FULL = "full"
WINDOW = "window"
STATE = "state"
UNSUPPORTED = "unsupported"


@dataclasses.dataclass(frozen=True)
class Group:
    index: int
    kind: str                  # FULL, WINDOW, STATE or UNSUPPORTED
    block_size: int            # tokens per block of this group
    window: int = 0            # WINDOW: tokens attended back
    layer_names: Optional[tuple] = None  # None: every layer (a single-group model)
    spec_name: str = ""

    def needed(self, tokens: int) -> range:
        """Indices of this group's blocks that resuming at `tokens` reads."""
        n = tokens // self.block_size
        if self.kind == WINDOW:
            first = max(0, tokens - self.window) // self.block_size
            return range(first, n)
        if self.kind == STATE:
            return range(max(0, n - 1), n)
        return range(0, n)


BLOCK_CACHED_STATE_MODES = ("align", "all")


def groups_of(kv_cache_config: Any, block_size: int, mamba_cache_mode: str = "") -> List[Group]:
    """The groups of `kv_cache_config` (vLLM's KVCacheConfig); one full-attention group of
    `block_size` when there is none (older vLLM, or a config without groups).
    `mamba_cache_mode`: cache_config's, for a MambaSpec that does not carry its own."""
    groups = list(getattr(kv_cache_config, "kv_cache_groups", None) or [])
    if not groups:
        return [Group(0, FULL, block_size)]
    out = []
    for i, g in enumerate(groups):
        spec = getattr(g, "kv_cache_spec", None)
        names = tuple(getattr(g, "layer_names", None) or ()) or None
        bs = int(getattr(spec, "block_size", block_size) or block_size)
        spec_name = type(spec).__name__ if spec is not None else ""
        window = getattr(spec, "sliding_window", None)
        if spec_name == "SlidingWindowSpec" and window:
            kind = WINDOW
        elif spec_name == "MambaSpec" and (str(getattr(spec, "mamba_cache_mode", "")
                                               or mamba_cache_mode) in BLOCK_CACHED_STATE_MODES):
            kind = STATE
        elif spec_name in ("", "FullAttentionSpec", "MLAAttentionSpec", "SinkFullAttentionSpec",
                           "TQFullAttentionSpec", "AttentionSpec"):
            kind = FULL  # a window kept as a field of a full spec still holds every block
        else:
            kind = UNSUPPORTED  # Mamba, chunked-local, cross or encoder attention
        out.append(Group(i, kind, bs, int(window or 0), names, spec_name))
    if len(out) == 1 and out[0].kind != UNSUPPORTED:
        out[0] = dataclasses.replace(out[0], layer_names=None)
    return out


def hit_tokens(groups: Sequence[Group], present: Sequence[Sequence[bool]], cap: int) -> int:
    """The longest prefix of at most `cap` tokens that every group can resume from: a multiple
    of every group's block size whose needed blocks are all present (present[g][i]: whether
    block i of group g is in the pool). Linear in the blocks."""
    if any(g.kind == UNSUPPORTED for g in groups):
        return 0
    step = 1
    for g in groups:
        step = step * g.block_size // math.gcd(step, g.block_size)
    limit = cap
    runs = {}
    for g in groups:
        p = present[g.index]
        if g.kind == FULL:
            lead = 0
            while lead < len(p) and p[lead]:
                lead += 1
            limit = min(limit, lead * g.block_size)
        else:
            run, r = [], 0
            for v in p:
                r = r + 1 if v else 0
                run.append(r)
            runs[g.index] = run
            limit = min(limit, len(p) * g.block_size)
    tokens = (max(limit, 0) // step) * step
    while tokens > 0:
        ok = True
        for g in groups:
            if g.kind not in (WINDOW, STATE):
                continue
            need = g.needed(tokens)
            if len(need) and runs[g.index][need.stop - 1] < len(need):
                ok = False
                break
        if ok:
            return tokens
        tokens -= step
    return 0
