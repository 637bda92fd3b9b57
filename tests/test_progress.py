"""Tests of utils/lab/progress.py."""

from utils.lab import progress


def test_track_yields_every_item_when_disabled(monkeypatch, capsys):
    monkeypatch.setenv(progress.DISABLE_ENV_VAR, "1")
    assert list(progress.track(range(5), desc="test")) == [0, 1, 2, 3, 4]
    assert capsys.readouterr().err == ""


def test_track_shows_a_bar_when_enabled(monkeypatch, capsys):
    monkeypatch.delenv(progress.DISABLE_ENV_VAR, raising=False)
    assert list(progress.track(range(3), desc="Counting")) == [0, 1, 2]
    assert "Counting" in capsys.readouterr().err
