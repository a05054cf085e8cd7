"""kafkafs's network frontend: Kafka's wire protocol on the storage core (docs/design.md §9).

:class:`~kafkafs.net.server.NetServer` listens (``listeners``), frames and answers requests
through :class:`~kafkafs.net.broker.Broker`, one node leading every partition of the log
dirs the core owns. The requests and responses are decoded and encoded by the schema codec
(:mod:`kafkafs.record.schema`) over the tables generated from Kafka's own message
definitions (:func:`kafkafs.record.tables.protocol`); Fetch answers with byte ranges of the
segment files, sent with ``os.sendfile``.
"""
