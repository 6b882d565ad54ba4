#!/bin/bash
# Sends side by side: several server binaries, alternately, each on a fresh embedded store
# (synchronous=FULL), `wrk` posting a short HTML message into one room of one member (with
# SENDERS=32, round-robin from 32 members with fresh client ids, the headroom bench's shape) —
# so two builds are compared within one run of a shared machine (docs/BENCHMARKS.md).
#
#   tests/bench/sends-side-by-side.sh [-c CONCURRENCY] [-r ROUNDS] [-s SECONDS] [--syscalls] BINARY...
#
# Per binary and round: sends/s, p50 and p99 (wrk's), and the server's CPU per send (user and
# total, from /proc/PID/stat over the measured window). With --syscalls, one more window
# under `strace -c` per binary gives system calls per send (strace slows the server, so
# those windows are not timed). Needs wrk (and strace for --syscalls).
set -euo pipefail
. "$(dirname "$0")/send-room.sh"
c=32; rounds=3; secs=5; syscalls=
while [ $# -gt 0 ]; do
  case $1 in
    -c) c=$2; shift 2 ;;
    -r) rounds=$2; shift 2 ;;
    -s) secs=$2; shift 2 ;;
    --syscalls) syscalls=1; shift ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || { echo "usage: $0 [-c N] [-r N] [-s N] [--syscalls] BINARY..." >&2; exit 2; }

cpu() { awk '{print $14, $14 + $15}' /proc/$1/stat; }

# Starts BINARY on a fresh store and seeds alice's room (send-room.sh); sets $pid, $d, $url.
start() {
  d=$(mktemp -d); local port=$((20000 + RANDOM % 20000))
  TABLETALK_DATA_DIR=$d TABLETALK_STORAGE_CONNECTION= TABLETALK_JWT_SECRET=local-development-secret-not-for-production \
  TABLETALK_WRITE_LIMITS=off RUST_LOG=error "$1" serve --port $port --settings none > $d/out 2> $d/err &
  pid=$!
  send_room $port $d
  wrk -t1 -c$c -d2s -s $d/post.lua $url > /dev/null
}

stop() { kill $pid; wait $pid 2>/dev/null || true; rm -rf $d; }

sends() { grep -o '[0-9]* requests in' $1 | awk '{print $1}'; }

for round in $(seq $rounds); do
  for bin in "$@"; do
    start "$bin"
    read -r u0 t0 < <(cpu $pid)
    wrk -t1 -c$c -d${secs}s --latency -s $d/post.lua $url > $d/wrk.txt
    read -r u1 t1 < <(cpu $pid)
    n=$(sends $d/wrk.txt)
    python3 - "$bin" $round $c $n $u0 $t0 $u1 $t1 "$(grep Requests/sec $d/wrk.txt | awk '{print $2}')" \
      "$(grep ' 50%' $d/wrk.txt | awk '{print $2}')" "$(grep ' 99%' $d/wrk.txt | awk '{print $2}')" <<'PY'
import sys, os
bin, rnd, c, n, u0, t0, u1, t1, rps, p50, p99 = sys.argv[1:]
tick = 1000 / os.sysconf('SC_CLK_TCK')
n = int(n)
print(f"{bin} round {rnd} c={c}: {float(rps):.0f} sends/s, p50 {p50}, p99 {p99}, "
      f"server CPU {(float(t1) - float(t0)) * tick / n:.3f} ms/send (user {(float(u1) - float(u0)) * tick / n:.3f})")
PY
    stop
  done
done

if [ -n "$syscalls" ]; then
  for bin in "$@"; do
    start "$bin"
    strace -f -c -e trace=fsync,futex,pwrite64,pread64,fcntl,openat,getrandom -p $pid -o $d/strace.txt &
    sp=$!; sleep 0.5
    wrk -t1 -c$c -d3s -s $d/post.lua $url > $d/wrk.txt
    kill -INT $sp; wait $sp 2>/dev/null || true
    n=$(sends $d/wrk.txt)
    echo -n "$bin c=$c system calls per send:"
    awk -v n=$n '$NF ~ /^(fsync|futex|pwrite64|pread64|fcntl|openat|getrandom)$/ {printf " %s %.2f", $NF, $4 / n}' $d/strace.txt
    echo
    stop
  done
fi
