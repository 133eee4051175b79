"""Capacity planning: a model's weights and KV cache against the GPUs it is given."""
