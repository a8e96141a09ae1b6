from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class SplitFit:
    """One (candidate, split) fit produced by a search engine."""
    candidate: int                 # index into `candidates`
    split: int                     # index into `splits`
    estimator: Any                 # the fitted estimator; None when the fit failed
    fit_time: float                # seconds: own work + an equal share of the work it shared
    error: BaseException | None = None
    shared: str = "none"           # what this fit reused, e.g. "kernel rows; alpha seeding"
