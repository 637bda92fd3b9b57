"""Lesson 2 on a folder with a bad image shows no C++ log line (issue 43, item 7).

TensorFlow's image decoders log a line of their own from C++ on a bad file ("E0000 ...
jpeg_mem.cc:331] Premature end of JPEG data"), and absl prints "All log messages before
absl::InitializeLog() is called are written to STDERR" before a library's first log line;
lesson 2's sample of a local folder with a truncated JPEG showed them. Only a fresh process
logs absl's line, so the end-to-end test starts one.
"""

import os
import subprocess
import sys

from tests.conftest import REPO_ROOT
from utils import errors

SAMPLE_A_FOLDER_WITH_A_TRUNCATED_JPEG = """
import sys
import tensorflow as tf
from utils import readable_images
pixels = tf.random.stateless_uniform([64, 64, 3], seed=(1, 2), maxval=256, dtype=tf.int32)
image = tf.io.encode_jpeg(tf.cast(pixels, tf.uint8)).numpy()
open(sys.argv[1] + "/good.jpg", "wb").write(image)
open(sys.argv[1] + "/truncated.jpg", "wb").write(image[: len(image) // 2])
print("IMPORTED", file=sys.stderr, flush=True)
paths = [sys.argv[1] + "/truncated.jpg", sys.argv[1] + "/good.jpg"]
print(readable_images.readable_sample(paths, 1, verbose=False)[2])
"""


def test_decoder_messages_drops_absl_s_first_line(capfd):
    with errors.decoder_messages() as messages:
        absl = "All log messages before absl::InitializeLog() is called are written to STDERR"
        os.write(2, f"WARNING: {absl}\n".encode())
        os.write(2, b"E0000 00:00:17.6 6258 jpeg_mem.cc:329] Premature end of JPEG data.\n")
    assert messages == ["Premature end of JPEG data."]
    assert capfd.readouterr().err == ""


def test_a_sample_of_a_folder_with_a_truncated_jpeg_logs_nothing(tmp_path):
    result = subprocess.run(
        [sys.executable, "-c", SAMPLE_A_FOLDER_WITH_A_TRUNCATED_JPEG, str(tmp_path)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    error = "jpeg::Uncompress failed. Invalid JPEG data or crop window."
    skipped = [(f"{tmp_path}/truncated.jpg", error)]
    assert result.stdout == f"{skipped}\n"
    assert result.stderr.split("IMPORTED\n", 1)[1] == ""
