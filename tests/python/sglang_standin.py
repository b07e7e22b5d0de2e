"""A stand-in for the parts of SGLang that a HiCache storage backend meets, written from the
signatures of SGLang's hicache_storage.py, storage/backend_factory.py and the host KV pools
(pool_host/mha.py, pool_host/mla.py) as of sgl-project/sglang
001067fffe33427bee0ed2f007fb7551a1d76b44 (no SGLang code):

- load_dynamic_backend: what `--hicache-storage-backend dynamic` does with the extra config
  (import module_path, take class_name, check it subclasses HiCacheStorage, construct it as
  cls(storage_config, kwargs) with kwargs a dict, then register the host pool);
- HostPool: SGLang's host KV pool for MHA and MLA models in the layer_first, page_first and
  page_first_direct layouts, with get_page_buffer_meta computing per-page buffer pointers the
  way the real pools do (2 per page for MHA page-first, 2 x layers for MHA layer-first, 1 or
  layers for MLA), and the flat-page methods of the generic path.
"""

from __future__ import annotations

import importlib
from typing import Any, List, Tuple

import torch


def load_dynamic_backend(storage_config: Any, host_pool: Any) -> Any:
    extra = storage_config.extra_config
    if extra is None:
        raise ValueError("dynamic backend needs an extra config")
    for field in ("backend_name", "module_path", "class_name"):
        if field not in extra:
            raise ValueError(f"Missing required field {field}")
    from openlake_client.sglang import HiCacheStorage

    cls = getattr(importlib.import_module(extra["module_path"]), extra["class_name"])
    if not issubclass(cls, HiCacheStorage):
        raise TypeError(f"{cls} is not a HiCacheStorage")
    backend = cls(storage_config, {})
    backend.register_mem_pool_host(host_pool)
    return backend


class HostPool:
    """A host KV pool of `size` tokens in pages of `page_size` tokens."""

    def __init__(self, layout: str = "page_first", mla: bool = False, layer_num: int = 3,
                 head_num: int = 2, head_dim: int = 16, kv_cache_dim: int = 24,
                 page_size: int = 4, pages: int = 64, dtype: torch.dtype = torch.float16):
        assert layout in ("layer_first", "page_first", "page_first_direct")
        self.layout, self.mla, self.dtype = layout, mla, dtype
        self.layer_num, self.page_size = layer_num, page_size
        self.page_num, self.size = pages, pages * page_size
        self.itemsize = torch.tensor([], dtype=dtype).element_size()
        if mla:
            self.kv_cache_dim = kv_cache_dim
            L, S, C, P = layer_num, self.size, kv_cache_dim, page_size
            shape = {"layer_first": (L, S, 1, C), "page_first": (S, L, 1, C),
                     "page_first_direct": (pages, L, P, 1, C)}[layout]
        else:
            self.head_num, self.head_dim = head_num, head_dim
            L, S, H, D, P = layer_num, self.size, head_num, head_dim, page_size
            shape = {"layer_first": (2, L, S, H, D), "page_first": (2, S, L, H, D),
                     "page_first_direct": (2, pages, L, P, H, D)}[layout]
        self.kv_buffer = torch.zeros(shape, dtype=dtype)
        self._free = list(range(0, self.size, page_size))

    # ---- sizes ----
    def get_size_per_token(self) -> int:
        if self.mla:
            return self.kv_cache_dim * self.itemsize * self.layer_num
        return self.head_dim * self.head_num * self.layer_num * self.itemsize * 2

    def get_ksize_per_token(self) -> int:
        return self.get_size_per_token() if self.mla else self.get_size_per_token() // 2

    # ---- allocation ----
    def alloc(self, need_size: int) -> torch.Tensor:
        assert need_size % self.page_size == 0
        n = need_size // self.page_size
        if n > len(self._free):
            return None
        starts, self._free = self._free[:n], self._free[n:]
        return torch.tensor([s + t for s in starts for t in range(self.page_size)],
                            dtype=torch.int64)

    def free(self, indices: torch.Tensor) -> None:
        self._free.extend(int(i) for i in indices[::self.page_size])

    # ---- the zero-copy path ----
    def get_page_buffer_meta(self, indices: torch.Tensor) -> Tuple[List[int], List[int]]:
        assert len(indices) % self.page_size == 0
        base = self.kv_buffer.data_ptr()
        it, L, S, P = self.itemsize, self.layer_num, self.size, self.page_size
        ptrs: List[int] = []
        sizes: List[int] = []
        for s in [int(i) for i in indices[::P]]:
            if self.mla:
                C = self.kv_cache_dim
                if self.layout == "layer_first":
                    for layer in range(L):
                        ptrs.append(base + s * C * it + layer * S * C * it)
                        sizes.append(it * P * C)
                else:
                    ptrs.append(base + s * L * C * it)
                    sizes.append(L * it * P * C)
            else:
                H, D = self.head_num, self.head_dim
                v_offset = L * S * H * D * it
                if self.layout == "layer_first":
                    for layer in range(L):
                        k = base + s * H * D * it + layer * S * H * D * it
                        ptrs += [k, k + v_offset]
                        sizes += [P * H * D * it] * 2
                else:
                    k = base + s * L * H * D * it
                    ptrs += [k, k + v_offset]
                    sizes += [L * P * H * D * it] * 2
        return ptrs, sizes

    # ---- the generic path: flat pages ----
    def _page_view(self, index: int) -> torch.Tensor:
        P = self.page_size
        if self.mla:
            if self.layout == "layer_first":
                return self.kv_buffer[:, index:index + P]
            if self.layout == "page_first":
                return self.kv_buffer[index:index + P]
            return self.kv_buffer[index // P:index // P + 1]
        if self.layout == "layer_first":
            return self.kv_buffer[:, :, index:index + P]
        if self.layout == "page_first":
            return self.kv_buffer[:, index:index + P]
        return self.kv_buffer[:, index // P:index // P + 1]

    def get_data_page(self, index: int, flat: bool = True) -> torch.Tensor:
        v = self._page_view(index)
        return v.flatten() if flat else v

    def get_dummy_flat_data_page(self) -> torch.Tensor:
        return torch.zeros(self.get_size_per_token() * self.page_size // self.itemsize,
                           dtype=self.dtype)

    def set_from_flat_data_page(self, index: int, data_page: torch.Tensor) -> None:
        v = self._page_view(index)
        v.copy_(data_page.reshape(v.shape))

    # ---- test helpers ----
    def page_bytes(self, indices: torch.Tensor) -> List[bytes]:
        """Each page's bytes, gathered through get_page_buffer_meta (what a backend copies)."""
        ptrs, sizes = self.get_page_buffer_meta(indices)
        n = len(indices) // self.page_size
        per = len(ptrs) // n
        flat = self.kv_buffer.view(torch.uint8).reshape(-1)
        base = self.kv_buffer.data_ptr()
        out = []
        for p in range(n):
            out.append(b"".join(bytes(flat[ptrs[p * per + j] - base:
                                           ptrs[p * per + j] - base + sizes[p * per + j]].tolist())
                                for j in range(per)))
        return out

    def fill(self, indices: torch.Tensor, seed: int) -> None:
        """Writes bytes that depend on `seed` and on each token slot into these pages."""
        g = torch.Generator().manual_seed(seed)
        for s in [int(i) for i in indices[::self.page_size]]:
            page = self.get_data_page(s)
            self.set_from_flat_data_page(
                s, torch.randint(-1000, 1000, page.shape, generator=g).to(self.dtype))
