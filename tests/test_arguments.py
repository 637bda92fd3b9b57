"""utils.arguments: one message for each kind of wrong integer argument."""

import pytest

from utils import arguments


@pytest.mark.parametrize(
    "value, low, high, message",
    [
        (0, 1, None, "`n` must be a positive integer. Received: n=0"),
        (True, 1, None, "`n` must be a positive integer. Received: n=True"),
        (2.0, 1, None, "`n` must be a positive integer. Received: n=2.0"),
        (1, 2, None, "`n` must be an integer of at least 2. Received: n=1"),
        (-1, 0, None, "`n` must be an integer of at least 0. Received: n=-1"),
        (101, 0, 100, "`n` must be an integer from 0 to 100. Received: n=101"),
        ("5", 0, 100, "`n` must be an integer from 0 to 100. Received: n='5'"),
    ],
)
def test_check_integer_names_the_argument_the_range_and_the_value(value, low, high, message):
    with pytest.raises(ValueError) as raised:
        arguments.check_integer("n", value, low, high)
    assert str(raised.value) == message


@pytest.mark.parametrize("value, low, high", [(1, 1, None), (0, 0, 100), (100, 0, 100)])
def test_check_integer_accepts_the_range_ends(value, low, high):
    assert arguments.check_integer("n", value, low, high) is None
