"""The name the ``kafkalog`` data source is registered under (``spark.read.format(...)``).

Its own module, importing nothing, so that :mod:`kafkafs.spark` (which re-exports it),
:mod:`kafkafs.spark.source` and :mod:`kafkafs.spark.loadcheck` share it without the
package's ``__init__`` and those modules importing each other.
"""

SOURCE_NAME = "kafkalog"
