"""The model's config.json as the fact `model/config.json`, read once from --model-config.

A bundle may carry `model/config.json` itself (`llmdoctor collect --model-config`); then that
copy is the fact and no file is read. Otherwise the file named by `settings/model_config_path`
(diagnose --model-config) is read here, once, so every check sees the same document and a
bundle written from these facts replays it.
"""

from __future__ import annotations

from typing import Any

from llmdoctor.engine.derive import derived_fact
from llmdoctor.engine.facts import FactMissing, Facts
from llmdoctor.errors import BadInput

MODEL_CONFIG = "model/config.json"
SETTING = "settings/model_config_path"


@derived_fact(MODEL_CONFIG, needs=(SETTING,))
def model_config(facts: Facts) -> dict[str, Any]:
    from llmdoctor.capacity.model_shape import load_model_config

    try:
        return load_model_config(facts.require(SETTING))
    except BadInput as exc:
        raise FactMissing(MODEL_CONFIG, str(exc)) from None
