"""Writing a topic's ``config`` file (docs/tree.md "Topics"): the text a descriptor writes
replaces the topic's overrides when it is closed, and every line is checked as soon as it is
complete, so a bad key or value fails the ``write()`` that carries it (bash's builtin
``echo ... > config`` ignores errors of ``close()``, not of ``write()``).

The rules are Kafka's topic configs (:func:`kafkafs.log.config.check_topic_config`); a
refusal is logged once, as Kafka's ConfigException words it (``Invalid value banana for
configuration retention.ms: Not a number of type LONG``), and the descriptor changes
nothing at close.
"""

from __future__ import annotations

import logging

from ..log import config as logconfig
from ..log.errors import InvalidConfigError
from ..log.properties import PropertiesSyntaxError

log = logging.getLogger(__name__)

MAX_CONFIG_BYTES = 1024 * 1024  # a config file written longer than this fails with EFBIG


class ConfigTooLargeError(Exception):
    """More than :data:`MAX_CONFIG_BYTES` written to one descriptor of a ``config`` file."""


def _complete_end(buf: bytes | bytearray, start: int) -> int:
    """The end of the last complete logical line of ``buf[start:]``: just after a newline
    whose line is not continued (Java properties: an odd number of trailing backslashes
    continues a line on the next); ``start`` when there is none yet."""
    end = len(buf)
    while True:
        nl = buf.rfind(b"\n", start, end)
        if nl < 0:
            return start
        line = bytes(buf[buf.rfind(b"\n", start, nl) + 1:nl]).rstrip(b"\r")
        if (len(line) - len(line.rstrip(b"\\"))) % 2 == 0:
            return nl + 1
        end = nl


def parse_config_text(text: bytes) -> dict[str, str]:
    """The ``key=value`` pairs of ``text`` (Java properties, UTF-8), each checked against
    Kafka's topic config rules. Raises InvalidConfigError saying what is wrong (a key,
    value and rule; or the line that is not text or not properties syntax)."""
    try:
        props = logconfig.parse_properties(text.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise InvalidConfigError(f"the text is not UTF-8 (byte {exc.start})") from None
    except PropertiesSyntaxError as exc:
        raise InvalidConfigError(str(exc)) from None
    for key, value in props.items():
        logconfig.check_topic_config(key, value)
    return props


class ConfigWriter:
    """The bytes one descriptor has written to ``topic``'s ``config`` file.

    :meth:`write` checks each logical line as it completes; :meth:`finish` (at ``flush``,
    i.e. ``close``) checks the rest and returns the properties to store. After a refusal
    every later call raises InvalidConfigError again and nothing is stored.
    """

    __slots__ = ("buf", "checked", "refused", "topic")

    def __init__(self, topic: str):
        self.topic = topic
        self.buf = bytearray()
        self.checked = 0       # bytes of buf checked: a logical line boundary
        self.refused: InvalidConfigError | None = None

    def write(self, data: bytes) -> int:
        """Take ``data``; returns ``len(data)``. Raises InvalidConfigError (a complete line
        is bad, or an earlier one was), ConfigTooLargeError."""
        if self.refused is not None:
            raise self.refused
        if len(self.buf) + len(data) > MAX_CONFIG_BYTES:
            raise ConfigTooLargeError(f"more than {MAX_CONFIG_BYTES} bytes written to "
                                      f"{self.topic}/config")
        self.buf += data
        end = _complete_end(self.buf, self.checked)
        if end > self.checked:
            self._check(self.checked, end)
            self.checked = end
        return len(data)

    def finish(self) -> dict[str, str] | None:
        """The properties written (every line checked), or None when nothing was written.
        Raises InvalidConfigError (the same refusal again after a failed write)."""
        if self.refused is not None:
            raise self.refused
        if not self.buf:
            return None
        self._check(self.checked, len(self.buf))
        text, self.buf, self.checked = bytes(self.buf), bytearray(), 0
        return parse_config_text(text)

    def _check(self, start: int, end: int) -> None:
        try:
            parse_config_text(bytes(self.buf[start:end]))
        except InvalidConfigError as exc:
            self.refused = exc
            self.buf.clear()
            log.warning("Refused a write to %s/config (nothing changed): %s", self.topic, exc)
            raise
