"""kafkafs on Spark: the ``kafkalog`` data source (docs/design.md §3.2, §4.6;
docs/spark.md).

``register(spark)`` registers :class:`~kafkafs.spark.source.KafkaLogDataSource` under the
name ``kafkalog``; then ``spark.read.format("kafkalog")`` / ``spark.readStream`` read
Kafka-format log dirs and ``df.write.format("kafkalog")`` bulk-loads a topic into one.

Needs the ``[spark]`` extra (pyspark, pyarrow, pandas) and a JDK. The log and record layers
never import this package.
"""

from __future__ import annotations

import os
import sys

from .source_name import SOURCE_NAME  # noqa: F401 (kafkafs.spark.SOURCE_NAME)

PYSPARK_DEFAULT_PYTHON = "python3"  # what pyspark runs without PYSPARK_PYTHON


def register(spark) -> None:
    """Register the ``kafkalog`` data source with ``spark`` (a ``SparkSession``), its Python
    workers (planning on the driver, reading and writing on the executors) running
    :func:`executor_python`: this interpreter unless the user chose one. Installs
    :mod:`kafkafs.spark.loadcheck`'s hooks: bad read options are refused at ``load()`` with
    ``pyspark.errors.IllegalArgumentException`` and Spark's message.

    Idempotent. Raises ImportError without pyspark.
    """
    from . import loadcheck
    from .source import KafkaLogDataSource

    loadcheck.install()  # option errors at load(), as Spark's Kafka source gives them
    use_executor_python(spark)
    spark.dataSource.register(KafkaLogDataSource)  # takes the context's Python now


def executor_python(spark) -> str | None:
    """The Python the session's workers should run: ``PYSPARK_PYTHON`` when set, else
    ``spark.pyspark.python`` of the session's conf, else this interpreter
    (``sys.executable``: without it pyspark runs ``python3`` from ``PATH``, which need not
    have kafkafs -- a script run as ``.venv/bin/python job.py`` from a shell without the venv
    activated failed in the executors with ``ModuleNotFoundError: kafkafs.spark``). None
    when the session has no SparkContext (Spark Connect: the server decides)."""
    chosen = os.environ.get("PYSPARK_PYTHON")
    if chosen:
        return chosen
    try:
        conf = spark.sparkContext.getConf()
    except Exception:  # noqa: BLE001 - Spark Connect has no SparkContext
        return None
    return conf.get("spark.pyspark.python") or sys.executable


def use_executor_python(spark) -> None:
    """Make the session's Python workers run :func:`executor_python`, unless the context
    already runs another than pyspark's default (set by hand on ``sc.pythonExec``).
    pyspark reads only ``PYSPARK_PYTHON`` when the context starts, so ``spark.pyspark.python``
    given to the builder is honoured here too."""
    python = executor_python(spark)
    if python is None:
        return
    sc = spark.sparkContext
    if sc.pythonExec in (PYSPARK_DEFAULT_PYTHON, python):
        sc.pythonExec = python


def session(master: str, app_name: str, conf: dict | None = None):
    """A ``SparkSession`` (``getOrCreate``) on ``master`` with ``kafkalog`` registered, as
    ``kafkafs pipeline`` and the test suite want it: executors run this interpreter
    (``PYSPARK_PYTHON``, unless set), the driver's and executors' log4j logs errors only
    (``log4j2.properties`` beside this module; Spark's progress bar stays), session time
    zone UTC, Arrow for pandas conversions; ``conf`` adds or overrides Spark settings.
    Raises ImportError without pyspark."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    quiet = "-Dlog4j2.configurationFile=file:" + os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "log4j2.properties")
    settings = {"spark.driver.extraJavaOptions": quiet,
                "spark.executor.extraJavaOptions": quiet,
                "spark.sql.session.timeZone": "UTC",
                "spark.sql.execution.arrow.pyspark.enabled": "true", **(conf or {})}
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark
