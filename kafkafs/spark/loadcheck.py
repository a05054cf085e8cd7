"""Option errors at ``load()``, as Spark's Kafka source gives them.

Spark's built-in Kafka source refuses a bad option when ``load()`` runs
(``KafkaSourceProvider.sourceSchema`` / ``createRelation`` call ``validateStreamOptions`` /
``validateBatchOptions``). A Python data source's only code run at ``load()`` is its
constructor and ``schema()`` (PySpark's ``create_data_source`` worker), and neither is told
whether the source is loaded for a batch read or a stream: Spark passes the same option
map. Without help a stream with ``endingOffsets`` loaded and started, and died seconds later
in the query thread (``ValueError: ending offset not valid in streaming queries`` followed
by PySpark's own ``UnboundLocalError``).

:func:`install` (called by :func:`kafkafs.spark.register`) wraps, once per process, the
``format`` and ``load`` methods of PySpark's ``DataFrameReader`` and ``DataStreamReader``
(classic and Spark Connect):

* ``format("kafkalog")`` adds the option :data:`~kafkafs.spark.options.QUERY_TYPE_OPTION`
  = ``batch`` (``spark.read``) or ``streaming`` (``spark.readStream``), which ``schema()``
  reads to run :func:`~kafkafs.spark.options.validate_at_load`;
* ``load()`` turns the ``AnalysisException`` ``[PYTHON_DATA_SOURCE_ERROR]`` PySpark wraps
  such an error in (a Python traceback inside) into ``pyspark.errors.IllegalArgumentException``
  carrying Spark's message alone: what a user of Spark's Kafka source catches.

Other formats are left alone. A reader not made through these methods (SQL, a Scala
caller) gets its option errors from the reader when Spark creates it, as before.
"""

from __future__ import annotations

import functools
import re
import sys

from .options import QUERY_TYPE_OPTION
from .source_name import SOURCE_NAME

__all__ = ["install", "option_error_message"]

_MARK = "kafkafs.spark.options.OptionError: "
_SQLSTATE = re.compile(r"\s*SQLSTATE: \w+\s*$")
_installed = False


def option_error_message(exc: BaseException) -> str | None:
    """The message of the :class:`~kafkafs.spark.options.OptionError` inside the exception
    PySpark raised from ``load()`` (its text holds the Python traceback), or None when it
    holds none."""
    text = str(exc)
    i = text.rfind(_MARK)
    if i < 0:
        return None
    return _SQLSTATE.sub("", text[i + len(_MARK):]).rstrip("\n")


def _wrap_format(cls, kind: str) -> None:
    original = cls.format
    if getattr(original, "_kafkalog", False):
        return

    @functools.wraps(original)
    def format(self, source, *args, **kwargs):
        out = original(self, source, *args, **kwargs)
        if isinstance(source, str) and source.lower() == SOURCE_NAME:
            out = out.option(QUERY_TYPE_OPTION, kind)
        return out

    format._kafkalog = True
    cls.format = format


def _wrap_load(cls) -> None:
    original = cls.load
    if getattr(original, "_kafkalog", False):
        return

    @functools.wraps(original)
    def load(self, *args, **kwargs):
        try:
            return original(self, *args, **kwargs)
        except Exception as exc:
            message = option_error_message(exc)
            if message is None:
                raise
            from pyspark.errors import IllegalArgumentException

            raise IllegalArgumentException(message=message) from None

    load._kafkalog = True
    cls.load = load


def install() -> None:
    """Wrap the readers' ``format`` and ``load`` (see the module). Idempotent for the
    classic readers; Spark Connect's are wrapped by the first call made once a Connect
    session imported them."""
    global _installed
    if _installed and "pyspark.sql.connect.readwriter" not in sys.modules:
        return
    from pyspark.sql.readwriter import DataFrameReader
    from pyspark.sql.streaming.readwriter import DataStreamReader

    targets = [(DataFrameReader, "batch"), (DataStreamReader, "streaming")]
    # Spark Connect's readers only when a Connect session already imported them: importing
    # pyspark.sql.connect without its dependencies (grpc) calls sys.exit(0) in a program
    # run as `python -c` or from stdin (its check_dependencies takes such a __main__ for
    # doctests), which silently ended the caller's program
    connect = sys.modules.get("pyspark.sql.connect.readwriter")
    connect_stream = sys.modules.get("pyspark.sql.connect.streaming.readwriter")
    if connect is not None:
        targets.append((connect.DataFrameReader, "batch"))
    if connect_stream is not None:
        targets.append((connect_stream.DataStreamReader, "streaming"))
    for cls, kind in targets:
        _wrap_format(cls, kind)
        _wrap_load(cls)
    _installed = True
