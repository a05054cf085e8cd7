"""A rate limiter for the log cleaner's I/O (Kafka ``Throttler``).

Every cleaner thread reports the bytes it reads and writes; once per check interval (300 ms,
as Kafka's ``LogCleaner`` sets it) the throttler compares the observed rate with the desired
one (``log.cleaner.io.max.bytes.per.second``) and sleeps long enough to bring it back.
Thread-safe: one throttler is shared by all cleaner threads, so the limit holds for their
sum.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

NS_PER_SEC = 1_000_000_000


class Throttler:
    """Kafka's ``Throttler``: ``desired_rate_per_sec`` units (bytes) per second, checked every
    ``check_interval_ms``. ``clock`` (monotonic ns) and ``sleep`` (seconds) are for tests."""

    def __init__(self, desired_rate_per_sec: float, check_interval_ms: int = 300, *,
                 clock: Callable[[], int] = time.monotonic_ns,
                 sleep: Callable[[float], None] = time.sleep):
        self.desired_rate_per_sec = float(desired_rate_per_sec)
        self._check_interval_ns = check_interval_ms * 1_000_000
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._period_start = clock()
        self._observed = 0.0
        self.slept_ms = 0  # total time spent sleeping (a statistic)

    def maybe_throttle(self, observed: float) -> None:
        """Count ``observed`` units; sleep when the rate over the current interval is above
        the desired rate (the sleep brings the interval's average down to it)."""
        desired = self.desired_rate_per_sec
        with self._lock:
            self._observed += observed
            now = self._clock()
            elapsed = now - self._period_start
            if elapsed > self._check_interval_ns and self._observed > 0:
                rate = self._observed * NS_PER_SEC / elapsed
                if rate > desired:
                    elapsed_ms = elapsed // 1_000_000
                    sleep_ms = round(self._observed / (desired / 1000) - elapsed_ms)
                    if sleep_ms > 0:
                        self.slept_ms += sleep_ms
                        self._sleep(sleep_ms / 1000)
                self._period_start = self._clock()
                self._observed = 0.0
