"""kafkafs: Apache Kafka's log storage as a filesystem."""

__version__ = "0.1.0"
