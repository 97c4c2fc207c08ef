"""The planner reads every architecture the RL invariant is tested on (`_families.py`): the shape it
measures on the meta device has the real model's parameter count, settings a config gives per layer
(Gemma 3n's intermediate_size list, Gemma 4's per-layer head_dim) read without an error, and FSDP2
finds blocks to shard. Before, Gemma 3n stopped `model_shape` on its list of intermediate sizes, and
BioGPT, which lists no `_no_split_modules`, had no decoder layers for FSDP2."""

from __future__ import annotations

import pytest
from _architecture_models import _model
from _families import (
    FAMILIES,
    HYBRIDS,
    LEGACY_ATTENTION,
    MULTIMODAL,
    NAMED_ATTENTION,
    NO_PACKING,
)

from reasonrl.engines.fsdp2 import decoder_layers
from reasonrl.planner.shape import model_shape

EVERY = sorted({*FAMILIES, *HYBRIDS, *NAMED_ATTENTION, *NO_PACKING, *LEGACY_ATTENTION, *MULTIMODAL})


@pytest.mark.parametrize("family", EVERY)
def test_the_planner_measures_every_family(family):
    model = _model(family, spread=False)
    shape = model_shape("x", config=model.config)
    assert shape.params == sum(p.numel() for p in model.parameters())
    assert isinstance(shape.intermediate, int) and shape.intermediate > 0
    layers = decoder_layers(model)
    assert layers and 0 < shape.largest_layer == max(sum(p.numel() for p in x.parameters()) for x in layers)


def test_a_per_layer_list_is_read_as_its_largest_value():
    model = _model("gemma3n", spread=False)
    sizes = model.config.intermediate_size
    assert isinstance(sizes, list) and model_shape("x", config=model.config).intermediate == max(sizes)
