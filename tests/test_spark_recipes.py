"""docs/spark.md's recipes run as printed (issue 20): the first example as a script run with
the venv's python from a shell without the venv; the cluster recipe (a wheel, one
environment at one path, spark-submit) on a standalone cluster of pyspark's own scripts
whose processes see neither the venv nor this checkout; object storage through a local S3
server (moto's server mode) with the endpoint and credentials given as documented.

Each runs in processes of its own: what is tested is what a user's fresh process gets
(environment variables, the executors' Python), which the suite's shared session cannot
show."""

from __future__ import annotations

import json
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
    m = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.DOTALL | re.MULTILINE)
    assert m, f"docs/spark.md has no section {title!r}"
    return m.group(1)


def code_blocks(text: str, lang: str) -> list[str]:
    """The ``lang`` fenced blocks of ``text``, in order."""
    return re.findall(rf"^```{lang}\n(.*?)^```", text, re.DOTALL | re.MULTILINE)


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
                       capture_output=True, text=True, timeout=600, check=False)
    assert r.returncode == 0, errors_of(r.stderr)
    # show(): one row per record, key, value and offset
    rows = re.findall(r"^\|\s*k0\|\s*(o\d-\d)\|\s*(\d+)\|$", r.stdout, re.MULTILINE)
    assert sorted(rows) == sorted((f"o{p}-{i}", str(i)) for p in (0, 1) for i in range(3)), \
        r.stdout


# -- on a cluster --------------------------------------------------------------------------
def clean_env(home: str) -> dict:
    """What a shell on a cluster machine has: PATH with the Python the driver's venv was
    made from first (``python3`` there has no kafkafs) and without the venv, java, no
    PYTHONPATH, VIRTUAL_ENV or PYSPARK_*; SPARK_HOME the pyspark package's own Spark."""
    import pyspark

    venv_bin = os.path.realpath(os.path.dirname(sys.executable))
    base_bin = os.path.dirname(getattr(sys, "_base_executable", None) or sys.executable)
    path = [base_bin] + [p for p in os.environ.get("PATH", "/usr/bin:/bin").split(os.pathsep)
                         if p and os.path.realpath(p) != venv_bin]
    env = {"PATH": os.pathsep.join(path), "HOME": home, "LANG": "C.UTF-8",
           "SPARK_HOME": os.path.dirname(pyspark.__file__), "SPARK_LOCAL_IP": "127.0.0.1"}
    for name in ("JAVA_HOME", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS",
                 "PIP_CONFIG_FILE"):
        if os.environ.get(name):
            env[name] = os.environ[name]
    return env


@pytest.fixture
def clean_cluster(tmp_path):
    """A standalone master and two workers (one core each) started with pyspark's own
    ``bin/spark-class`` in :func:`clean_env`: their executors see neither the suite's venv
    nor this checkout. Yields (master URL, env, worker dirs)."""
    env = clean_env(os.path.expanduser("~"))  # ~ for pip's cache: the recipe installs
    spark_class = os.path.join(env["SPARK_HOME"], "bin", "spark-class")
    base = tmp_path / "cluster"
    base.mkdir()
    port, ui = free_port(), free_port()
    procs = []

    def start(name, *args):
        with open(base / f"{name}.log", "wb") as log:
            procs.append(subprocess.Popen([spark_class, *args], env=env, stdout=log,
                                          stderr=subprocess.STDOUT, cwd=str(base)))

    start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
          "--port", str(port), "--webui-port", str(ui))
    work_dirs = []
    for i in range(2):
        wd = base / f"worker{i}"
        wd.mkdir()
        work_dirs.append(str(wd))
        start(f"worker{i}", "org.apache.spark.deploy.worker.Worker",
              f"spark://127.0.0.1:{port}", "--host", "127.0.0.1", "--cores", "1",
              "--memory", "1g", "--work-dir", str(wd), "--webui-port", str(free_port()))
    try:
        deadline = time.monotonic() + 120
        while alive_workers(ui) < 2:
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                raise RuntimeError("the standalone cluster did not come up: " + " ".join(
                    (base / f"{n}.log").read_text(errors="replace")[-2000:]
                    for n in ("master", "worker0", "worker1")))
            time.sleep(0.5)
        yield f"spark://127.0.0.1:{port}", env, work_dirs
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()


def checkout_copy(dest: str) -> str:
    """The checkout's tracked files (or, without git, its tree less what builds and runs
    leave) copied to ``dest``: the recipe builds its wheel there."""
    try:
        names = subprocess.run(["git", "-C", ROOT, "ls-files", "-z"], capture_output=True,
                               check=True).stdout.split(b"\0")
    except (OSError, subprocess.CalledProcessError):
        shutil.copytree(ROOT, dest, ignore=shutil.ignore_patterns(
            ".git", ".venv", "var", "build", "dist", "*.egg-info", "__pycache__", "*.so",
            ".pytest_cache"))
        return dest
    for name in filter(None, (n.decode() for n in names)):
        src = os.path.join(ROOT, name)
        if os.path.isfile(src):
            os.makedirs(os.path.dirname(os.path.join(dest, name)), exist_ok=True)
            shutil.copy2(src, os.path.join(dest, name))
    return dest


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_cluster_recipe_runs_as_printed(clean_cluster, tmp_path):
    """docs/spark.md "On a cluster": the wheel, the environment at one path and
    spark-submit, run exactly as printed (paths and the master's port substituted) from a
    copy of the checkout, on a cluster whose processes see neither the suite's venv nor the
    checkout. The job's counts per key land in the log dir, and executors of both workers
    ran it."""
    master, env, work_dirs = clean_cluster
    section = spark_md_section("On a cluster")
    shell, = [b for b in code_blocks(section, "sh") if "spark-submit" in b]
    job, = code_blocks(section, "python")
    logs = str(tmp_path / "logs")
    counts = make_log_dir(logs, partitions=4, keys=5, per_key=50)
    opt = str(tmp_path / "opt-kafkalog")
    for text in ("/opt/kafkalog", "spark://127.0.0.1:7077", "/srv/kafka-logs"):
        assert text in shell, text
    shell = shell.replace("/opt/kafkalog", opt).replace("spark://127.0.0.1:7077", master) \
        .replace("/srv/kafka-logs", logs)
    src = checkout_copy(str(tmp_path / "src"))
    with open(os.path.join(src, "my_job.py"), "w") as f:
        f.write(job)
    r = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", shell], cwd=src, env=env,
                       capture_output=True, text=True, timeout=1100, check=False)
    assert r.returncode == 0, errors_of(r.stderr) + r.stdout[-2000:]
    wheels = os.listdir(os.path.join(src, "dist"))
    assert len(wheels) == 1 and re.fullmatch(r"kafkafs-0\.1\.0-cp\d+-cp\d+-linux_\w+\.whl",
                                             wheels[0]), wheels
    got = dict(read_topic(logs, "orders-per-key"))
    assert got == {k: str(n).encode() for k, n in counts.items()}
    # the executors ran in the workers' own processes
    for wd in work_dirs:
        assert any(os.path.isfile(os.path.join(wd, app, ex, "stderr"))
                   for app in os.listdir(wd) for ex in os.listdir(os.path.join(wd, app))), wd


# -- object storage ------------------------------------------------------------------------
BUCKET = "backups"


@pytest.fixture(scope="module")
def s3_server(tmp_path_factory):
    """moto's S3 server on 127.0.0.1, checking credentials as AWS does (moto's IAM: a
    request signed with a key it did not issue, or with the wrong secret, is refused),
    holding bucket ``backups`` with a log dir uploaded to ``backups/kafka/broker-1``
    (topic ``orders``, 3 partitions). Yields (endpoint ``host:port``, access key id,
    secret, {(partition, offset): value})."""
    pytest.importorskip("moto.server")
    import boto3
    from pyarrow import fs

    base = tmp_path_factory.mktemp("s3")
    port = free_port()
    endpoint = f"127.0.0.1:{port}"
    # the first 3 requests (creating the user, its policy, its key) are let through
    env = dict(os.environ, INITIAL_NO_AUTH_ACTION_COUNT="3")
    with open(base / "moto.log", "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1",
                                 "-p", str(port)], stdout=log, stderr=subprocess.STDOUT,
                                env=env)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("moto's server did not start: "
                                       + (base / "moto.log").read_text(errors="replace"))
                time.sleep(0.2)
        iam = boto3.client("iam", endpoint_url=f"http://{endpoint}", region_name="us-east-1",
                           aws_access_key_id="setup", aws_secret_access_key="setup")
        iam.create_user(UserName="kafkalog")
        iam.put_user_policy(UserName="kafkalog", PolicyName="s3", PolicyDocument=json.dumps(
            {"Version": "2012-10-17",
             "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}))
        key = iam.create_access_key(UserName="kafkalog")["AccessKey"]
        key_id, secret = key["AccessKeyId"], key["SecretAccessKey"]

        def s3(secret_key):
            return fs.S3FileSystem(access_key=key_id, secret_key=secret_key,
                                   region="us-east-1", scheme="http",
                                   endpoint_override=endpoint, allow_bucket_creation=True)

        logs = str(base / "logs")
        make_log_dir(logs, partitions=3, keys=2, per_key=5)
        expected = {}
        m = LogManager(BrokerConfig.from_properties({}).with_log_dirs([logs]), read_only=True)
        m.startup()
        for p in m.partitions("orders"):
            for r in m.get_log("orders", p).records():
                expected[(p, r.offset)] = r.value.decode()
        m.shutdown()
        s3(secret).create_dir(BUCKET)
        fs.copy_files(logs, f"{BUCKET}/kafka/broker-1",
                      source_filesystem=fs.LocalFileSystem(),
                      destination_filesystem=s3(secret))
        with pytest.raises(OSError, match="ACCESS_DENIED"):  # the server checks
            s3("not-the-secret").get_file_info(f"{BUCKET}/kafka/broker-1/orders-0")
        yield endpoint, key_id, secret, expected
    finally:
        proc.terminate()
        proc.wait(10)


S3_JOB = """
import json, sys
from pyspark.sql import SparkSession
import kafkafs.spark

uri, conf = sys.argv[1], json.loads(sys.argv[2])
builder = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
for key, value in conf.items():
    builder = builder.config(key, value)
spark = builder.getOrCreate()
kafkafs.spark.register(spark)
df = spark.read.format("kafkalog").option("subscribe", "orders").load(uri)
print(json.dumps(sorted([r.partition, r.offset, r.value.decode()] for r in df.collect())))
"""


@pytest.mark.parametrize("how", ["environment", "uri", "executor-env"])
def test_s3_endpoint_and_credentials_as_documented(s3_server, tmp_path, how):
    """docs/spark.md "Endpoint and credentials", each way a separate Spark application
    reading the uploaded log dir: ``environment`` (AWS_* variables, the endpoint in
    AWS_ENDPOINT_URL), ``uri`` (endpoint_override, scheme and region in the URI; the
    credentials from the environment; an AWS_ENDPOINT_URL pointing elsewhere loses),
    ``executor-env`` (as on a cluster: the variables only in spark.executorEnv.*, none in
    the driver's environment). The server refuses requests without the right credentials,
    so every process that read got them."""
    endpoint, key_id, secret, expected = s3_server
    home = tmp_path / "home"
    home.mkdir()  # no ~/.aws
    env = fresh_shell_env(str(home))
    env["AWS_EC2_METADATA_DISABLED"] = "true"  # no instance profile to look for
    aws = {"AWS_ACCESS_KEY_ID": key_id, "AWS_SECRET_ACCESS_KEY": secret,
           "AWS_DEFAULT_REGION": "us-east-1"}
    uri = f"s3://{BUCKET}/kafka/broker-1"
    conf = {}
    if how == "environment":
        env.update(aws, AWS_ENDPOINT_URL=f"http://{endpoint}")
    elif how == "uri":
        env.update(aws, AWS_ENDPOINT_URL=f"http://127.0.0.1:{free_port()}")  # nobody there
        uri += f"?endpoint_override={endpoint}&scheme=http&region=us-east-1"
    else:
        conf = {f"spark.executorEnv.{k}": v
                for k, v in {**aws, "AWS_ENDPOINT_URL": f"http://{endpoint}"}.items()}
    script = tmp_path / "job.py"
    script.write_text(S3_JOB)
    r = subprocess.run([sys.executable, str(script), uri, json.dumps(conf)], env=env,
                       cwd=str(home), capture_output=True, text=True, timeout=600, check=False)
    assert r.returncode == 0, errors_of(r.stderr)
    rows = json.loads(r.stdout.strip().splitlines()[-1])
    assert {(p, o): v for p, o, v in rows} == expected
    assert len(rows) == len(expected) == 30
