"""The kafkalog data source's registration and schema (Spark's Kafka source schema)."""

import pytest

pytestmark = pytest.mark.spark


def test_schema_is_the_kafka_source_schema(spark, tmp_path):
    df = spark.read.format("kafkalog").load(str(tmp_path))
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("key", "binary"), ("value", "binary"), ("topic", "string"), ("partition", "int"),
        ("offset", "bigint"), ("timestamp", "timestamp"), ("timestampType", "int")]
    df = spark.read.format("kafkalog").option("includeHeaders", "true").load(str(tmp_path))
    assert df.schema.fields[-1].name == "headers"
    assert df.schema.fields[-1].dataType.simpleString() == \
        "array<struct<key:string,value:binary>>"
