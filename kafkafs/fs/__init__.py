"""FUSE layer: the mounted tree over the log engine; the only place errno lives."""
