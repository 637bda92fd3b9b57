"""How long simulated object storage makes a reader wait: first bytes, bandwidth, counts.

No TensorFlow here: `storage.SimulatedStorage` reads files through these waits with
tf.data, and Grain's reader (`grain_arrayrecord`) charges its own reads to them.
"""

from __future__ import annotations

import itertools
import statistics
import threading
import time

import numpy as np

_Z_99 = statistics.NormalDist().inv_cdf(0.99)  # 2.326: the p99 of a standard normal.


class StorageWaits:
    """The waits and counters of simulated object storage, one object or stream at a time.

    The model and its arguments are `storage.SimulatedStorage`'s (less `read_bytes`):
    a first-byte latency per object opened, fixed or long-tailed, then at most
    `megabytes_per_second` per stream and `total_megabytes_per_second` in all. A wait
    holds the thread that asked; waits on different threads overlap.

    Raises:
        ValueError: if a latency is negative, the p99 is below the median, or a bandwidth
            is not positive.
    """

    def __init__(
        self,
        latency_ms: float,
        *,
        latency_p99_ms: float | None = None,
        megabytes_per_second: float | None = None,
        total_megabytes_per_second: float | None = None,
        seed: int = 0,
        simulated: bool = True,
    ):
        if (
            isinstance(latency_ms, bool)
            or not isinstance(latency_ms, (int, float))
            or latency_ms < 0
        ):
            raise ValueError(
                f"`latency_ms` must be a number >= 0. Received: latency_ms={latency_ms!r}"
            )
        if latency_p99_ms is not None and not (
            isinstance(latency_p99_ms, (int, float)) and latency_p99_ms >= latency_ms
        ):
            raise ValueError(
                "`latency_p99_ms` must be None or a number >= latency_ms. "
                f"Received: latency_p99_ms={latency_p99_ms!r}, latency_ms={latency_ms!r}"
            )
        for name, value in (
            ("megabytes_per_second", megabytes_per_second),
            ("total_megabytes_per_second", total_megabytes_per_second),
        ):
            if value is not None and not value > 0:
                raise ValueError(f"`{name}` must be positive or None. Received: {name}={value!r}")
        self.latency_ms = float(latency_ms) if simulated else 0.0
        self.latency_p99_ms = latency_p99_ms if simulated else None
        self.megabytes_per_second = megabytes_per_second if simulated else None
        self.total_megabytes_per_second = total_megabytes_per_second if simulated else None
        self.simulated = simulated
        self._random = np.random.default_rng(seed)
        self._lock = threading.Lock()
        self._in_flight = 0
        self._stream_ids = itertools.count()
        self._stream_clocks: dict[int, float] = {}
        self._network_clock = 0.0
        self.reset_counters()

    def describe(self) -> str:
        """Says what is simulated.

        Returns:
            One line: the latency model and the bandwidth caps, or that none is simulated.
        """
        if not self.simulated:
            return "Real remote storage: no latency is simulated."
        caps = [
            f"{self.megabytes_per_second:g} MB/s per stream" if self.megabytes_per_second else "",
            f"{self.total_megabytes_per_second:g} MB/s in all"
            if self.total_megabytes_per_second
            else "",
        ]
        cap = "".join(f", {text}" for text in caps if text)
        if self.latency_p99_ms is not None:
            return (
                f"SIMULATED object storage: first byte after {self.latency_ms:g} ms (median), "
                f"{self.latency_p99_ms:g} ms (p99){cap}."
            )
        if self.latency_ms == 0 and not cap:
            return "Local disk: no latency simulated."
        return (
            f"SIMULATED remote storage: {self.latency_ms:g} ms first-byte latency per object{cap}."
        )

    def reset_counters(self) -> None:
        """Sets the counters to zero, the in-flight peak to now's count; forgets the latencies."""
        with self._lock:
            self.num_requests = 0
            self.num_bytes_read = 0
            self.max_in_flight = self._in_flight
            self.latencies_ms: list[float] = []

    def draw_latency_ms(self) -> float:
        """Draws one first-byte latency from the storage's model.

        Returns:
            Milliseconds: `latency_ms` when fixed, else a draw from the long-tailed model.
        """
        if self.latency_p99_ms is None or self.latency_ms == 0:
            return self.latency_ms
        sigma = np.log(self.latency_p99_ms / self.latency_ms) / _Z_99
        with self._lock:
            return float(self.latency_ms * np.exp(sigma * self._random.standard_normal()))

    def wait_for_object(self, num_bytes: int) -> None:
        """Blocks as long as reading one whole object of `num_bytes` bytes takes; counts it.

        Args:
            num_bytes: the object's size.
        """
        self._open(num_bytes, transfer=True)

    def open_object(self, num_bytes: int) -> int:
        """Blocks until an object's first byte arrives; counts it; returns its stream's id.

        For readers that read an object's records themselves (as Grain reads ArrayRecord
        files): charge the bytes as they are read with `wait_for_bytes(stream, ...)`.

        Args:
            num_bytes: the object's size.

        Returns:
            The stream's id.
        """
        return self._open(num_bytes, transfer=False)

    def _open(self, num_bytes: int, *, transfer: bool) -> int:
        latency_ms = self.draw_latency_ms()
        with self._lock:
            self.num_requests += 1
            self.num_bytes_read += int(num_bytes)
            self.latencies_ms.append(latency_ms)
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
        try:
            if latency_ms:
                time.sleep(latency_ms / 1000)
        finally:
            with self._lock:
                self._in_flight -= 1
                stream = next(self._stream_ids)
                self._stream_clocks[stream] = time.monotonic()
        if transfer:
            self.wait_for_bytes(stream, num_bytes)
            with self._lock:
                self._stream_clocks.pop(stream, None)
        return stream

    def wait_for_bytes(self, stream: int, num_bytes: int) -> None:
        """Blocks until `num_bytes` more bytes of an open stream have arrived.

        A stream receives its bytes from its first byte on, whether or not they are read
        yet; reading them waits only for those that have not arrived.

        Args:
            stream: the stream's id, from opening it.
            num_bytes: how many more bytes are read.
        """
        if not (self.megabytes_per_second or self.total_megabytes_per_second):
            return
        with self._lock:
            arrived = self._stream_clocks.get(stream, time.monotonic())
            if self.megabytes_per_second:
                arrived += num_bytes / (self.megabytes_per_second * 1e6)
            if self.total_megabytes_per_second:
                start = max(self._network_clock, self._stream_clocks.get(stream, arrived))
                self._network_clock = start + num_bytes / (self.total_megabytes_per_second * 1e6)
                arrived = max(arrived, self._network_clock)
            self._stream_clocks[stream] = arrived
        delay = arrived - time.monotonic()
        if delay > 0:
            time.sleep(delay)
