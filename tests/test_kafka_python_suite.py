"""kafka-python's own integration suite against ``kafkafs serve``.

``tests/vendor/kafka-python-3.0.11`` holds ``test/integration``, ``test/service.py`` and
``test/testutil.py`` of dpkp/kafka-python at tag 3.0.11 (Apache-2.0, its LICENSE beside
them; the tests are byte-identical to those of the 3.0.12 sdist, which lacks
``test/service.py``): ``git archive 3.0.11 LICENSE test/__init__.py test/testutil.py
test/service.py test/integration``. The suite runs unchanged in a child pytest with
``KAFKA_URI`` pointing at the daemon, which runs with the settings of the suite's own broker
template (``servers/resources/default/kafka.properties``: 4 partitions per topic, 2
``__consumer_offsets`` partitions, ``group.min.session.timeout.ms=1000``, no initial
rebalance delay). Every test must pass except those of :data:`NOT_SERVED`, which must fail
(a test listed there that passes is a change to record here); the SASL tests skip
themselves against an external broker and the SSL ones start a broker of their own (left
out).
"""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from netutil import Server

SUITE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "vendor",
                     "kafka-python-3.0.11")

#: test id -> why kafkafs cannot pass it
NOT_SERVED = {
    "test_admin_integration.py::test_create_describe_delete_acls":
        "ACLs need an authorizer; kafkafs has none (CreateAcls/DescribeAcls not served)",
    "test_admin_integration.py::test_describe_metadata_quorum":
        "DescribeQuorum describes a KRaft quorum; kafkafs is no controller",
}

BROKER_TEMPLATE = """\
num.partitions=4
log.cleaner.enable=false
offsets.topic.num.partitions=2
offsets.commit.timeout.ms=500
group.min.session.timeout.ms=1000
group.initial.rebalance.delay.ms=0
"""


@pytest.mark.slow
def test_kafka_python_integration_suite(tmp_path):
    pytest.importorskip("pytest_timeout")
    pytest.importorskip("pytest_mock")
    props = tmp_path / "server.properties"
    props.write_text(BROKER_TEMPLATE)
    logs = tmp_path / "logs"
    logs.mkdir()
    server = Server(logs, config=str(props)).start()
    report = tmp_path / "report.xml"
    try:
        env = dict(os.environ, KAFKA_VERSION="4.1.1", KAFKA_URI=f"tcp://{server.bootstrap}",
                   KAFKA_ROOT=str(tmp_path))
        run = subprocess.run(
            [sys.executable, "-m", "pytest", "-c", os.devnull, "--rootdir", SUITE,
             "test/integration", "--ignore=test/integration/test_ssl_integration.py",
             "-p", "no:cacheprovider", "--timeout=120", "--timeout-method=thread", "-q",
             f"--junitxml={report}"], cwd=SUITE, env=env, capture_output=True, timeout=1200)
    finally:
        rc = server.stop()
    outcomes = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        name = f"{case.get('classname').rsplit('.', 1)[-1]}.py::{case.get('name')}"
        kind = "passed"
        for child in case:
            if child.tag in ("failure", "error"):
                kind = "failed"
            elif child.tag == "skipped":
                kind = "skipped"
        outcomes[name] = kind
    tail = run.stdout.decode(errors="replace")[-3000:]
    assert len(outcomes) >= 60, tail
    unexpected = {n: k for n, k in outcomes.items()
                  if k == "failed" and n not in NOT_SERVED}
    assert not unexpected, f"{unexpected}\n{tail}"
    for name in NOT_SERVED:
        assert outcomes.get(name) == "failed", f"{name} now {outcomes.get(name)}: update NOT_SERVED"
    passed = [n for n, k in outcomes.items() if k == "passed"]
    assert len(passed) >= 51, tail
    skipped = sorted(n for n, k in outcomes.items() if k == "skipped")
    assert all("sasl" in n or "offsets_for_time_old" in n for n in skipped), skipped
    assert rc == 0, server.log()[-3000:]
