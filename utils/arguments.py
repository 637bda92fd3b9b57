"""Argument checks shared by the course's functions: one message for each kind of mistake."""

from __future__ import annotations


def check_integer(name: str, value: object, low: int, high: int | None = None) -> None:
    """Checks that a parameter is an integer in a range.

    Args:
        name: the parameter's name, for the message.
        value: the value received.
        low: the smallest value allowed.
        high: the largest value allowed; None for no limit.

    Raises:
        ValueError: naming `name`, the range wanted and the value received.
    """
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or value < low
        or (high is not None and value > high)
    ):
        wanted = (
            f"an integer from {low} to {high}"
            if high is not None
            else ("a positive integer" if low == 1 else f"an integer of at least {low}")
        )
        raise ValueError(f"`{name}` must be {wanted}. Received: {name}={value!r}")
