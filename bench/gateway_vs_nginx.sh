#!/usr/bin/env bash
# Gateway overhead against the same upstream, in one run (design §16): wrk drives
# (a) the fake engine directly, (b) llmgw's gateway, (c) nginx as a plain
# reverse proxy, (d) the Deno floor: the thinnest Deno proxies
# (bench/proxy_variants.ts: `fetch` with the body handed over natively, and the
# gateway's own upstream client and relay without routing, keys or metrics),
# with non-streaming and streaming chat completions at several concurrency
# levels. Needs nginx and wrk (Debian: apt-get install nginx-light wrk).
# Usage: bash bench/gateway_vs_nginx.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-5}
command -v nginx >/dev/null && command -v wrk >/dev/null || {
  echo "needs nginx and wrk: apt-get install nginx-light wrk" >&2; exit 2; }
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -- -"$p" 2>/dev/null || kill "$p" 2>/dev/null || true; done
  [ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
ENGINE=19301 GATEWAY=19302 NGINX=19303
# A second set for added latency alone: an upstream that answers at once.
INSTANT=19311 GATEWAY_I=19312 NGINX_I=19313
# The Deno floor, in front of each upstream.
NATIVE=19304 RELAY=19305 NATIVE_I=19314 RELAY_I=19315

# The upstream: the fake engine, fast (no load time, 1 token, no delay).
FAKE_ENGINE_LOAD_SECONDS=0 FAKE_ENGINE_TOKENS=4 FAKE_ENGINE_TOKEN_DELAY_MS=0 FAKE_ENGINE_ACCESS_LOG=0 \
  setsid dev/fake_engine/bin/vllm serve org/bench --served-model-name bench --host 127.0.0.1 --port $ENGINE \
  --tensor-parallel-size 1 --pipeline-parallel-size 1 --max-num-seqs 100000 >"$work/engine.log" 2>&1 &
pids+=($!)
# The gateway, fed a fixed endpoint table (no control plane in the loop).
setsid deno run -A bench/gateway_fixed.ts $GATEWAY "http://127.0.0.1:$ENGINE" >"$work/gateway.log" 2>&1 &
pids+=($!)
setsid deno run -A bench/instant_upstream.ts $INSTANT >"$work/instant.log" 2>&1 &
pids+=($!)
setsid deno run -A bench/gateway_fixed.ts $GATEWAY_I "http://127.0.0.1:$INSTANT" >"$work/gateway_i.log" 2>&1 &
pids+=($!)
floor() { # MODE PORT UPSTREAM_PORT
  setsid deno run -A bench/proxy_variants.ts "$1" "$2" "http://127.0.0.1:$3" >"$work/$1-$2.log" 2>&1 &
  pids+=($!)
}
floor fetch-native $NATIVE $ENGINE
floor own-relay $RELAY $ENGINE
floor fetch-native $NATIVE_I $INSTANT
floor own-relay $RELAY_I $INSTANT
cat >"$work/nginx.conf" <<CONF
worker_processes 1;
pid $work/nginx.pid;
error_log $work/nginx-error.log;
events { worker_connections 4096; }
http {
  access_log off;
  upstream engine { server 127.0.0.1:$ENGINE; keepalive 64; }
  upstream instant { server 127.0.0.1:$INSTANT; keepalive 64; }
  server {
    listen 127.0.0.1:$NGINX;
    location / {
      proxy_pass http://engine;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
    }
  }
  server {
    listen 127.0.0.1:$NGINX_I;
    location / {
      proxy_pass http://instant;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
    }
  }
}
CONF
nginx -c "$work/nginx.conf" -p "$work"
# Ready once it answers at all (the bare proxies know no GET route).
for port in $ENGINE $GATEWAY $NGINX $INSTANT $GATEWAY_I $NGINX_I $NATIVE $RELAY $NATIVE_I $RELAY_I; do
  for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$port/v1/models" && break; sleep 0.1; done
done

cat >"$work/post.lua" <<'LUA'
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = os.getenv("BODY")
LUA
plain='{"model":"bench","messages":[{"role":"user","content":"hi"}],"max_tokens":4}'
stream='{"model":"bench","messages":[{"role":"user","content":"hi"}],"max_tokens":4,"stream":true}'
measure() { # KIND CONCURRENCY NAME PORT
  local out
  # A 2 s warm-up first, for every target alike: a JIT and a heap that have
  # not yet seen 64 clients otherwise decide the cell.
  BODY="${!1}" wrk -t1 -c$2 -d2s -s "$work/post.lua" "http://127.0.0.1:$4/v1/chat/completions" >/dev/null 2>&1
  out=$(BODY="${!1}" wrk -t1 -c$2 -d${SECS}s --latency -s "$work/post.lua" \
    "http://127.0.0.1:$4/v1/chat/completions" 2>&1)
  echo "| $1 | $2 | $3 | $(echo "$out" | awk '/Requests\/sec/ {print $2}') |" \
    "$(echo "$out" | awk '$1=="50%" {print $2}') | $(echo "$out" | awk '$1=="99%" {print $2}') |"
}
echo "Fake engine (4 tokens):"
echo "| request | concurrency | target | req/s | p50 | p99 |"
echo "| --- | --- | --- | --- | --- | --- |"
for kind in plain stream; do
  for c in 1 16 64; do
    measure $kind $c engine $ENGINE; measure $kind $c gateway $GATEWAY; measure $kind $c nginx $NGINX
    measure $kind $c deno-fetch-native $NATIVE; measure $kind $c deno-own-relay $RELAY
  done
done
echo
echo "Instant upstream (added latency alone):"
echo "| request | concurrency | target | req/s | p50 | p99 |"
echo "| --- | --- | --- | --- | --- | --- |"
for kind in plain stream; do
  measure $kind 1 upstream $INSTANT; measure $kind 1 gateway $GATEWAY_I; measure $kind 1 nginx $NGINX_I
  measure $kind 1 deno-fetch-native $NATIVE_I; measure $kind 1 deno-own-relay $RELAY_I
done
