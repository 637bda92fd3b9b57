"""Tests of utils/lab/sources.py and remote_sources.py: every data source, and bad ones."""

import contextlib
import functools
import http.server
import re
import shutil
import tarfile
import threading
from pathlib import Path

import pytest
import tensorflow as tf

from utils.lab import data, remote_sources, sources


def test_resolve_source_embedded(tmp_path):
    source = sources.resolve_source("embedded", num_images=12, cache_dir=tmp_path)
    assert source.num_images == 12
    assert source.class_names == data.CLASSES
    assert not source.is_remote
    assert len(tf.io.gfile.glob(source.pattern)) == 12
    assert source.describe().startswith("12 images in 5 classes (daisy, dandelion")


def test_resolve_source_local_folder(small_flowers, tmp_path):
    folder = tmp_path / "mine"
    shutil.copytree(small_flowers / "roses", folder / "roses")
    shutil.copytree(small_flowers / "tulips", folder / "tulips")
    (folder / "README.txt").write_text("not an image")
    source = sources.resolve_source(str(folder))
    assert source.class_names == ("roses", "tulips")
    assert source.num_images == len(list(folder.glob("*/*.jpg")))


def test_resolve_source_empty_folder_says_what_was_expected(tmp_path):
    (tmp_path / "daisy").mkdir()
    with pytest.raises(
        ValueError,
        match=r"no images in .*: 1 class folder\(s\), all empty: daisy\. What to do: copy the "
        r"photos into the class folders\. Expected",
    ):
        sources.resolve_source(str(tmp_path))


def test_resolve_source_reads_every_extension_in_any_case(small_flowers, tmp_path):
    shutil.copytree(small_flowers / "roses", tmp_path / "roses")
    shutil.copytree(small_flowers / "tulips", tmp_path / "tulips")
    first, second, third = sorted((tmp_path / "roses").glob("*.jpg"))[:3]
    first.rename(first.with_suffix(".JPG"))
    second.rename(second.with_suffix(".jpeg"))
    third.rename(third.with_name("photo.PNG"))
    source = sources.resolve_source(str(tmp_path))
    assert source.num_images == len(list(tmp_path.glob("*/*"))) == len(source.paths)
    assert {Path(p).suffix for p in source.paths} == {".JPG", ".jpeg", ".PNG", ".jpg"}


@pytest.mark.parametrize(
    "bad, message",
    [
        (
            "no/such/folder",
            rf"Unknown data source 'no/such/folder': no such folder "
            rf"\({re.escape(str(Path.cwd() / 'no/such/folder'))}\)\. Expected",
        ),
        ("s3://bucket/*.jpg", r"only gs:// is supported"),
        ("", r"`source` must be a non-empty string"),
        (None, r"`source` must be a non-empty string"),
    ],
    ids=["missing folder", "other scheme", "empty string", "None"],
)
def test_resolve_source_unknown_says_what_was_expected(bad, message):
    with pytest.raises(ValueError, match=message):
        sources.resolve_source(bad)


def test_resolve_source_gcs_glob_is_remote(monkeypatch):
    paths = [f"gs://my-bucket/flowers/{c}/{i}.jpg" for c in ("roses", "daisy") for i in range(3)]
    monkeypatch.setattr(tf.io.gfile, "glob", lambda pattern: paths)
    source = sources.resolve_source("gs://my-bucket/flowers/*/*.jpg")
    assert source.is_remote
    assert source.class_names == ("daisy", "roses")
    assert source.num_images == 6
    assert source.pattern == "gs://my-bucket/flowers/*/*.jpg"


def test_resolve_source_gcs_glob_with_no_match(monkeypatch):
    monkeypatch.setattr(tf.io.gfile, "glob", lambda pattern: [])
    with pytest.raises(ValueError, match=r"'gs://empty/\*/\*\.jpg' matched no files"):
        sources.resolve_source("gs://empty/*/*.jpg")


@contextlib.contextmanager
def _serve_archive(tmp_path, folders):
    """Serves flower_photos.tgz holding `folders` ({name in archive: folder}) on loopback.

    Yields (server, url); the server is shut down on exit.
    """
    served = tmp_path / "served"
    served.mkdir()
    with tarfile.open(served / "flower_photos.tgz", "w:gz") as archive:
        for arcname, folder in folders.items():
            archive.add(folder, arcname=arcname)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server, f"http://127.0.0.1:{server.server_port}/flower_photos.tgz"
    finally:
        server.shutdown()


@pytest.fixture
def archive_server(small_flowers, tmp_path):
    """A flower_photos-shaped archive (daisy and roses) served on loopback."""
    folders = {
        "flower_photos/daisy": small_flowers / "daisy",
        "flower_photos/roses": small_flowers / "roses",
    }
    with _serve_archive(tmp_path, folders) as served:
        yield served


def test_resolve_source_flower_photos_downloads_once_then_uses_cache(
    archive_server, small_flowers, tmp_path
):
    server, url = archive_server
    cache = tmp_path / "cache"
    source = sources.resolve_source("flower_photos", cache_dir=cache, flower_photos_url=url)
    expected = len(list((small_flowers / "daisy").glob("*.jpg"))) + len(
        list((small_flowers / "roses").glob("*.jpg"))
    )
    assert source.num_images == expected
    assert source.class_names == ("daisy", "roses")
    server.shutdown()  # Offline now: the cached copy must be enough.
    again = sources.resolve_source("flower_photos", cache_dir=cache, flower_photos_url=url)
    assert again.pattern == source.pattern


def test_download_flower_photos_archive_without_images_is_an_error(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "LICENSE.txt").write_text("nothing here")
    with _serve_archive(tmp_path, {"flower_photos": tmp_path / "empty"}) as (_, url):
        with pytest.raises(ValueError, match=r"holds no <class>/\*\.jpg folders") as error:
            remote_sources.download_flower_photos(url, tmp_path / "cache")
    assert str(error.value).endswith(
        f"delete what was downloaded under {tmp_path / 'cache' / 'datasets'} and run this again."
    )


def test_resolve_source_expands_a_tilde_as_a_shell_does(small_flowers, tmp_path, monkeypatch):
    shutil.copytree(small_flowers, tmp_path / "photos")
    monkeypatch.setenv("HOME", str(tmp_path))
    source = sources.resolve_source("~/photos")
    assert source.name == "~/photos" and source.num_images == 60
    assert source.paths[0].startswith(str((tmp_path / "photos").resolve()))


def test_resolve_source_a_file_says_it_is_a_file_not_a_folder(tmp_path, monkeypatch):
    (tmp_path / "flowers.zip").write_bytes(b"PK")
    with pytest.raises(ValueError) as raised:
        sources.resolve_source(str(tmp_path / "flowers.zip"))
    assert str(raised.value) == (
        f"Data source '{tmp_path / 'flowers.zip'}' is a file, not a folder. Give the folder "
        "that holds one folder of images per class: <folder>/<class>/*.jpg."
    )
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError) as raised:
        sources.resolve_source("flowers.zip")
    assert str(raised.value).startswith(
        f"Data source 'flowers.zip' is a file, not a folder ({tmp_path / 'flowers.zip'}). "
    )


OFFLINE_NEXT_STEP = (
    'Without the network, set DATA_SOURCE = "embedded" (generated here, no download) or a '
    "local folder of your photos (<folder>/<class>/*.jpg)."
)
SIGN_IN = (
    "sign in with `gcloud auth application-default login` (on Colab: "
    "`from google.colab import auth; auth.authenticate_user()`)"
)


def test_resolve_source_gcs_offline_is_one_line_with_the_next_step(monkeypatch):
    def offline(pattern):  # What TF 2.21 raises without a network (issue 27).
        raise tf.errors.FailedPreconditionError(
            None,
            None,
            "Error executing an HTTP request: libcurl code 6 meaning 'Couldn't resolve host "
            "name', error details: Could not resolve host: storage.googleapis.com",
        )

    monkeypatch.setattr(tf.io.gfile, "glob", offline)
    with pytest.raises(ValueError) as raised:
        sources.resolve_source("gs://my-bucket/flowers/*/*.jpg")
    assert str(raised.value) == (
        "Cannot reach gs://my-bucket/flowers/*/*.jpg: this machine is offline (Could not "
        f"resolve host). {OFFLINE_NEXT_STEP} For your own bucket, go online and {SIGN_IN}."
    )
    assert raised.value.__suppress_context__  # No chained traceback under it.


def test_resolve_source_gcs_not_signed_in_says_how_to_sign_in(monkeypatch):
    def refused(pattern):
        raise tf.errors.PermissionDeniedError(None, None, "Error executing an HTTP request: 401")

    monkeypatch.setattr(tf.io.gfile, "glob", refused)
    with pytest.raises(ValueError) as raised:
        sources.resolve_source("gs://my-bucket/*/*.jpg")
    assert str(raised.value) == (
        "Cannot list gs://my-bucket/*/*.jpg: not allowed (Error executing an HTTP request: "
        f"401). To read your own bucket, {SIGN_IN}; a public bucket may be closed "
        f"(gs://flowers-public is). {OFFLINE_NEXT_STEP}"
    )


def test_resolve_source_flower_photos_offline_is_one_line_with_the_next_step(tmp_path):
    closed = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    port = closed.server_port
    closed.server_close()  # Nothing listens there now: the connection is refused.
    url = f"http://127.0.0.1:{port}/flower_photos.tgz"
    cache = tmp_path / "cache"
    with pytest.raises(ValueError) as raised:
        sources.resolve_source("flower_photos", cache_dir=cache, flower_photos_url=url)
    assert str(raised.value) == (
        f"Cannot download flower_photos from {url}: Connection refused. {OFFLINE_NEXT_STEP} "
        f"Online, it is downloaded once and then read from {cache / 'datasets'}."
    )
    assert raised.value.__suppress_context__
