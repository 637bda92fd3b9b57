"""Grain's record reads through the course's simulated storage, in threads or worker processes.

`StorageReads` reads records by key from ArrayRecord files. With a
`storage.SimulatedStorage`, each file pays one first-byte wait the first time a record of
it is read in an epoch (as a TFRecord shard pays one each time `tf.data` opens it), and
its bytes are charged to its stream when there is a bandwidth cap; with
`request_per_record`, every record read is a request of its own (random access straight
to object storage). The wait holds the reading thread, as a blocking read does.

It can be pickled into Grain's worker processes (`mp_prefetch`): each worker rebuilds the
storage from its settings, so it opens the files it reads itself, as a worker process
with its own connections does (and a total bandwidth cap is then per worker).
"""

from __future__ import annotations

import bisect
import os
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from utils.storage import SimulatedStorage

FRAMING_BYTES = 16  # A TFRecord record's framing, charged as `tfrecord_dataset` does.
# What a worker process needs to rebuild the storage (`SimulatedStorage`'s arguments).
_STORAGE_SETTINGS = (
    "latency_ms",
    "latency_p99_ms",
    "megabytes_per_second",
    "total_megabytes_per_second",
)


def num_records(path: str) -> int:
    """Returns the records in an ArrayRecord file, or -1 when it cannot be read."""
    from array_record.python import array_record_module

    try:
        reader = array_record_module.ArrayRecordReader(path)
        try:
            return int(reader.num_records())
        finally:
            reader.close()
    except (RuntimeError, ValueError):  # A damaged file.
        return -1


class StorageReads:
    """Reads records by key from ArrayRecord files through a (simulated) storage.

    The first read of each file in an epoch waits for the file's first byte
    (`SimulatedStorage.open_object`); reads of that file on other threads meanwhile wait
    for the same first byte, not for one of their own. With a bandwidth cap, each record's
    bytes are charged to its file's stream.

    Args:
        paths: ArrayRecord files.
        storage: the storage; None reads directly.
        request_per_record: every record read is a request of its own (its own first-byte
            wait and bytes), as random reads straight from object storage are.
    """

    def __init__(
        self,
        paths: Sequence[str],
        storage: SimulatedStorage | None = None,
        *,
        request_per_record: bool = False,
    ):
        import grain

        self.source = grain.sources.ArrayRecordDataSource([str(path) for path in paths])
        self._ends = list(np.cumsum([num_records(str(path)) for path in paths]))
        self._sizes = [os.path.getsize(path) for path in paths]
        self._storage = storage if storage is not None and storage.simulated else None
        self._request_per_record = request_per_record
        self._start()

    def _start(self) -> None:
        self._charge_bytes = bool(
            self._storage
            and (self._storage.megabytes_per_second or self._storage.total_megabytes_per_second)
        )
        self._lock = threading.Lock()
        self._opened: dict[tuple[int, int], tuple[threading.Event, list[int]]] = {}

    def __getstate__(self) -> dict:
        """The reads without their locks and open files; the storage as its settings.

        A storage that adds nothing (no latency, no cap) is left out: a worker then reads
        directly, without importing the storage layer (and TensorFlow with it).
        """
        state = {k: v for k, v in self.__dict__.items() if k not in ("_lock", "_opened")}
        if self._storage is not None:
            settings = {name: getattr(self._storage, name) for name in _STORAGE_SETTINGS}
            state["_storage"] = settings if any(settings.values()) else None
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        if self._storage is not None:
            from utils.storage import SimulatedStorage

            self._storage = SimulatedStorage(**self._storage)
        self._start()

    def __len__(self) -> int:
        return int(self._ends[-1])

    def read(self, epoch: int, key: int) -> bytes:
        """Returns the record at `key`, after its file's first-byte wait in `epoch`."""
        if self._storage is not None and self._request_per_record:
            record = self.source[key]
            self._storage.wait_for_object(len(record) + FRAMING_BYTES)
            return record
        if self._storage is not None:
            stream = self._open(epoch, bisect.bisect_right(self._ends, key))
        record = self.source[key]
        if self._charge_bytes:
            self._storage.wait_for_bytes(stream, len(record) + FRAMING_BYTES)
        return record

    def _open(self, epoch: int, file_index: int) -> int:
        with self._lock:
            opened = self._opened.get((epoch, file_index))
            if opened is None:
                opened = self._opened[epoch, file_index] = (threading.Event(), [])
                owner = True
                # Files of epochs two or more back are not read again.
                for old in [k for k in self._opened if k[0] < epoch - 1]:
                    del self._opened[old]
            else:
                owner = False
        event, stream = opened
        if owner:
            try:
                stream.append(self._storage.open_object(self._sizes[file_index]))
            finally:
                event.set()
        else:
            event.wait()
        return stream[0] if stream else -1
