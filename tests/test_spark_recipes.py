"""docs/spark.md's recipes run as printed (issue 20): the first example as a script run with
the venv's python from a shell without the venv; the cluster recipe (a wheel, one
environment at one path, spark-submit) on a standalone cluster of pyspark's own scripts
whose processes see neither the venv nor this checkout; object storage through a local S3
server (moto's server mode) with the endpoint and credentials given as documented.

Each runs in processes of its own: what is tested is what a user's fresh process gets
(environment variables, the executors' Python), which the suite's shared session cannot
show."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time

import pytest
from conftest import ROOT
from test_spark_cluster import alive_workers, free_port
from test_spark_source import fresh_shell_env

from kafkafs.log.config import BrokerConfig
from kafkafs.log.manager import LogManager

pytestmark = pytest.mark.spark

SPARK_MD = os.path.join(ROOT, "docs", "spark.md")


def spark_md_section(title: str) -> str:
    """The text of docs/spark.md's section ``## title`` (up to the next ``## ``)."""
    with open(SPARK_MD, encoding="utf-8") as f:
        text = f.read()
    m = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert m, f"docs/spark.md has no section {title!r}"
    return m.group(1)


def code_blocks(text: str, lang: str) -> list[str]:
    """The ``lang`` fenced blocks of ``text``, in order."""
    return re.findall(rf"^```{lang}\n(.*?)^```", text, re.S | re.M)


def make_log_dir(path: str, topic: str = "orders", partitions: int = 2,
                 keys: int = 3, per_key: int = 4) -> dict[bytes, int]:
    """A log dir at ``path`` holding ``topic``: record i of partition p has key ``k<i%keys>``
    and value ``o<p>-<i>``. Returns {key: records}."""
    cfg = BrokerConfig.from_properties({}).with_log_dirs([path])
    m = LogManager(cfg)
    m.startup()
    m.create_topic(topic, partitions)
    counts: dict[bytes, int] = {}
    for p in range(partitions):
        batch = []
        for i in range(keys * per_key):
            key = b"k%d" % (i % keys)
            counts[key] = counts.get(key, 0) + 1
            batch.append((1_764_000_000_000 + i, key, b"o%d-%d" % (p, i), ()))
        m.get_log(topic, p).append(batch)
    assert m.shutdown()
    return counts


def read_topic(path: str, topic: str) -> list[tuple[bytes | None, bytes | None]]:
    """Every record of ``topic`` in the log dir ``path`` as (key, value), read-only."""
    m = LogManager(BrokerConfig.from_properties({}).with_log_dirs([path]), read_only=True)
    m.startup()
    try:
        return [(r.key, r.value) for p in m.partitions(topic)
                for r in m.get_log(topic, p).records()]
    finally:
        m.shutdown()


def errors_of(stderr: str) -> str:
    """The Python errors in a Spark job's long stderr, else its end."""
    return "\n".join(sorted({x.strip() for x in stderr.splitlines() if "Error:" in x})) \
        or stderr[-3000:]


# -- the first example ---------------------------------------------------------------------
FIRST_DIR = '"/var/lib/kafka/data"'  # the one thing the test changes: where the log dir is


def test_first_example_runs_as_printed_from_a_fresh_shell(tmp_path):
    """docs/spark.md's first example, saved as a script and run as ``.venv/bin/python
    ex1.py`` from a shell without the venv (no VIRTUAL_ENV, PATH without its bin dir, so
    ``python3`` there has no kafkafs): ``register()`` makes the executors run the driver's
    Python. pyspark alone runs ``python3`` from PATH: the executors failed with
    ``ModuleNotFoundError: No module named 'kafkafs'``."""
    with open(SPARK_MD, encoding="utf-8") as f:
        code = code_blocks(f.read(), "python")[0]
    assert code.count(FIRST_DIR) == 1, code
    logs = str(tmp_path / "logs")
    make_log_dir(logs, partitions=2, keys=1, per_key=3)
    script = tmp_path / "ex1.py"
    script.write_text(code.replace(FIRST_DIR, repr(logs)))
    home = tmp_path / "home"
    home.mkdir()
    env = fresh_shell_env(str(home))
    assert "VIRTUAL_ENV" not in env
    r = subprocess.run([sys.executable, str(script)], env=env, cwd=str(home),
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, errors_of(r.stderr)
    # show(): one row per record, key, value and offset
    rows = re.findall(r"^\|\s*k0\|\s*(o\d-\d)\|\s*(\d+)\|$", r.stdout, re.M)
    assert sorted(rows) == sorted((f"o{p}-{i}", str(i)) for p in (0, 1) for i in range(3)), \
        r.stdout
