"""Command line: ``kafkafs mount|umount|topics|produce|consume|get-offsets|dump|demo``."""
