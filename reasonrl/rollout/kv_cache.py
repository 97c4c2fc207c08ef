"""The HF engine's KV cache: transformers' DynamicCache, with layers that write into a buffer sized for
the whole generation instead of concatenating.

transformers' `DynamicLayer.update` appends each step's keys and values with `torch.cat`, which copies
the whole cache at every step: O(T^2) memory traffic, 10% of generation time for the demo model on one
CPU thread (the profile's largest op, before attention). `GrowingLayer` allocates
[rows, kv heads, prompt + max_new_tokens, head dim] on its first update (doubling if a call ever needs
more), writes each step in place and hands attention a view of the filled positions: the same values,
so generation is bit-identical (tested), without the copies.

The cache is transformers' own DynamicCache for the model's config, so sliding-window, hybrid and
linear-attention layers keep their own layer classes; only plain full-attention layers grow in place.
Does not own: generation itself (`rollout.hf`).
"""

from __future__ import annotations

import inspect

from transformers.cache_utils import DynamicCache, DynamicLayer

from reasonrl.models.loading import unwrapped


class GrowingLayer(DynamicLayer):
    capacity = 0  # positions to allocate on the first update (set per generation by `kv_cache`)

    def lazy_initialization(self, key_states, value_states) -> None:
        super().lazy_initialization(key_states, value_states)
        self._k = self._v = None
        self._len = 0

    def update(self, key_states, value_states, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        need = self._len + key_states.shape[-2]
        if self._k is None or need > self._k.shape[-2]:
            cap = max(need, self.capacity, 2 * (0 if self._k is None else self._k.shape[-2]))
            k = key_states.new_empty(*key_states.shape[:-2], cap, key_states.shape[-1])
            v = value_states.new_empty(*value_states.shape[:-2], cap, value_states.shape[-1])
            if self._len:
                k[..., : self._len, :] = self._k[..., : self._len, :]
                v[..., : self._len, :] = self._v[..., : self._len, :]
            self._k, self._v = k, v
        self._k[..., self._len : need, :] = key_states
        self._v[..., self._len : need, :] = value_states
        self._len = need
        self.keys, self.values = self._k[..., :need, :], self._v[..., :need, :]
        return self.keys, self.values

    def crop(self, tokens_to_remove: int) -> None:
        super().crop(tokens_to_remove)
        self._len = self.keys.shape[-2] if self.is_initialized and self.keys is not None else 0

    def batch_select_indices(self, indices) -> None:
        """Keep only the rows `indices` (the decode loop drops finished rows): their filled positions
        move into a buffer of the same capacity."""
        if self._k is None:
            return
        k, v = (
            self._k.new_empty(len(indices), *self._k.shape[1:]),
            self._v.new_empty(len(indices), *self._v.shape[1:]),
        )
        k[..., : self._len, :] = self._k[indices, :, : self._len]
        v[..., : self._len, :] = self._v[indices, :, : self._len]
        self._k, self._v = k, v
        self.keys, self.values = k[..., : self._len, :], v[..., : self._len, :]

    def reset(self) -> None:
        self._k = self._v = None
        self._len = 0
        super().reset()


def takes_dynamic_cache(model) -> bool:
    """Whether `model`'s forward takes `past_key_values` and transformers would give it a DynamicCache
    (a peft wrapper: its base model's; the class's forward, whatever wraps the instance's)."""
    base = unwrapped(model)
    supports = getattr(base, "_supports_default_dynamic_cache", None)
    if supports is not None and not supports():
        return False
    return "past_key_values" in inspect.signature(type(base).forward).parameters


def kv_cache(model, capacity: int) -> DynamicCache | None:
    """transformers' DynamicCache for `model`'s config (sliding-window, hybrid or linear-attention
    layers as transformers lays them out) with each plain full-attention layer a `GrowingLayer` holding
    `capacity` positions; None (transformers builds its own) if the config cannot be read that way or
    the model keeps a cache of its own kind (Mamba's `cache_params`, RWKV's `state`; MiniMax's is built
    here, `_minimax_cache`)."""
    if not takes_dynamic_cache(model):
        return _minimax_cache(model)
    try:
        cache = DynamicCache(config=model.config)
    except Exception:  # noqa: BLE001 - an architecture this transformers cannot lay out: its own default
        return None
    layer = type("GrowingLayer", (GrowingLayer,), {"capacity": capacity})
    if cache.layers:
        cache.layers = [layer() if type(x) is DynamicLayer else x for x in cache.layers]
    elif cache.layer_class_to_replicate is DynamicLayer:
        cache.layer_class_to_replicate = layer
    return cache


def _minimax_cache(model):
    """MiniMax's own cache (MiniMax-Text-01, MiniMax-M1: linear attention beside full attention) reading
    the lengths of the cached keys off its first full-attention layer, or None for any other model.
    transformers' MiniMaxCache keeps the linear layers' states beside empty key slots and answers the
    mask builder's length questions from layer 0, a linear layer: every decoding step then built a mask
    one position long, which attends to all cached keys, left padding included (3-6 nats off the full
    forward's log-probs for a left-padded row; unpadded rows are right either way)."""
    from reasonrl.models.loading import text_config

    if getattr(model.config, "model_type", None) != "minimax":
        return None
    from transformers.models.minimax.modeling_minimax import MiniMaxCache

    types = getattr(text_config(model.config), "layer_types", None) or []
    first = next((i for i, t in enumerate(types) if t == "full_attention"), 0)

    class Cache(MiniMaxCache):
        def get_seq_length(self, layer_idx: int = 0) -> int:
            return super().get_seq_length(layer_idx or first)

        def get_mask_sizes(self, query_length: int, layer_idx: int = 0) -> tuple[int, int]:
            return super().get_mask_sizes(query_length, layer_idx or first)

    return Cache()
