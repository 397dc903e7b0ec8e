"""The registry of family objects, keyed by `config.model_type`: a new family adds its class here."""
from __future__ import annotations

from measure.errors import MeasureError
from measure.models.bert import BertFamily
from measure.models.families import Family, Gemma2Family, LlamaFamily, MistralFamily, Qwen2Family, Qwen3Family

FAMILIES: dict[str, type] = {
    cls.model_type: cls for cls in (LlamaFamily, MistralFamily, Qwen2Family, Qwen3Family, Gemma2Family,
                                    BertFamily)}


def supported() -> str:
    """The supported `model_type`s, for error messages."""
    return ", ".join(sorted(FAMILIES))


def family_for(model, where: str) -> Family:
    """The family object of a loaded model; `where` names it in the error."""
    model_type = getattr(model.config, "model_type", "?")
    if model_type not in FAMILIES:
        raise MeasureError(f"{where}: architecture {model_type!r} is not supported; supported: {supported()}")
    return FAMILIES[model_type](model)
