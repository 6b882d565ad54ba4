#!/bin/bash
# The HTTP floor: the server's CPU for a request that does nothing — a GET of an unknown path,
# answered 404 by the whole middleware stack — beside a send's (docs/BENCHMARKS.md).
#
#   tests/bench/request-floor.sh target/release/tabletalk [concurrency] [seconds]   # 32, 5
#
# A fresh embedded store, a 2 s warm-up, then `wrk`; CPU (user and system) from
# /proc/PID/stat over the measured window. Needs wrk.
set -euo pipefail
bin=$1; c=${2:-32}; secs=${3:-5}
d=$(mktemp -d); port=$((20000 + RANDOM % 20000)); url=http://127.0.0.1:$port/api/no-such-function
TABLETALK_DATA_DIR=$d TABLETALK_STORAGE_CONNECTION= TABLETALK_JWT_SECRET=local-development-secret-not-for-production \
RUST_LOG=error "$bin" serve --port $port --settings none > $d/out 2> $d/err &
pid=$!
trap 'kill $pid 2>/dev/null || true; rm -rf $d' EXIT
for _ in $(seq 100); do curl -s -o /dev/null $url && break; sleep 0.3; done
[ "$(curl -s -o /dev/null -w '%{http_code}' $url)" = 404 ] || { echo "expected a 404 from $url" >&2; exit 1; }
wrk -t1 -c$c -d2s $url > /dev/null
cpu() { awk '{print $14, $15}' /proc/$pid/stat; }
read -r u0 s0 < <(cpu)
wrk -t1 -c$c -d${secs}s $url > $d/wrk.txt
read -r u1 s1 < <(cpu)
n=$(grep -o '[0-9]* requests in' $d/wrk.txt | awk '{print $1}')
python3 -c "
import os
n, ms = $n, 1000 / os.sysconf('SC_CLK_TCK') / $n
print(f'c=$c: {n} requests, {n / $secs:.0f}/s; server CPU {($u1 - $u0 + $s1 - $s0) * ms:.4f} ms a request (user {($u1 - $u0) * ms:.4f}, system {($s1 - $s0) * ms:.4f})')"
