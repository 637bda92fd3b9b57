"""The float formats mixed precision chooses between: their range, precision, and tiny values."""

from __future__ import annotations

import ml_dtypes
import numpy as np

# The formats, in the order the lesson prints them.
FLOAT_FORMATS = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}


def describe_float_formats() -> list[str]:
    """Describes each float format's range and precision, and what becomes of a gradient of 1e-8.

    Returns:
        One line per format of `FLOAT_FORMATS`: its largest value, its smallest normal
        value, its significant bits, and 1e-8 as stored in it (0 where it cannot be held).

    Example:
        print("\\n".join(float_formats.describe_float_formats()))
    """
    lines = []
    for name, dtype in FLOAT_FORMATS.items():
        info = ml_dtypes.finfo(dtype)
        stored = float(np.array(1e-8, dtype=dtype))
        lines.append(
            f"{name:>8}: largest {float(info.max):.1e}, smallest normal {float(info.tiny):.1e}, "
            f"{int(info.nmant) + 1} significant bits; "
            f"a gradient of 1e-8 becomes {stored:.1e}"
        )
    return lines
