"""The kafkalog data source's registration and schema (Spark's Kafka source schema), and
README's snippet run as printed."""

import os
import re
import subprocess
import sys

import pytest
from conftest import ROOT

from kafkafs.log.config import BrokerConfig
from kafkafs.log.manager import LogManager

pytestmark = pytest.mark.spark


def test_schema_is_the_kafka_source_schema(spark, tmp_path):
    df = spark.read.format("kafkalog").option("subscribe", "t").load(str(tmp_path))
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("key", "binary"), ("value", "binary"), ("topic", "string"), ("partition", "int"),
        ("offset", "bigint"), ("timestamp", "timestamp"), ("timestampType", "int")]
    df = spark.read.format("kafkalog").option("subscribe", "t").option(
        "includeHeaders", "true").load(str(tmp_path))
    assert df.schema.fields[-1].name == "headers"
    assert df.schema.fields[-1].dataType.simpleString() == \
        "array<struct<key:string,value:binary>>"


# -- README's snippet, exactly as printed, from a fresh shell (issue 18 §6) -------------------

README_DIR = '"/var/lib/kafka/logs"'  # the one thing the test changes: where the log dir is


def readme_snippet() -> str:
    """The ``python`` block of README.md's Spark paragraph."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        text = f.read()
    block = re.search(r"On Spark, .*?```python\n(.*?)```", text, re.DOTALL)
    assert block, "README.md has no Spark snippet"
    return block.group(1)


def fresh_shell_env(home: str) -> dict:
    """A shell where the venv is not activated: no VIRTUAL_ENV, PATH without the venv's
    bin dir (``python3`` there is another interpreter, without kafkafs), no PYSPARK_*.
    PYTHONPATH only when this interpreter would not otherwise import the kafkafs under test
    (a git worktree of a checkout whose venv has the other one installed)."""
    venv_bin = os.path.dirname(sys.executable)
    path = [p for p in os.environ.get("PATH", "/usr/bin:/bin").split(os.pathsep)
            if p and os.path.realpath(p) != os.path.realpath(venv_bin)]
    env = {"PATH": os.pathsep.join(path), "HOME": home, "LANG": "C.UTF-8"}
    if os.environ.get("JAVA_HOME"):
        env["JAVA_HOME"] = os.environ["JAVA_HOME"]
    found = subprocess.run([sys.executable, "-c", "import kafkafs; print(kafkafs.__file__)"],
                           env=env, capture_output=True, text=True, cwd=home,
                           check=True).stdout.strip()
    if os.path.dirname(os.path.dirname(found)) != ROOT:
        env["PYTHONPATH"] = ROOT
    return env


def test_readme_snippet_runs_as_printed_from_a_fresh_shell(tmp_path):
    """README's snippet as a script run with the venv's python from a shell without the
    venv activated. pyspark's workers ran ``python3`` from PATH, which has no kafkafs: the
    executors failed with ``ModuleNotFoundError: No module named 'kafkafs.spark'`` (it
    worked only with the venv activated). register() now makes them run the driver's
    Python unless the user chose one."""
    code = readme_snippet()
    assert code.count(README_DIR) == 1, code
    logs = tmp_path / "logs"
    cfg = BrokerConfig.from_properties({}).with_log_dirs([str(logs)])
    m = LogManager(cfg)
    m.startup()
    m.create_topic("orders", 2)
    ts = 1764000000000  # the snippet's startingTimestamp
    for p in (0, 1):
        m.get_log("orders", p).append([(ts - 1000 + 1000 * i, None, b"o%d-%d" % (p, i), ())
                                       for i in range(4)])
    assert m.shutdown()
    script = tmp_path / "job.py"
    script.write_text(code.replace(README_DIR, repr(str(logs))))
    home = tmp_path / "home"
    home.mkdir()
    r = subprocess.run([sys.executable, str(script)], env=fresh_shell_env(str(home)),
                       cwd=str(home), capture_output=True, text=True, timeout=600,
                       check=False)
    assert r.returncode == 0, "\n".join(  # the Python errors of Spark's long trace
        sorted({x.strip() for x in r.stderr.splitlines() if "Error:" in x})) or r.stderr[-3000:]
    copy = LogManager(cfg, read_only=True)
    copy.startup()
    try:
        values = sorted(rec.value for p in copy.partitions("copy")
                        for rec in copy.get_log("copy", p).records())
    finally:
        copy.shutdown()
    # startingTimestamp skips each partition's first record
    assert values == sorted(b"o%d-%d" % (p, i) for p in (0, 1) for i in (1, 2, 3))


def test_register_keeps_the_python_the_user_chose(monkeypatch):
    """PYSPARK_PYTHON, or spark.pyspark.python of the session, wins over the driver's."""
    import kafkafs.spark as ks

    class Conf(dict):
        def get(self, key, default=None):
            return super().get(key, default)

    class Context:
        pythonExec = "python3"

        def __init__(self, conf):
            self._conf = Conf(conf)

        def getConf(self):
            return self._conf

    class Session:
        def __init__(self, conf):
            self.sparkContext = Context(conf)

    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    s = Session({})
    ks.use_executor_python(s)
    assert s.sparkContext.pythonExec == sys.executable
    s = Session({"spark.pyspark.python": "/opt/py/bin/python"})
    ks.use_executor_python(s)
    assert s.sparkContext.pythonExec == "/opt/py/bin/python"
    s = Session({})
    s.sparkContext.pythonExec = "/by/hand/python"
    ks.use_executor_python(s)
    assert s.sparkContext.pythonExec == "/by/hand/python"
    monkeypatch.setenv("PYSPARK_PYTHON", "/env/python")
    s = Session({"spark.pyspark.python": "/opt/py/bin/python"})
    ks.use_executor_python(s)
    assert s.sparkContext.pythonExec == "/env/python"
