"""The hit path of examples/ttft_hit_vs_miss.py on the CPU, tiny shapes: the tail attention
against transformers' eager attention written out (repeated KV heads, a causal mask with the
offset), the one-gather rebuild against the old index_select + permute, and the preallocated
cache (when transformers is installed)."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
import ttft_tail  # noqa: E402


def eager_reference(query, key, value, scaling):
    """transformers' eager_attention_forward with repeat_kv and a lower-right causal mask."""
    b, hq, q, d = query.shape
    hkv, s = key.shape[1], key.shape[2]
    g = hq // hkv
    k = key[:, :, None].expand(b, hkv, g, s, d).reshape(b, hq, s, d)
    v = value[:, :, None].expand(b, hkv, g, s, d).reshape(b, hq, s, d)
    scores = torch.matmul(query, k.transpose(2, 3)) * scaling
    rows = torch.arange(q)[:, None] + (s - q)
    mask = torch.zeros(q, s, dtype=scores.dtype)
    mask[torch.arange(s)[None, :] > rows] = torch.finfo(scores.dtype).min
    probs = torch.softmax(scores + mask, dim=-1, dtype=torch.float32).to(query.dtype)
    return torch.matmul(probs, v).transpose(1, 2).contiguous()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("q,s", [(1, 1), (3, 3), (16, 80), (5, 37)])
def test_tail_attention_matches_eager(dtype, q, s):
    g = torch.Generator().manual_seed(q * 100 + s)
    query = torch.randn(1, 8, q, 16, generator=g).to(dtype)
    key = torch.randn(1, 2, s, 16, generator=g).to(dtype)
    value = torch.randn(1, 2, s, 16, generator=g).to(dtype)
    got = ttft_tail.gqa_tail_attention(torch, query, key, value, 0.25)
    want = eager_reference(query, key, value, 0.25)
    assert got.shape == (1, q, 8, 16)
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    assert torch.allclose(got.float(), want.float(), atol=tol, rtol=tol)


def test_rebuild_is_one_gather_with_room():
    blocks, block, heads, head = 9, 4, 2, 8
    pages = torch.randn(blocks, 2, block, heads, head)
    idx = torch.tensor([7, 0, 3, 5])
    buf = ttft_tail.rebuild_layer(torch, pages, idx, block, capacity=len(idx) * block + 3)
    assert buf.shape == (2, 1, heads, len(idx) * block + 3, head)
    kv = pages.index_select(0, idx)
    for kind in (0, 1):
        want = kv[:, kind].reshape(len(idx) * block, heads, head).permute(1, 0, 2)
        assert torch.equal(buf[kind, 0, :, :len(idx) * block], want)


def test_preallocated_cache_appends_in_place():
    transformers = pytest.importorskip("transformers")
    pages = torch.randn(6, 2, 4, 2, 8)
    bufs = [ttft_tail.rebuild_layer(torch, pages, torch.tensor([4, 1]), 4, capacity=10)
            for _ in range(2)]
    cache = ttft_tail.preallocated_cache(transformers.DynamicCache, bufs, 8)
    assert cache.get_seq_length() == 8
    new_k, new_v = torch.randn(1, 2, 2, 8), torch.randn(1, 2, 2, 8)
    k, v = cache.update(new_k, new_v, 0)
    assert k.shape[-2] == 10 and k.data_ptr() == bufs[0].data_ptr()
    assert torch.equal(k[:, :, 8:], new_k) and torch.equal(v[:, :, 8:], new_v)
    assert torch.equal(ttft_tail.layer_kv(cache, 0)[0], k)
