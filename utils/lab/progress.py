"""Progress bars from `tqdm.auto`, switched off by an environment variable."""

from __future__ import annotations

import os
from collections.abc import Iterable

from tqdm.auto import tqdm

DISABLE_ENV_VAR = "TPU_SPEED_PIPELINES_NO_PROGRESS"


def track(items: Iterable, *, desc: str, total: int | None = None) -> Iterable:
    """Wraps `items` in a progress bar, unless `$TPU_SPEED_PIPELINES_NO_PROGRESS` is set.

    Args:
        items: what to iterate over.
        desc: the bar's label.
        total: number of items, when `len(items)` does not work.

    Returns:
        An iterable over the same items.

    Example:
        for path in progress.track(paths, desc="Writing shards"):
            ...
    """
    disabled = os.environ.get(DISABLE_ENV_VAR, "") not in ("", "0")
    return tqdm(items, desc=desc, total=total, disable=disabled, leave=False)
