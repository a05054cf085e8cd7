"""The flights pipeline on a Spark standalone cluster (issue 12 item 5): a master and two
workers started with the pyspark package's own ``bin/spark-class`` on this machine,
executors in their own processes, and ``kafkafs pipeline flights --master spark://...``
unchanged: its figures equal pandas' and both workers ran executors of it."""

from __future__ import annotations

import glob
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from conftest import ROOT
from test_spark_pipeline import MARCH, OCTOBER, topic_records

from kafkafs.spark import flights

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def alive_workers(ui_port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as r:
            state = json.load(r)
    except OSError:
        return 0
    return sum(w.get("state") == "ALIVE" for w in state.get("workers", []))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    import pyspark

    home = os.path.dirname(pyspark.__file__)
    spark_class = os.path.join(home, "bin", "spark-class")
    base = tmp_path_factory.mktemp("cluster")
    env = dict(os.environ, SPARK_HOME=home, PYSPARK_PYTHON=sys.executable,
               PYSPARK_DRIVER_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    port, ui = free_port(), free_port()
    procs = []

    def start(name, *args):
        with open(base / f"{name}.log", "wb") as log:  # the child keeps its own descriptor
            procs.append(subprocess.Popen([spark_class, *args], env=env, stdout=log,
                                          stderr=subprocess.STDOUT))

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
        yield f"spark://127.0.0.1:{port}", work_dirs
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()


def test_the_pipeline_runs_unchanged_on_a_standalone_cluster(cluster, tmp_path):
    master, work_dirs = cluster
    log_dir = str(tmp_path / "logs")
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    r = subprocess.run([sys.executable, "-m", "kafkafs", "pipeline", "flights",
                        "--log-dirs", log_dir, "--master", master,
                        "--from", "2013-03-01", "--to", "2013-10-01"],
                       capture_output=True, cwd=ROOT, env=env, timeout=900, check=False)
    assert r.returncode == 0, r.stderr.decode()[-4000:]
    want = flights.pandas_stats(MARCH, OCTOBER)
    assert r.stdout == dict(want)[b"UA"] + b"\n"
    assert sorted((k, v) for _p, k, v in topic_records(log_dir, flights.RESULTS_TOPIC)) \
        == sorted(want)
    # executors ran in the workers' own processes: each worker has an executor dir of it
    for wd in work_dirs:
        assert glob.glob(os.path.join(wd, "app-*", "*", "stderr")), wd
