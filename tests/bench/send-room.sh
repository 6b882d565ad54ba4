# Sourced by the shell benches: `send_room PORT DIR` waits for a server on PORT, signs alice in
# (the development sign-in), creates her room, writes DIR/post.lua (wrk posting a short HTML
# message, the headroom bench's) and sets `url` to the room's messages.
send_room() {
  local port=$1 dir=$2 tok room
  for _ in $(seq 100); do curl -s -o /dev/null http://127.0.0.1:$port/ && break; sleep 0.5; done
  tok=$(curl -s -X POST -H 'content-type: application/json' -d '{"userId":"alice"}' \
    http://127.0.0.1:$port/api/dev/signin | python3 -c 'import json,sys;print(json.load(sys.stdin)["token"])')
  room=$(curl -s -X POST -H "authorization: Bearer $tok" -H 'content-type: application/json' \
    -d '{"name":"bench","visibility":"public"}' http://127.0.0.1:$port/api/rooms |
    python3 -c 'import json,sys;print(json.load(sys.stdin)["id"])')
  cat > $dir/post.lua <<LUA
wrk.method = "POST"
wrk.headers["authorization"] = "Bearer $tok"
wrk.headers["content-type"] = "application/json"
wrk.body = '{"text":"<p>hello, this is a benchmark message</p>"}'
LUA
  url=http://127.0.0.1:$port/api/rooms/$room/messages
}
