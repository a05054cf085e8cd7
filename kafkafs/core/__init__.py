"""The storage core (docs/design.md §8.2): what every frontend of the daemon shares.

:class:`~kafkafs.core.storage.StorageCore` composes the log manager, its background tasks
(:mod:`~kafkafs.core.tasks`, :mod:`~kafkafs.core.watcher`), the key maps, the gate that keeps
appends out of a bulk commit (:mod:`~kafkafs.core.commits`) and the control requests
(:mod:`~kafkafs.core.control`). Frontends (the FUSE mount in :mod:`kafkafs.fs`) are given a
core and never the other way round. This layer imports the log engine and the record codec
only.
"""
