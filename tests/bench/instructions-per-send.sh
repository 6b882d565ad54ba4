#!/bin/bash
# Instructions per send: the server's user-space instructions (valgrind's callgrind) over a
# window of `wrk` sends, divided by the sends — the CPU figure that holds still on a shared
# machine, where wall-clock figures swing by 2x from minute to minute (docs/BENCHMARKS.md).
#
#   tests/bench/instructions-per-send.sh target/release/tabletalk [seconds]   # default 10
#
# A fresh embedded store, the development sign-in, one room of one member, a 3 s warm-up,
# then `wrk -t1 -c8` posting a short HTML message (the headroom bench's) with the
# instrumentation on. Needs valgrind and wrk. KEEP=FILE keeps the callgrind profile.
set -euo pipefail
. "$(dirname "$0")/send-room.sh"
bin=$1; secs=${2:-10}
d=$(mktemp -d); port=$((20000 + RANDOM % 20000))
TABLETALK_DATA_DIR=$d TABLETALK_STORAGE_CONNECTION= TABLETALK_JWT_SECRET=local-development-secret-not-for-production \
TABLETALK_WRITE_LIMITS=off RUST_LOG=error \
  valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file=$d/cg.out "$bin" serve --port $port --settings none > $d/out 2> $d/err &
vg=$!
send_room $port $d
wrk -t1 -c8 -d3s -s $d/post.lua $url > /dev/null
callgrind_control -i on $vg > /dev/null
wrk -t1 -c8 -d${secs}s -s $d/post.lua $url > $d/wrk.txt
callgrind_control -i off $vg > /dev/null
n=$(grep -o '[0-9]* requests in' $d/wrk.txt | awk '{print $1}')
non2xx=$(grep -o 'Non-2xx or 3xx responses: [0-9]*' $d/wrk.txt || true)
callgrind_control -d $vg > /dev/null; sleep 1
kill $vg; wait $vg 2>/dev/null || true
f=$(ls $d/cg.out.* | head -1)
callgrind_annotate $f > $d/ann.txt 2>/dev/null; ir=$(grep -m1 "PROGRAM TOTALS" $d/ann.txt | awk "{print \$1}" | tr -d ,)
echo "requests=$n $non2xx Ir=$ir Ir/send=$((ir / n))"
[ -n "${KEEP:-}" ] && cp $f ${KEEP} || true
rm -rf $d
