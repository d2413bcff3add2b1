"""The base of every wire model: its validator is built when first used, not on import.

Building all ~60 models when `protocol.methods` is imported cost the first request of
every process ~100 ms, most of it for models that request never touches (pydantic's
`defer_build`). Every model in `protocol/` derives from `WireModel`.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class WireModel(BaseModel):
    model_config = ConfigDict(defer_build=True)
