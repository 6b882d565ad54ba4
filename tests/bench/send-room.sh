# Sourced by the shell benches: `send_room PORT DIR` waits for a server on PORT, signs alice in
# (the development sign-in), creates her room, writes DIR/post.lua (wrk posting a short HTML
# message, the headroom bench's) and sets `url` to the room's messages.
#
# With SENDERS=N (N > 1) the room gets N members and the sends go round-robin over them, each
# with a fresh client id — the headroom bench's shape, where no member row is raced by every
# send at once. Without it alice sends everything (the throughput bench's one busy user).
send_room() {
  local port=$1 dir=$2 base=http://127.0.0.1:$1 room tokens="" k t
  for _ in $(seq 100); do curl -s -o /dev/null $base/ && break; sleep 0.5; done
  room=$(curl -s -X POST -H "authorization: Bearer $(dev_token $base alice)" -H 'content-type: application/json' \
    -d '{"name":"bench","visibility":"public"}' $base/api/rooms |
    python3 -c 'import json,sys;print(json.load(sys.stdin)["id"])')
  url=$base/api/rooms/$room/messages
  if [ "${SENDERS:-1}" -le 1 ]; then
    cat > $dir/post.lua <<LUA
wrk.method = "POST"
wrk.headers["authorization"] = "Bearer $(dev_token $base alice)"
wrk.headers["content-type"] = "application/json"
wrk.body = '{"text":"<p>hello, this is a benchmark message</p>"}'
LUA
    return
  fi
  for k in $(seq 0 $((SENDERS - 1))); do
    t=$(dev_token $base sender$k)
    curl -s -o /dev/null -X POST -H "authorization: Bearer $t" $base/api/rooms/$room/join
    tokens="$tokens\"$t\","
  done
  cat > $dir/post.lua <<LUA
local tokens = {$tokens}
local n = 0
-- Unique per wrk run (a warm-up's client ids would make the next run's sends repeats).
math.randomseed(os.time())
local run = os.time() .. "-" .. math.random(1, 1000000000)
request = function()
  n = n + 1
  local body = '{"text":"<p>hello, this is benchmark message ' .. n .. '</p>","clientId":"' .. run .. '-' .. n .. '"}'
  return wrk.format("POST", nil, {["authorization"] = "Bearer " .. tokens[(n % #tokens) + 1],
    ["content-type"] = "application/json"}, body)
end
LUA
}

# A token of the development sign-in for user $2 on the server at $1.
dev_token() {
  curl -s -X POST -H 'content-type: application/json' -d "{\"userId\":\"$2\"}" $1/api/dev/signin |
    python3 -c 'import json,sys;print(json.load(sys.stdin)["token"])'
}
