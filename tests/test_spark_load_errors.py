"""Bad options are refused at ``load()``, as Spark's Kafka source refuses them
(``KafkaSourceProvider.validateStreamOptions`` / ``validateBatchOptions``), with
``pyspark.errors.IllegalArgumentException`` and Spark's message -- not 2-7 s after
``start()`` by the query thread (issue 20, defect 2)."""

from __future__ import annotations

import os

import pytest
from pyspark.errors import IllegalArgumentException

from kafkafs.log.config import LogConfig
from kafkafs.log.loader import load_log
from kafkafs.spark.loadcheck import option_error_message
from kafkafs.spark.options import OptionError, validate_at_load

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("load-errors"))
    path = os.path.join(root, "t-0")
    os.makedirs(path)
    lg = load_log(path, "t", 0, LogConfig())
    lg.append([(1_700_000_000_000, None, b"v%d" % i, []) for i in range(5)])
    lg.close()
    return root


STREAM_REFUSED = [
    ({"subscribe": "t", "endingOffsets": "latest"},
     "ending offset not valid in streaming queries"),
    ({"subscribe": "t", "endingOffsetsByTimestamp": '{"t": {"0": 1}}'},
     "ending timestamp not valid in streaming queries"),
    ({"subscribe": "t", "subscribePattern": "t.*"},
     ("Only one of the following options can be specified for Kafka source: subscribe, "
      "subscribepattern, assign. See the docs for more details.")),
    ({"subscribe": "t", "maxOffsetsPerTrigger": "0"}, "maxOffsetsPerTrigger must be positive"),
    ({"subscribe": "t", "maxOffsetsPerTrigger": "abc"}, 'For input string: "abc"'),
    ({"subscribe": "t", "maxTriggerDelay": "5 parsecs"}, "Time must be specified as seconds"),
    ({"subscribe": "t", "minOffsetsPerTrigger": "9", "maxOffsetsPerTrigger": "3"},
     "The value of minOffsetPerTrigger(9) is higher than the maxOffsetsPerTrigger(3)."),
    ({"subscribe": "t", "failOnDataLoss": "maybe"}, 'For input string: "maybe"'),
]

BATCH_REFUSED = [
    ({"subscribe": "t", "startingOffsets": "latest"},
     "starting offset can't be latest for batch queries on Kafka"),
    ({"subscribe": "t", "endingOffsets": "earliest"},
     "ending offset can't be earliest for batch queries on Kafka"),
    ({}, "One of the following options must be specified for Kafka source"),
    ({"subscribe": "t", "minPartitions": "0"}, "minPartitions must be positive"),
    ({"subscribe": "t", "kafka.auto.offset.reset": "earliest"},
     "Kafka option 'auto.offset.reset' is not supported."),
]


@pytest.mark.parametrize("options,message", STREAM_REFUSED)
def test_stream_options_refused_at_load(spark, logs, options, message):
    r = spark.readStream.format("kafkalog")
    for k, v in options.items():
        r = r.option(k, v)
    with pytest.raises(IllegalArgumentException) as info:
        r.load(logs)
    assert message in str(info.value)
    assert "Traceback" not in str(info.value) and "PYTHON_DATA_SOURCE_ERROR" not in \
        str(info.value)


@pytest.mark.parametrize("options,message", BATCH_REFUSED)
def test_batch_options_refused_at_load(spark, logs, options, message):
    r = spark.read.format("kafkalog")
    for k, v in options.items():
        r = r.option(k, v)
    with pytest.raises(IllegalArgumentException) as info:
        r.load(logs)
    assert message in str(info.value)


def test_load_path_of_a_format_given_to_load(spark, logs):
    with pytest.raises(IllegalArgumentException, match="ending offset not valid"):
        spark.readStream.load(logs, format="kafkalog", subscribe="t", endingOffsets="latest")


def test_good_options_still_load_and_read(spark, logs, tmp_path):
    # batch options a stream refuses are fine in a batch read, and the other way round
    df = (spark.read.format("kafkalog").option("subscribe", "t")
          .option("endingOffsets", "latest").option("maxOffsetsPerTrigger", "10").load(logs))
    assert df.count() == 5
    q = (spark.readStream.format("kafkalog").option("subscribe", "t")
         .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "2").load(logs)
         .writeStream.format("memory").queryName("load_errors_ok")
         .trigger(availableNow=True).start())
    q.awaitTermination(120)
    assert spark.sql("select count(*) from load_errors_ok").collect()[0][0] == 5


def test_validation_needs_the_query_type():
    # a write, or a reader made without the hooks: nothing is checked at schema()
    validate_at_load({"topic": "x"})
    with pytest.raises(OptionError, match="ending offset not valid"):
        validate_at_load({"path": "/l", "subscribe": "t", "endingOffsets": "latest",
                          "kafkalog.internal.queryType": "streaming"})


def test_option_error_message_from_pyspark_text():
    text = ("[PYTHON_DATA_SOURCE_ERROR] Failed to create Python data source instance: "
            "Traceback (most recent call last):\n  File \"x\", line 1, in schema\n"
            "kafkafs.spark.options.OptionError: \nKafka option 'auto.offset.reset' is not "
            "supported.\nInstead set\n SQLSTATE: 38000")
    assert option_error_message(Exception(text)) == \
        "\nKafka option 'auto.offset.reset' is not supported.\nInstead set"
    assert option_error_message(Exception("other")) is None


def test_registering_does_not_end_a_program_run_with_python_c():
    """``python -c`` (and a program read from stdin) has a ``__main__`` without spec or
    file: importing Spark Connect's readers without grpc then calls ``sys.exit(0)``
    (pyspark.sql.connect.utils.check_dependencies), which silently ended any such program
    right after ``kafkafs.spark.session()``; Connect's readers are wrapped only when a
    Connect session imported them."""
    import subprocess
    import sys

    from conftest import ROOT

    code = ("import kafkafs.spark; spark = kafkafs.spark.session('local[1]', 'dash-c'); "
            "print('alive', spark.range(3).count())")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, cwd=ROOT,
                       timeout=300, check=False)
    assert r.returncode == 0 and b"alive 3" in r.stdout, r.stderr.decode()[-2000:]
