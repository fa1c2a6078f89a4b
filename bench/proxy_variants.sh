#!/usr/bin/env bash
# The minimal proxies of bench/proxy_variants.ts and the gateway in front of
# the same fake engine, streaming chat at 64 clients, two rounds (the first
# warms up). Needs wrk (Debian: apt-get install wrk).
# Usage: bash bench/proxy_variants.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-4}
command -v wrk >/dev/null || { echo "needs wrk: apt-get install wrk" >&2; exit 2; }
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -- -"$p" 2>/dev/null || kill "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
ENGINE=19401
FAKE_ENGINE_LOAD_SECONDS=0 FAKE_ENGINE_TOKENS=4 FAKE_ENGINE_TOKEN_DELAY_MS=0 FAKE_ENGINE_ACCESS_LOG=0 \
  setsid dev/fake_engine/bin/vllm serve org/bench --served-model-name bench --host 127.0.0.1 --port $ENGINE \
  --tensor-parallel-size 1 --pipeline-parallel-size 1 --max-num-seqs 100000 >"$work/engine.log" 2>&1 &
pids+=($!)
targets=("engine:$ENGINE")
port=19410
for mode in fetch-native fetch-relay own-relay; do
  port=$((port + 1))
  setsid deno run -A bench/proxy_variants.ts $mode $port "http://127.0.0.1:$ENGINE" >"$work/$mode.log" 2>&1 &
  pids+=($!)
  targets+=("$mode:$port")
done
port=$((port + 1))
setsid deno run -A bench/gateway_fixed.ts $port "http://127.0.0.1:$ENGINE" >"$work/gateway.log" 2>&1 &
pids+=($!)
targets+=("gateway:$port")
for t in "${targets[@]}"; do
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:${t##*:}/v1/models" >/dev/null && break; sleep 0.1; done
done
cat >"$work/post.lua" <<'LUA'
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"model":"bench","messages":[{"role":"user","content":"hi"}],"max_tokens":4,"stream":true}'
LUA
echo "| round | target | req/s | p50 |"
echo "| --- | --- | --- | --- |"
for round in $(seq ${ROUNDS:-2}); do
  for t in "${targets[@]}"; do
    out=$(wrk -t1 -c64 -d${SECS}s --latency -s "$work/post.lua" \
      "http://127.0.0.1:${t##*:}/v1/chat/completions" 2>&1)
    echo "| $round | ${t%%:*} | $(echo "$out" | awk '/Requests\/sec/ {print $2}') |" \
      "$(echo "$out" | awk '$1=="50%" {print $2}') |"
  done
done
