"""Tests of utils/lab/output_folder.py from outside: the user's files, a previous set, a killed run.

A run is killed for real (SIGKILL, in a subprocess: no `finally` runs) while it writes its
shards, and while it moves its finished set in; the user's own files are checked by hash.
"""

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest
import tensorflow as tf

from tests.conftest import REPO_ROOT
from utils import shard_files, sidecar
from utils.lab import conversion, validation

USER_FILES = {
    "notes.txt": b"my notes",
    "notes.tmp": b"my temporary notes",
    "x.tfrecord": b"my own TFRecord file",
    "flowers00-9.tfrec.bak": b"my backup of a shard",
    "mine/flowers00-3.tfrec": b"a shard of mine, in a folder of mine",
}

# Converts argv[1] into argv[2] (16 px, argv[3] shards); SIGKILLs itself at argv[4]:
# "write" while shard 2 is half written, "move" as the second shard is moved into argv[2].
_KILLED_RUN = """
import os, signal, sys
from pathlib import Path
import tensorflow as tf
from utils import shard_files
from utils.lab import conversion, sources

source, output_dir, num_shards, moment = sys.argv[1:]
moves = []

def write_shard(examples, folder, index):
    if moment == "write" and index == 2:
        Path(shard_files.temporary_path(folder, index)).write_bytes(b"half a shard")
        os.kill(os.getpid(), signal.SIGKILL)
    return shard_files.write_shard(examples, folder, index)

rename = tf.io.gfile.rename

def rename_then_die(old, new, overwrite=False):
    if Path(new).parent == Path(output_dir) and new.endswith(".tfrec"):
        moves.append(new)
    if moment == "move" and len(moves) == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    rename(old, new, overwrite)

tf.io.gfile.rename = rename_then_die
steps = conversion.ConversionSteps(write_shard=write_shard)
conversion.convert(sources.resolve_source(source), output_dir, target_size=16,
                   num_shards=int(num_shards), steps=steps)
"""


def _with_user_files(folder: Path) -> dict[str, str]:
    for name, content in USER_FILES.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(content)
    return _hashes(folder)


def _hashes(folder: Path) -> dict[str, str]:
    """Every file under `folder`, by its path there: its SHA-256."""
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _killed_run(source, output_dir: Path, num_shards: int, moment: str) -> None:
    command = [sys.executable, "-c", _KILLED_RUN, source.name, str(output_dir), str(num_shards)]
    result = subprocess.run([*command, moment], cwd=REPO_ROOT, capture_output=True, timeout=300)
    assert result.returncode == -9, result.stderr.decode()[-2000:]  # Killed by SIGKILL.


def _set_files(output_dir: Path) -> list[str]:
    """The set's files by its sidecar: its shards, then the sidecar."""
    return [Path(p).name for p in shard_files.list_shards(str(output_dir))] + [
        sidecar.METADATA_FILE
    ]


def test_a_set_beside_the_user_files_replaces_the_previous_one_and_touches_none_of_theirs(
    small_source, tmp_path
):
    user = _with_user_files(tmp_path)
    conversion.convert(small_source, tmp_path, target_size=16, num_shards=4)
    report = conversion.convert(small_source, tmp_path, target_size=24, num_shards=3)  # Fewer.
    after = _hashes(tmp_path)
    assert {name: after[name] for name in user} == user
    shards = ["flowers00-20.tfrec", "flowers01-20.tfrec", "flowers02-20.tfrec"]
    assert [Path(p).name for p in report.shards] == shards
    assert sorted(set(after) - set(user)) == sorted([*shards, sidecar.METADATA_FILE])
    assert validation.validate(str(tmp_path), verbose=False).ok


def test_a_run_killed_while_writing_leaves_the_previous_set_whole_and_the_next_run_replaces_it(
    small_source, tmp_path
):
    user = _with_user_files(tmp_path)
    conversion.convert(small_source, tmp_path, target_size=16, num_shards=3)
    before = _hashes(tmp_path)
    _killed_run(small_source, tmp_path, 4, "write")
    after = _hashes(tmp_path)
    incomplete = shard_files.INCOMPLETE_FOLDER
    assert {name: h for name, h in after.items() if not name.startswith(incomplete)} == before
    assert sorted(after.keys() - before.keys()) == [
        f"{incomplete}/flowers00-15.tfrec",
        f"{incomplete}/flowers01-15.tfrec",
        f"{incomplete}/flowers02.tfrec.tmp",
    ]
    assert _set_files(tmp_path) == [f"flowers0{i}-20.tfrec" for i in range(3)] + [
        sidecar.METADATA_FILE
    ]
    problems = validation.validate(str(tmp_path), verbose=False).problems
    assert problems == [
        f"{incomplete}: a conversion into this folder did not finish. Run it again: it "
        "finishes that set, or deletes it if it was not whole."
    ]
    conversion.convert(small_source, tmp_path, target_size=16, num_shards=4)
    after = _hashes(tmp_path)
    assert {name: after[name] for name in user} == user
    shards = [f"flowers0{i}-15.tfrec" for i in range(4)]
    assert sorted(set(after) - set(user)) == sorted([*shards, sidecar.METADATA_FILE])
    assert validation.validate(str(tmp_path), verbose=False).ok


def test_a_run_killed_while_moving_its_set_in_is_finished_by_the_next_run(small_source, tmp_path):
    user = _with_user_files(tmp_path)
    conversion.convert(small_source, tmp_path, target_size=16, num_shards=3)
    _killed_run(small_source, tmp_path, 4, "move")
    names = set(_hashes(tmp_path)) - set(user)
    # The previous set is gone, its sidecar first; the new one is half moved in, its sidecar last.
    incomplete = shard_files.INCOMPLETE_FOLDER
    assert sorted(names) == [
        "flowers00-15.tfrec",
        f"{incomplete}/flowers01-15.tfrec",
        f"{incomplete}/flowers02-15.tfrec",
        f"{incomplete}/flowers03-15.tfrec",
        f"{incomplete}/flowers_tfrecords.json",
        f"{incomplete}/flowers_tfrecords.replaced.json",
    ]
    with pytest.raises(FileNotFoundError, match="missing or unfinished"):
        shard_files.list_shards(str(tmp_path))
    assert not validation.validate(str(tmp_path), verbose=False).ok
    report = conversion.convert(small_source, tmp_path, target_size=16, num_shards=2)
    after = _hashes(tmp_path)
    assert {name: after[name] for name in user} == user
    shards = [Path(p).name for p in report.shards]
    assert shards == ["flowers00-30.tfrec", "flowers01-30.tfrec"]
    assert sorted(set(after) - set(user)) == sorted([*shards, sidecar.METADATA_FILE])
    assert validation.validate(str(tmp_path), verbose=False).ok


def test_a_file_of_the_user_named_like_a_shard_is_refused_before_anything_is_written(
    small_source, tmp_path
):
    user = _with_user_files(tmp_path)
    (tmp_path / "flowers01-20.tfrec").write_bytes(b"mine")
    with pytest.raises(ValueError) as raised:
        conversion.convert(small_source, tmp_path, target_size=16, num_shards=3)
    assert str(raised.value) == (
        f"`output_dir` {tmp_path} holds flowers01-20.tfrec, which no sidecar or unfinished run "
        "of the course lists, so the course did not write it; a conversion would overwrite it. "
        "Move it, or choose another output_dir."
    )
    assert _hashes(tmp_path) == {**user, "flowers01-20.tfrec": hashlib.sha256(b"mine").hexdigest()}


def test_a_set_in_a_tensorflow_file_system_is_moved_in_as_on_disk(small_source):
    output_dir = "ram://output-folder-test"  # TensorFlow's in-memory file system, as gs://.
    tf.io.gfile.makedirs(output_dir)
    with tf.io.gfile.GFile(f"{output_dir}/notes.txt", "w") as file:
        file.write("mine")
    try:
        conversion.convert(small_source, output_dir, target_size=16, num_shards=4)
        report = conversion.convert(small_source, f"{output_dir}/", target_size=16, num_shards=3)
        names = ["flowers00-20.tfrec", "flowers01-20.tfrec", "flowers02-20.tfrec"]
        assert report.shards == [f"{output_dir}/{name}" for name in names]
        listed = sorted(tf.io.gfile.listdir(output_dir))
        assert listed == sorted([*names, sidecar.METADATA_FILE, "notes.txt"])
        with tf.io.gfile.GFile(f"{output_dir}/notes.txt") as file:
            assert file.read() == "mine"
        assert validation.validate(output_dir, verbose=False).ok
    finally:
        tf.io.gfile.rmtree(output_dir)
