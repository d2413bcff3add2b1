"""Rate-limited logging of refusals: a peer refused ten thousand times a second must not
write ten thousand log lines (filling the disk, hiding everything else in the log).

The first `burst` refusals of each `interval` are logged as they happen; the rest are
counted and summed up in one line when the next interval begins.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

BURST = 20
INTERVAL = 60.0


class RateLimitedLog:
    def __init__(self, logger: logging.Logger, burst: int = BURST, interval: float = INTERVAL):
        self.logger = logger
        self.burst = burst
        self.interval = interval
        self._window = time.monotonic()
        self._logged = 0
        self._suppressed = 0
        self._lock = threading.Lock()

    def warning(self, message: str, *args: Any) -> None:
        with self._lock:
            now = time.monotonic()
            if now - self._window >= self.interval:
                if self._suppressed:
                    self.logger.warning(
                        "%d more refusals in the last %.0f s were not logged",
                        self._suppressed,
                        now - self._window,
                    )
                self._window, self._logged, self._suppressed = now, 0, 0
            if self._logged >= self.burst:
                self._suppressed += 1
                return
            self._logged += 1
            if self._logged == self.burst:
                message += " (further refusals are counted, not logged, for a while)"
        self.logger.warning(message, *args)
