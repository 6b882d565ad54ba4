#!/bin/bash
# Sends per group commit: how many sends one fsync of the embedded store carries, counted with
# perf's system-call tracepoints (which, unlike strace, barely slow the server), beside the
# server's CPU a send and the store's page writes and reads a send. The raw store's own CPU a
# send depends on that group size (the headroom bench measures it at 1, 4 and 32 sends a
# transaction; docs/BENCHMARKS.md). A WAL checkpoint adds fsyncs of its own, so the figure is
# a lower bound on the sends of a group commit.
#
#   tests/bench/sends-per-fsync.sh target/release/tabletalk [concurrency] [seconds]   # 32, 5
#
# A fresh embedded store (synchronous=FULL), the headroom bench's shape (SENDERS=32 of
# send-room.sh: 32 members round-robin, fresh client ids), a 2 s warm-up, then `wrk` run by
# `perf stat` so that exactly its window is counted. Needs wrk and perf (Debian's linux-perf),
# run as root (the tracepoints are read through tracefs).
set -euo pipefail
. "$(dirname "$0")/send-room.sh"
bin=$1; c=${2:-32}; secs=${3:-5}
d=$(mktemp -d); port=$((20000 + RANDOM % 20000))
TABLETALK_DATA_DIR=$d TABLETALK_STORAGE_CONNECTION= TABLETALK_JWT_SECRET=local-development-secret-not-for-production \
TABLETALK_WRITE_LIMITS=off RUST_LOG=error "$bin" serve --port $port --settings none > $d/out 2> $d/err &
pid=$!
trap 'kill $pid 2>/dev/null || true; rm -rf $d' EXIT
SENDERS=32 send_room $port $d
wrk -t1 -c$c -d2s -s $d/post.lua $url > /dev/null
cpu() { awk '{print $14, $15}' /proc/$pid/stat; }
read -r u0 s0 < <(cpu)
perf stat -x, -e syscalls:sys_enter_fsync,syscalls:sys_enter_fdatasync,syscalls:sys_enter_pwrite64,syscalls:sys_enter_pread64 \
  -p $pid -o $d/perf.txt -- wrk -t1 -c$c -d${secs}s -s $d/post.lua $url > $d/wrk.txt
read -r u1 s1 < <(cpu)
n=$(grep -o '[0-9]* requests in' $d/wrk.txt | awk '{print $1}')
python3 - $c $n $u0 $s0 $u1 $s1 $d/perf.txt <<'PY'
import os, sys
c, n, u0, s0, u1, s1 = (float(a) for a in sys.argv[1:7])
counts = {}
for line in open(sys.argv[7]):
    fields = line.strip().split(',')
    if len(fields) > 2 and fields[2].startswith('syscalls:sys_enter_'):
        if not fields[0].isdigit():
            sys.exit(f"perf counted nothing for {fields[2]}: {fields[0]}")
        counts[fields[2].removeprefix('syscalls:sys_enter_')] = int(fields[0])
if n == 0:
    sys.exit("no sends were made")
ms = 1000 / os.sysconf('SC_CLK_TCK') / n
syncs = counts.get('fsync', 0) + counts.get('fdatasync', 0)
print(f"c={c:.0f}: {n:.0f} sends, {n / max(syncs, 1):.1f} sends per fsync; server CPU {(u1 - u0 + s1 - s0) * ms:.3f} ms a send "
      f"(user {(u1 - u0) * ms:.3f}, system {(s1 - s0) * ms:.3f}); pwrite64 {counts.get('pwrite64', 0) / n:.1f} "
      f"and pread64 {counts.get('pread64', 0) / n:.1f} a send")
PY
