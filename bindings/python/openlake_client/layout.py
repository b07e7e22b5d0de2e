"""Where the bytes of a vLLM KV-cache block live, derived from tensor shapes and strides.

vLLM hands the worker one tensor per attention layer (register_kv_caches). Its layout changed
several times (docs/vllm.md, VLLM_CONNECTOR.md §3), so nothing here trusts a layout name: the
block dimension, the tokens per kernel block and the byte ranges of one block are derived from
`shape`, `stride()` and `element_size()`:

    legacy FlashAttention   (2, B, N, H, D)   dim 0 = K/V: two byte ranges per block
    FlashInfer, blocks-first (B, 2, N, H, D)   NHD or HND by strides
    MLA                      (B, N, C)
    K/V packed, standardized (B, H, N, C)      possibly strided views into one shared buffer
    Mamba / linear attention [(B, ...), ...]   one state page per block, several tensors per
                                               layer (conv and SSM state): plan_state_layout

A scheduler block of `block_size` tokens may span r = block_size / N kernel blocks. An OpenLake
block is the concatenation, over layers (and K/V planes, and kernel blocks), of every dense
byte range of that scheduler block: the same order on save and load, and the namespace
fingerprint pins the layout so engines with another layout never read it.

No torch import at module load: tensors are only duck-typed here.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Optional, Sequence, Tuple

Piece = Tuple[int, int]  # (address, length in bytes)


class LayoutError(ValueError):
    """The registered KV caches have a shape this connector cannot map."""


def dense_runs(addr: int, shape: Sequence[int], strides: Sequence[int], esz: int) -> List[Piece]:
    """Byte ranges covering a strided sub-tensor, in the sub-tensor's physical order.

    A sub-tensor whose strides (in some order) pack its elements tightly is one range; otherwise
    it is split along its outermost (largest-stride) dimension, recursively. Adjacent ranges are
    merged.
    """
    dims = [(int(n), int(s)) for n, s in zip(shape, strides) if int(n) != 1]
    if any(s <= 0 for _, s in dims):
        raise LayoutError("KV cache views with zero or negative strides are not supported")
    if not dims:
        return [(addr, esz)]
    expect = 1
    dense = True
    for n, s in sorted(dims, key=lambda d: d[1]):
        if s != expect:
            dense = False
            break
        expect *= n
    if dense:
        return [(addr, expect * esz)]
    outer = max(range(len(dims)), key=lambda j: dims[j][1])
    n, s = dims[outer]
    rest = dims[:outer] + dims[outer + 1:]
    runs: List[Piece] = []
    for j in range(n):
        runs.extend(dense_runs(addr + j * s * esz, [d[0] for d in rest], [d[1] for d in rest], esz))
    return merge_runs(runs)


def merge_runs(runs: Sequence[Piece]) -> List[Piece]:
    out: List[Piece] = []
    for a, n in runs:
        if out and out[-1][0] + out[-1][1] == a:
            out[-1] = (out[-1][0], out[-1][1] + n)
        else:
            out.append((a, n))
    return out


@dataclasses.dataclass
class LayerPlan:
    """One registered layer: the byte ranges of its kernel block 0, and how far block k moves."""

    name: str
    base: int                  # address of kernel block 0's first range (absolute)
    block_stride: int          # bytes from kernel block k to k + 1
    runs: List[Piece]          # (offset from base, length) for kernel block 0
    num_kernel_blocks: int

    @property
    def bytes_per_kernel_block(self) -> int:
        return sum(n for _, n in self.runs)


@dataclasses.dataclass
class BlockLayout:
    """Byte geometry of one scheduler block across every registered layer."""

    kind: str                  # legacy-fa | blocks-first | mla | bhnc
    layers: List[LayerPlan]
    kernel_tokens: int         # tokens per kernel block (N)
    ratio: int                 # kernel blocks per scheduler block (r)
    num_blocks: int            # scheduler blocks
    block_bytes: int           # bytes of one scheduler block, all layers
    dtype: str
    device: str                # "cpu" or "cuda:<i>"
    signature: str             # shapes and stride orders, for the namespace fingerprint
    num_kv_heads: int
    head_size: int
    tensors: Dict[str, object] = dataclasses.field(default_factory=dict, repr=False)
    # Whether a block's bytes are in the canonical order, whatever the tensors' kind: per layer,
    # K then V, each (tokens, heads, head size) dense. FlashAttention's (2, B, N, H, D) and
    # FlashInfer's (B, 2, N, H, D) in NHD both are, so their engines share blocks.
    canonical: bool = False

    def pieces(self, block_id: int) -> List[Piece]:
        """(address, length) ranges of scheduler block `block_id`, in OpenLake block order."""
        if not 0 <= block_id < self.num_blocks:
            raise IndexError(f"block {block_id} is outside the KV cache (0..{self.num_blocks - 1})")
        out: List[Piece] = []
        first = block_id * self.ratio
        for layer in self.layers:
            for k in range(first, first + self.ratio):
                shift = layer.base + k * layer.block_stride
                out.extend((shift + off, n) for off, n in layer.runs)
        return merge_runs(out)

    def pieces_for(self, block_ids: Sequence[int]) -> List[List[Piece]]:
        return [self.pieces(b) for b in block_ids]

    def layer_pieces(self, block_id: int, index: int) -> List[Piece]:
        """The ranges of layer `index` (of self.layers) of scheduler block `block_id`: in the
        OpenLake block, they follow the layers before it (layer_offsets)."""
        layer = self.layers[index]
        out: List[Piece] = []
        first = block_id * self.ratio
        for k in range(first, first + self.ratio):
            shift = layer.base + k * layer.block_stride
            out.extend((shift + off, n) for off, n in layer.runs)
        return merge_runs(out)

    def layer_offsets(self) -> List[int]:
        """Where each layer's bytes start within an OpenLake block."""
        out, at = [], 0
        for layer in self.layers:
            out.append(at)
            at += layer.bytes_per_kernel_block * self.ratio
        return out

    def layer_index(self, name: str) -> Optional[int]:
        """Index in self.layers of the plan holding layer `name`'s KV (an alias of another
        layer's tensor maps to that layer)."""
        for i, layer in enumerate(self.layers):
            if layer.name == name:
                return i
        t = self.tensors.get(name)
        if t is None:
            return None
        if isinstance(t, (list, tuple)):
            t = t[0]
        ptr = int(t.data_ptr())
        for i, layer in enumerate(self.layers):
            if layer.base == ptr:
                return i
        return None

    def describe(self) -> str:
        return (f"{self.kind}: {len(self.layers)} layers, {self.num_blocks} blocks of "
                f"{self.block_bytes} bytes ({self.ratio} kernel block(s) of {self.kernel_tokens} "
                f"tokens), {self.dtype} on {self.device}")


def _shape(t) -> List[int]:
    return [int(x) for x in t.shape]


def _strides(t) -> List[int]:
    return [int(x) for x in t.stride()]


def _classify(t, num_kv_heads: Optional[int]) -> Tuple[str, int, int]:
    """(kind, block dim, token dim) of one layer's tensor."""
    shape = _shape(t)
    strides = _strides(t)
    if len(shape) == 5:
        if shape[0] == 2 and shape[1] != 2:
            return "legacy-fa", 1, 2
        if shape[1] == 2 and shape[0] != 2:
            return "blocks-first", 0, 2
        if shape[0] == 2 and shape[1] == 2:
            # Two blocks of K/V pairs: the K/V dimension is the one with the larger stride in the
            # legacy layout (planes of all blocks), the smaller one when blocks come first.
            return ("legacy-fa", 1, 2) if strides[0] > strides[1] else ("blocks-first", 0, 2)
        raise LayoutError(f"a 5-dimensional KV cache {tuple(shape)} has no K/V dimension of 2")
    if len(shape) == 4:
        return "bhnc", 0, 2
    if len(shape) == 3:
        return "mla", 0, 1
    raise LayoutError(f"unsupported KV cache shape {tuple(shape)} (want 3, 4 or 5 dimensions)")


def _order(strides: Sequence[int]) -> str:
    """Dimension order from outermost to innermost, as the stride ranking says."""
    return "".join(str(i) for i in sorted(range(len(strides)), key=lambda i: -strides[i]))


def plan_layout(kv_caches: Dict[str, object], block_size: int,
                num_kv_heads: Optional[int] = None, head_size: Optional[int] = None) -> BlockLayout:
    """Works out the BlockLayout of vLLM's per-layer KV tensors.

    `block_size` is the scheduler block (cache_config.block_size). Layers that alias the same
    memory (KVCacheTensor.shared_by) are copied once.
    """
    if not kv_caches:
        raise LayoutError("no KV caches were registered")
    plans: List[LayerPlan] = []
    seen = set()
    kinds = set()
    signature = []
    canonical = True
    kernel_tokens = None
    num_kernel_blocks = None
    dtype = device = None
    heads = num_kv_heads or 0
    hsize = head_size or 0
    for name in sorted(kv_caches):
        t = kv_caches[name]
        if isinstance(t, (list, tuple)):  # some runners hand a [tensor] per layer
            t = t[0]
        shape, strides, esz = _shape(t), _strides(t), int(t.element_size())
        key = (int(t.data_ptr()), tuple(shape), tuple(strides))
        if key in seen:
            continue
        seen.add(key)
        kind, bdim, ndim = _classify(t, num_kv_heads)
        kinds.add(kind)
        if kind in ("legacy-fa", "blocks-first"):
            # (N, H, D) of each K/V plane dense, in this order.
            h, d = shape[3], shape[4]
            canonical = canonical and strides[2:5] == [h * d, d, 1]
        else:
            canonical = False
        n = shape[ndim]
        if kernel_tokens is None:
            kernel_tokens, num_kernel_blocks = n, shape[bdim]
            dtype, device = str(t.dtype).replace("torch.", ""), str(t.device)
        elif (n, shape[bdim]) != (kernel_tokens, num_kernel_blocks):
            raise LayoutError(f"layer {name} has {shape[bdim]} blocks of {n} tokens; others "
                              f"have {num_kernel_blocks} of {kernel_tokens}")
        base = int(t.data_ptr())
        sub_shape = shape[:bdim] + shape[bdim + 1:]
        sub_strides = strides[:bdim] + strides[bdim + 1:]
        if kind == "legacy-fa":
            # Two planes (K, V): kernel block k of each is its own set of ranges.
            plane_shape, plane_strides = sub_shape[1:], sub_strides[1:]
            runs = []
            for plane in range(2):
                runs.extend(dense_runs(base + plane * strides[0] * esz, plane_shape,
                                       plane_strides, esz))
        else:
            runs = dense_runs(base, sub_shape, sub_strides, esz)
        plans.append(LayerPlan(name=name, base=base, block_stride=strides[bdim] * esz,
                               runs=[(a - base, l) for a, l in runs],
                               num_kernel_blocks=shape[bdim]))
        signature.append(f"{kind}{tuple(sub_shape)}o{_order(strides)}e{esz}")
        if kind in ("legacy-fa", "blocks-first") and not heads:
            heads, hsize = shape[3], shape[4]
        elif kind == "bhnc" and not heads:
            heads, hsize = shape[1], shape[3]
        elif kind == "mla" and not heads:
            heads, hsize = 1, shape[2]
    if len(kinds) != 1:
        raise LayoutError(f"layers disagree on their KV layout: {sorted(kinds)}")
    assert kernel_tokens is not None and num_kernel_blocks is not None
    if kernel_tokens <= 0 or block_size % kernel_tokens != 0:
        raise LayoutError(f"scheduler block of {block_size} tokens is not a multiple of the "
                          f"kernel block of {kernel_tokens}")
    ratio = block_size // kernel_tokens
    if num_kernel_blocks % ratio != 0:
        raise LayoutError(f"{num_kernel_blocks} kernel blocks do not group by {ratio}")
    layout = BlockLayout(
        kind=kinds.pop(), layers=plans, kernel_tokens=kernel_tokens, ratio=ratio,
        num_blocks=num_kernel_blocks // ratio, block_bytes=0, dtype=dtype or "", device=device or "",
        signature=";".join(sorted(set(signature))) + f";r{ratio}",
        num_kv_heads=heads, head_size=hsize, tensors=dict(kv_caches),
        canonical=canonical and ratio == 1)
    layout.block_bytes = sum(n for _, n in layout.pieces(0))
    return layout


def plan_state_layout(kv_caches: Dict[str, object], block_size: int) -> BlockLayout:
    """The BlockLayout of recurrent-state layers (vLLM's MambaSpec groups): each layer hands a
    list of state tensors (a Mamba2 layer its conv and SSM states), each (num_blocks, ...),
    often strided views into one buffer of padded pages. Block b of the group is, per layer and
    per state tensor in order, the dense bytes of tensor[b]: the state after the block's last
    token, opaque to OpenLake."""
    if not kv_caches:
        raise LayoutError("no state caches were registered")
    plans: List[LayerPlan] = []
    tensors: Dict[str, object] = {}
    signature = []
    seen = set()
    num_blocks = None
    dtypes = set()
    device = None
    for name in sorted(kv_caches):
        states = kv_caches[name]
        if not isinstance(states, (list, tuple)):
            states = [states]
        for j, t in enumerate(states):
            shape, strides, esz = _shape(t), _strides(t), int(t.element_size())
            if len(shape) < 2:
                raise LayoutError(f"state tensor {j} of {name} has shape {tuple(shape)}; want "
                                  "(blocks, ...)")
            key = (int(t.data_ptr()), tuple(shape), tuple(strides))
            if key in seen:
                continue  # layers sharing one state buffer are copied once
            seen.add(key)
            if num_blocks is None:
                num_blocks, device = shape[0], str(t.device)
            elif shape[0] != num_blocks:
                raise LayoutError(f"state tensor {j} of {name} has {shape[0]} blocks; others "
                                  f"have {num_blocks}")
            dtypes.add(str(t.dtype).replace("torch.", ""))
            base = int(t.data_ptr())
            runs = dense_runs(base, shape[1:], strides[1:], esz)
            plan_name = f"{name}#{j}"
            plans.append(LayerPlan(name=plan_name, base=base, block_stride=strides[0] * esz,
                                   runs=[(a - base, n) for a, n in runs],
                                   num_kernel_blocks=shape[0]))
            tensors[plan_name] = t
            signature.append(f"state{tuple(shape[1:])}o{_order(strides)}e{esz}")
    assert num_blocks is not None
    layout = BlockLayout(
        kind="state", layers=plans, kernel_tokens=block_size, ratio=1, num_blocks=num_blocks,
        block_bytes=0, dtype="+".join(sorted(dtypes)), device=device or "",
        signature=";".join(signature), num_kv_heads=0, head_size=0, tensors=tensors)
    layout.block_bytes = sum(n for _, n in layout.pieces(0))
    return layout
