#!/usr/bin/env bash
# Profiles Temporal's dev server under the saga load, for docs/benchmarks/peers.md ("its profile"):
# starts the server as `bench peers` runs it (WAL + synchronous=FULL), the worker and the front,
# posts N small orders at 40/s (above what it finishes), and after 10 s records
#   - `perf record -g` of the server for 20 s (kernel vs its own code; the binary is stripped),
#   - the server's Prometheus `persistence_*` metrics before and after (calls and latency by
#     operation, printed),
#   - `strace -c -f` of the server for 15 s (syscalls; divide by the sagas finished meanwhile).
# Needs perf, strace and root (or perf_event_paranoid <= 1). Keeps its files in a temporary
# directory, printed at the end.
#
#   N=1200 bench/peers/temporal/profile.sh
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../../.." && pwd)"
VENV="${CARGO_TARGET_DIR:-$ROOT/target}/peers/venv"
[[ -x "$VENV/bin/temporal" ]] || bash "$ROOT/bench/peers/setup.sh" >&2
PY=$VENV/bin/python; TEMPORAL=$VENV/bin/temporal
WORK=$(mktemp -d -t tprof.XXXXXX)
free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
GRPC_PORT=$(free_port) HTTP_API_PORT=$(free_port) METRICS_PORT=$(free_port) FRONT_PORT=$(free_port)
ADDRESS="127.0.0.1:$GRPC_PORT"; URL="http://127.0.0.1:$FRONT_PORT"
"$TEMPORAL" server start-dev --headless --ip 127.0.0.1 --port "$GRPC_PORT" --http-port "$HTTP_API_PORT" \
  --metrics-port "$METRICS_PORT" --db-filename "$WORK/temporal.db" \
  --sqlite-pragma journal_mode=wal --sqlite-pragma synchronous=FULL >>"$WORK/server.log" 2>&1 &
SERVER_PID=$!
trap 'kill $FRONT_PID $WORKER_PID $SERVER_PID 2>/dev/null || true' EXIT
for i in $(seq 150); do "$TEMPORAL" operator cluster health --address "$ADDRESS" >/dev/null 2>&1 && break; sleep 0.2; done
export PEER_DB="$WORK/peer.db" TEMPORAL_ADDRESS="$ADDRESS" TASK_QUEUE=orders APPROVAL_THRESHOLD_CENTS=100000 PORT="$FRONT_PORT"
(cd "$HERE" && exec "$PY" worker.py) >>"$WORK/worker.log" 2>&1 & WORKER_PID=$!
(cd "$HERE" && exec "$PY" front.py) >>"$WORK/front.log" 2>&1 & FRONT_PID=$!
for i in $(seq 150); do curl -sf "$URL/stats" >/dev/null 2>&1 && break; sleep 0.2; done
N=${N:-1200}
(cd "$HERE" && exec "$PY" smoke_check.py post "$URL" prof "$N" 40) > "$WORK/post.log" 2>&1 & POST_PID=$!
sleep 10
curl -s "http://127.0.0.1:$METRICS_PORT/metrics" > "$WORK/metrics.before"
S0=$(date +%s.%N)
done0=$(cd "$HERE" && "$PY" smoke_check.py done-count "$URL")
perf record -F 499 -g -p "$SERVER_PID" -o "$WORK/perf.data" -- sleep 20 2> "$WORK/perf.err"
done1=$(cd "$HERE" && "$PY" smoke_check.py done-count "$URL")
S1=$(date +%s.%N)
curl -s "http://127.0.0.1:$METRICS_PORT/metrics" > "$WORK/metrics.after"
timeout 15 strace -c -f -p "$SERVER_PID" -o "$WORK/strace.txt" || true
done2=$(cd "$HERE" && "$PY" smoke_check.py done-count "$URL")
echo "work dir: $WORK"
echo "sagas finished during perf: $((done1 - done0)) in $(echo "$S1 - $S0" | bc) s; during strace (15 s): $((done2 - done1))"
wait $POST_PID || true
"$PY" - "$WORK/metrics.before" "$WORK/metrics.after" <<'PY'
import re, sys
def load(path):
    sums = {}
    for line in open(path):
        m = re.match(r'^persistence_latency_(sum|count)\{(.*)\} (\S+)$', line.strip())
        if m:
            op = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2))).get("operation")
            sums[(m.group(1), op)] = sums.get((m.group(1), op), 0.0) + float(m.group(3))
    return sums
before, after = load(sys.argv[1]), load(sys.argv[2])
ops = {op for _, op in after}
rows = [(op, after.get(("count", op), 0) - before.get(("count", op), 0),
         after.get(("sum", op), 0) - before.get(("sum", op), 0)) for op in ops]
for op, n, total in sorted(rows, key=lambda r: -r[2])[:12]:
    print(f"{op:32s} {n:8.0f} calls {total:8.2f} s {1000 * total / max(n, 1):7.2f} ms each")
PY
perf report -i "$WORK/perf.data" --no-children --sort dso --stdio -g none 2>/dev/null | grep '%' | head -5
head -12 "$WORK/strace.txt"
