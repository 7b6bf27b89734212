"""Log formatting: one record is one line, whatever tenants or peers wrote.

Object fields, Envoy's NACK messages and exception texts can carry newlines and terminal escapes;
escaping them in the formatter (not at each call site) means no log line can be forged.  Tracebacks
stay multi-line (they are cpx's own text), indented under their record.
"""

from __future__ import annotations

import json
import logging

from cpx.isolation import sanitize

# A log message is bounded too: a tenant's 1 MB annotation must not become a 1 MB log line.
MAX_MESSAGE = 8192


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)-7s %(name)s: %(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = sanitize(record.message, MAX_MESSAGE)
        return super().formatMessage(record)


class JSONFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, msg (and exc when there is one)."""

    def format(self, record: logging.LogRecord) -> str:
        doc = {
            "time": self.formatTime(record),
            "level": record.levelname,
            "logger": record.name,
            "msg": sanitize(record.getMessage(), MAX_MESSAGE),
        }
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        return json.dumps(doc)


def setup(level: str, fmt: str) -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(JSONFormatter() if fmt == "json" else TextFormatter())
    logging.basicConfig(level=getattr(logging, level.upper()), handlers=[handler], force=True)
