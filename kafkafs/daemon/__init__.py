"""The trio daemon behind a mount: tasks, adoption of external changes, systemd, signals."""
