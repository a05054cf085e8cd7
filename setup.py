"""Builds the optional C extension kafkafs.record._speedups (everything else is in
pyproject.toml). The extension is optional: when it does not compile, the install still
succeeds and kafkafs.record.fast uses its pure-Python twins."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("kafkafs.record._speedups", ["kafkafs/record/_speedups.c"],
                             optional=True)])
