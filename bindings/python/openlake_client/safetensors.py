"""safetensors files as objects in an OpenLake bucket, read lazily by name (docs/checkpoints.md).

The format (huggingface/safetensors): an 8-byte little-endian header length N, N bytes of JSON
({"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
"__metadata__": {str: str}}), padded with spaces so the data starts 8-byte aligned, then every
tensor's bytes, C order, little-endian, at its offsets from the start of the data.

    from openlake_client import checkpoint, safetensors
    store = checkpoint.Store(endpoint, access_key, secret_key)
    safetensors.save_file(model.state_dict(), "s3://weights/llama/model.safetensors", store)
    f = safetensors.open_file("s3://weights/llama/model.safetensors", store)
    f.keys(); f.metadata()
    w = f.get_tensor("lm_head.weight")                   # one ranged GET into a new tensor
    some = f.get_tensors(["a", "b"], device="cuda")      # one batch; pinned staging for a GPU
    everything = safetensors.load_file(url, store)

A loader in the style of `from_pretrained` reads the header once and then only the tensors it
asks for, each straight into its own memory.
"""

from __future__ import annotations

import json
import struct
from typing import Dict, Iterable, List, Optional

import torch

from . import _openlake, progress as _progress
from .checkpoint import Store, _bytes_of, parse_url

_DTYPES = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8,
    "U8": torch.uint8, "BOOL": torch.bool,
}
_NAMES = {v: k for k, v in _DTYPES.items()}
_MAX_HEADER = 100 << 20  # as the reference reader: a larger header is refused
_FIRST_READ = 64 << 10   # the first GET takes the header whole when it is this small


def _header(tensors: Dict[str, torch.Tensor], metadata: Optional[Dict[str, str]]):
    """The padded header and each tensor's (name, offset, contiguous CPU tensor)."""
    entries, layout, at = {}, [], 0
    # Larger element sizes first, then by name (as the reference writer orders them), so
    # every tensor starts aligned to its element size.
    for name in sorted(tensors, key=lambda n: (-tensors[n].element_size(), n)):
        t = tensors[name].detach().to("cpu").contiguous()
        if t.dtype not in _NAMES:
            raise ValueError(f"safetensors has no dtype for {name}: {t.dtype}")
        n = t.numel() * t.element_size()
        entries[name] = {"dtype": _NAMES[t.dtype], "shape": list(t.shape),
                         "data_offsets": [at, at + n]}
        layout.append((name, at, t))
        at += n
    if metadata:
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
            raise ValueError("safetensors metadata maps strings to strings")
        entries = {"__metadata__": dict(metadata), **entries}
    text = json.dumps(entries, separators=(",", ":")).encode()
    text += b" " * (-(8 + len(text)) % 8)
    return struct.pack("<Q", len(text)) + text, layout, at


def save_file(tensors: Dict[str, torch.Tensor], url: str, store: Store,
              metadata: Optional[Dict[str, str]] = None, progress=None,
              progress_bar: Optional[bool] = None) -> None:
    """Writes `tensors` as one safetensors object at `url` (s3://bucket/key). The object is
    assembled once in host memory (one copy of each tensor) and uploaded in parallel parts.
    `progress(done_bytes, total_bytes)` hears the upload; `progress_bar`: a tqdm bar (None:
    when stderr is a terminal and tqdm is installed)."""
    bucket, key = parse_url(url)
    head, layout, data_bytes = _header(tensors, metadata)
    body = bytearray(len(head) + data_bytes)
    body[:len(head)] = head
    view = memoryview(body)
    for _, at, t in layout:
        n = t.numel() * t.element_size()
        if n:
            view[len(head) + at:len(head) + at + n] = memoryview(_bytes_of(t)).cast("B")
    with _progress.reporting(len(body), progress, progress_bar, "save") as report:
        store.transfer.put_many(bucket, [(key, body)], progress=report)


class SafeTensorsObject:
    """One safetensors object, its header read; tensors fetched on demand by ranged GETs."""

    def __init__(self, url: str, store: Store) -> None:
        self.bucket, self.key = parse_url(url)
        self.store = store
        t = store.transfer
        size, _ = t.head(self.bucket, self.key)
        if size < 8:
            raise _openlake.DataLossError(f"{url}: {size} bytes is no safetensors object")
        first = bytearray(min(size, _FIRST_READ))
        t.get_many(self.bucket, [(self.key, 0, first)])
        (n,) = struct.unpack_from("<Q", first)
        if n > _MAX_HEADER or 8 + n > size:
            raise _openlake.DataLossError(f"{url}: a header of {n} bytes in {size}")
        if 8 + n <= len(first):
            raw = bytes(first[8:8 + n])
        else:
            rest = bytearray(8 + n - len(first))
            t.get_many(self.bucket, [(self.key, len(first), rest)])
            raw = bytes(first[8:]) + bytes(rest)
        try:
            header = json.loads(raw)
        except ValueError as e:
            raise _openlake.DataLossError(f"{url}: the header is not JSON: {e}") from None
        self._metadata = header.pop("__metadata__", None) or {}
        self._data = 8 + n
        self._size = size
        self._entries = {}
        for name, e in header.items():
            dtype = _DTYPES.get(e.get("dtype"))
            begin, end = e["data_offsets"]
            shape = tuple(e["shape"])
            numel = 1
            for d in shape:
                numel *= d
            if dtype is None:
                raise _openlake.DataLossError(f"{url}: {name} has dtype {e.get('dtype')!r}")
            if end - begin != numel * torch.empty((), dtype=dtype).element_size() or \
                    self._data + end > size or begin < 0:
                raise _openlake.DataLossError(f"{url}: {name}'s offsets {begin}..{end} do not "
                                              f"fit its shape {list(shape)} and the object")
            self._entries[name] = (dtype, shape, begin, end)

    def keys(self) -> List[str]:
        return list(self._entries)

    def metadata(self) -> Dict[str, str]:
        return dict(self._metadata)

    def get_tensor(self, name: str, device: Optional[str] = None) -> torch.Tensor:
        return self.get_tensors([name], device)[name]

    def get_tensors(self, names: Iterable[str], device: Optional[str] = None,
                    progress=None, progress_bar: Optional[bool] = None
                    ) -> Dict[str, torch.Tensor]:
        """The named tensors in one batch of ranged GETs, each straight into its own memory
        (pinned when bound for a GPU, then copied there). `progress` and `progress_bar` as for
        `save_file`."""
        names = list(names)
        gpu = device is not None and torch.device(device).type == "cuda"
        out, gets = {}, []
        for name in names:
            if name not in self._entries:
                raise KeyError(f"{self.key} has no tensor {name!r}")
            dtype, shape, begin, end = self._entries[name]
            t = torch.empty(shape, dtype=dtype, pin_memory=gpu)
            if end > begin:
                gets.append((self.key, self._data + begin, _bytes_of(t)))
            out[name] = t
        total = sum(buf.nbytes for _, _, buf in gets)
        with _progress.reporting(total, progress, progress_bar, "load") as report:
            self.store.transfer.get_many(self.bucket, gets, progress=report)
        if device is not None and not gpu:
            out = {k: v.to(device) for k, v in out.items()}
        elif gpu:
            out = {k: v.to(device, non_blocking=True) for k, v in out.items()}
            torch.cuda.synchronize()
        return out


def open_file(url: str, store: Store) -> SafeTensorsObject:
    return SafeTensorsObject(url, store)


def load_file(url: str, store: Store, device: Optional[str] = None,
              progress=None, progress_bar: Optional[bool] = None) -> Dict[str, torch.Tensor]:
    f = SafeTensorsObject(url, store)
    return f.get_tensors(f.keys(), device, progress, progress_bar)
