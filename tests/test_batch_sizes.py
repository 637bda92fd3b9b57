"""Tests of utils/batch_sizes.py's fit_batch_size: a folder smaller than a batch is said plainly."""

import pytest

from utils import batch_sizes


def test_fit_batch_size_of_a_30_record_folder_at_the_default_batch_says_what_to_set(capsys):
    assert batch_sizes.fit_batch_size(64, num_records=30) == 30
    assert capsys.readouterr().out == (
        "BATCH_SIZE is 64, but this folder holds 30 records; set BATCH_SIZE to at most 30. "
        "Batches of 30 are used meanwhile.\n"
    )


def test_fit_batch_size_of_a_large_enough_folder_keeps_the_batch_silently(capsys):
    assert batch_sizes.fit_batch_size(64, num_records=64) == 64
    assert batch_sizes.fit_batch_size(64, num_records=3670, parameter="BATCH") == 64
    assert capsys.readouterr().out == ""


def test_fit_batch_size_of_an_empty_folder_names_the_parameter():
    with pytest.raises(ValueError, match=r"^This folder holds no record: .* \(BATCH_SIZE\)\.$"):
        batch_sizes.fit_batch_size(64, num_records=0)
