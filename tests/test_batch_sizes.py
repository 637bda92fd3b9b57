"""Tests of utils/batch_sizes.py: batches that fit the images and split evenly over replicas."""

import pytest

from utils import batch_sizes


def test_even_batch_size_leaves_the_fewest_images_out():
    assert batch_sizes.even_batch_size(687, max_batch_size=256, num_replicas=8) == 224
    assert batch_sizes.even_batch_size(687, max_batch_size=1024, num_replicas=8) == 680
    assert batch_sizes.even_batch_size(687, max_batch_size=32, num_replicas=1) == 31
    assert batch_sizes.even_batch_size(18, max_batch_size=32, num_replicas=1) == 18
    assert batch_sizes.even_batch_size(45, max_batch_size=64, num_replicas=2) == 44
    with pytest.raises(ValueError, match=r"^5 image\(s\) cannot feed 8 replicas"):
        batch_sizes.even_batch_size(5, max_batch_size=256, num_replicas=8)


def test_cap_batch_size_keeps_a_multiple_of_the_replicas(capsys):
    assert batch_sizes.cap_batch_size(32, num_images=100, num_replicas=1, purpose="training") == 32
    assert capsys.readouterr().out == ""
    capped = batch_sizes.cap_batch_size(1024, num_images=687, num_replicas=8, purpose="validation")
    assert capped == 680
    assert capsys.readouterr().out == (
        "The validation batch of 1024 is larger than the 687 validation images: capped to 680 "
        "(85 per replica).\n"
    )
    assert batch_sizes.cap_batch_size(64, num_images=45, num_replicas=2, purpose="training") == 44
    assert "capped to 44 (22 per replica)" in capsys.readouterr().out
    with pytest.raises(ValueError, match=r"^5 training image\(s\) cannot feed 8 replicas"):
        batch_sizes.cap_batch_size(256, num_images=5, num_replicas=8, purpose="training")
