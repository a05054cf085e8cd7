"""``kafkafs demo``: run the main job (scripts/main-job.sh) from an installed package."""

from __future__ import annotations

import os
import subprocess

from .common import CliError


def register(sub) -> None:
    d = sub.add_parser("demo", help="run the main job: nginx access log through a mount")
    d.set_defaults(func=run)


def run(args) -> int:
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    script = os.path.join(here, "scripts", "main-job.sh")
    if not os.path.exists(script):
        raise CliError("the demo script ships with the source checkout (scripts/main-job.sh)")
    return subprocess.call([script])
