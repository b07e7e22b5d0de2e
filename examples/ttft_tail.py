"""The hit path of examples/ttft_hit_vs_miss.py: rebuilding transformers' dense KV cache from the
paged cache, and the attention of the tail prefill.

  rebuild_layer   one gather per layer from the pages (vLLM NHD blocks) straight into a
                  preallocated (2, 1, kv_heads, capacity, head) buffer that already has room for
                  the tail, so the prefill appends in place (no torch.cat of the whole cache).
  preallocated_cache
                  a DynamicCache whose layers are views of those buffers; update() copies the
                  new tokens' KV into the room left and returns longer views.
  gqa_tail_attention
                  attention of q new tokens against s cached keys (s >= q; the last q keys are
                  the new tokens') without repeating the KV heads: the query heads that share
                  a KV head are folded into the query rows, so K and V are read once per KV head.
                  Computes what flash attention computes (scores and softmax in float32, the
                  probabilities in the model's dtype for the product with V), with the causal
                  offset: new token i sees every cached key and the new keys up to itself.
  tail_attention  a context manager that routes transformers' "sdpa" attention through
                  gqa_tail_attention while it is open (transformers >= 4.48's
                  ALL_ATTENTION_FUNCTIONS); a full prefill (q == s) still goes to the original.

Runs on torch 1.13 (CPU tests) as on torch 2.x; needs transformers only for the cache.
"""

import contextlib


def layer_kv(cache, i):
    """(keys, values) of layer i, each (1, kv_heads, tokens, head_size)."""
    if hasattr(cache, "layers"):  # transformers >= 4.56
        return cache.layers[i].keys, cache.layers[i].values
    return cache.key_cache[i], cache.value_cache[i]


def set_layer_kv(cache, i, k, v):
    if hasattr(cache, "layers"):
        cache.layers[i].keys, cache.layers[i].values = k, v
    else:
        cache.key_cache[i], cache.value_cache[i] = k, v


def rebuild_layer(torch, pages, idx, block, capacity):
    """A (2, 1, kv_heads, capacity, head) buffer whose first len(idx)·block tokens are the KV of
    blocks idx of `pages` ((blocks, 2, block, kv_heads, head)), in one gather."""
    _, _, _, heads, head = pages.shape
    n = idx.numel()
    buf = torch.empty(2, 1, heads, capacity, head, dtype=pages.dtype, device=pages.device)
    src = pages.permute(1, 3, 0, 2, 4)  # (2, heads, blocks, block, head): a view
    dst = buf[:, 0, :, :n * block].unflatten(2, (n, block))  # (2, heads, n, block, head)
    torch.index_select(src, 2, idx, out=dst)
    return buf


def preallocated_cache(dynamic_cache_cls, bufs, tokens):
    """A DynamicCache over `bufs` (from rebuild_layer), holding their first `tokens` tokens."""

    class PreallocatedCache(dynamic_cache_cls):
        def update(self, key_states, value_states, layer_idx, cache_kwargs=None):
            if layer_idx >= len(bufs):
                return super().update(key_states, value_states, layer_idx, cache_kwargs)
            buf = bufs[layer_idx]
            n = layer_kv(self, layer_idx)[0].shape[-2]
            t = key_states.shape[-2]
            if n + t > buf.shape[-2]:
                return super().update(key_states, value_states, layer_idx, cache_kwargs)
            buf[0, :, :, n:n + t].copy_(key_states)
            buf[1, :, :, n:n + t].copy_(value_states)
            k, v = buf[0, :, :, :n + t], buf[1, :, :, :n + t]
            set_layer_kv(self, layer_idx, k, v)
            if layer_idx == 0 and hasattr(self, "_seen_tokens"):
                self._seen_tokens += t
            return k, v

    cache = PreallocatedCache()
    for i, buf in enumerate(bufs):
        # The base update creates the layer (empty); the views then replace its tensors.
        dynamic_cache_cls.update(cache, buf[0, :, :, :0], buf[1, :, :, :0], i)
        set_layer_kv(cache, i, buf[0, :, :, :tokens], buf[1, :, :, :tokens])
    if hasattr(cache, "_seen_tokens"):
        cache._seen_tokens = tokens
    return cache


def _scores_f32(torch, qf, key):
    """qf @ keyᵀ with float32 results, as flash attention keeps its scores (rounding 131072
    scores to bf16 moves the softmax enough to change a near-tie argmax)."""
    b, h, r, d = qf.shape
    a, k = qf.reshape(b * h, r, d), key.reshape(b * h, key.shape[2], d).transpose(1, 2)
    try:
        out = torch.bmm(a, k, out_dtype=torch.float32)  # torch >= 2.8: no float32 copy of K
    except (TypeError, RuntimeError):
        out = torch.bmm(a.float(), k.float())
    return out.view(b, h, r, key.shape[2])


def gqa_tail_attention(torch, query, key, value, scaling):
    """query (b, hq, q, d), key/value (b, hkv, s, d) with s >= q: (b, q, hq, d)."""
    b, hq, q, d = query.shape
    hkv, s = key.shape[1], key.shape[2]
    g = hq // hkv
    # Query head h uses KV head h // g (repeat_kv's order): fold the g heads into rows.
    qf = query.reshape(b, hkv, g * q, d)
    scores = _scores_f32(torch, qf, key) * scaling  # (b, hkv, g·q, s), float32
    # New token i sees keys [0, s - q + i]: only the last q columns need masking.
    hidden = torch.ones(q, q, dtype=torch.bool, device=query.device).triu(1)
    scores.view(b, hkv, g, q, s)[..., s - q:].masked_fill_(hidden, torch.finfo(scores.dtype).min)
    probs = torch.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)
    out = torch.matmul(probs, value)  # (b, hkv, g·q, d)
    return out.view(b, hq, q, d).transpose(1, 2).contiguous()


@contextlib.contextmanager
def tail_attention(torch):
    """While open, transformers' "sdpa" attention runs gqa_tail_attention for a tail (fewer
    queries than keys, batch 1, no padding). Yields False (and changes nothing) where this
    transformers has no attention registry."""
    try:
        from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

        original = ALL_ATTENTION_FUNCTIONS["sdpa"]
    except (ImportError, KeyError):
        yield False
        return

    def attention(module, query, key, value, attention_mask, dropout=0.0, scaling=None,
                  **kwargs):
        q, s = query.shape[2], key.shape[2]
        if q >= s or query.shape[0] != 1 or dropout:
            return original(module, query, key, value, attention_mask, dropout=dropout,
                            scaling=scaling, **kwargs)
        if scaling is None:
            scaling = query.shape[-1] ** -0.5
        return gqa_tail_attention(torch, query, key, value, scaling), None

    ALL_ATTENTION_FUNCTIONS["sdpa"] = attention
    try:
        yield True
    finally:
        ALL_ATTENTION_FUNCTIONS["sdpa"] = original
