#!/usr/bin/env bash
# Model distribution in network namespaces with shaped links (issue #25 item 3;
# numbers in docs/benchmarks.md "Model distribution", decision in docs/models.md
# "Sources"). Needs root, iproute2, tc, nginx-light, aria2, deno.
#
#   bench/peer_transfer.sh SIZE_MIB RATE_MBIT CASE [HOSTS]
#
# Every host (namespace h0 … hN) has one link to a bridge, shaped to RATE in
# each direction (tbf on both ends of its veth). h0 is the origin. CASE:
#   aria2      h1 fetches the file from h0's nginx with aria2c -x8 (sha-256 checked)
#   aria2x2    h1 fetches from nginx on h0 and h2 at once (aria2's multi-source)
#   peer       h1 fetches through llmgw's model cache from h0's peer route (mTLS)
#   chain      h1 … hHOSTS fetch at once, each from the one before (pipelined)
#   naive      h1 … hHOSTS fetch at once, all from h0
#   torrent    h0 seeds with aria2's BitTorrent, h1 … hHOSTS leech at once and
#              seed on (tracker and .torrent: bench/peer_transfer_torrent.ts)
# Prints one line per host with its seconds, then the bytes h0 sent.
set -euo pipefail
SIZE_MIB=${1:?size in MiB}
RATE=${2:?rate in Mbit/s}
CASE=${3:?case}
HOSTS=${4:-1}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=/tmp/llmgw_peer_bench
P=pb$$
SW=${P}sw
LAST=$HOSTS
[ "$CASE" = aria2x2 ] && LAST=2
PIDS=()

cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  for i in $(seq 0 "$LAST"); do ip netns del "${P}h$i" 2>/dev/null || true; done
  ip netns del "$SW" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

rm -rf "$WORK" && mkdir -p "$WORK"
ip netns add "$SW"
ip -n "$SW" link add br0 type bridge
ip -n "$SW" link set br0 up
for i in $(seq 0 "$LAST"); do
  ns="${P}h$i"
  ip netns add "$ns"
  ip link add "${P}v$i" type veth peer name eth0 netns "$ns"
  ip link set "${P}v$i" netns "$SW"
  ip -n "$SW" link set "${P}v$i" master br0 up
  ip -n "$ns" addr add "10.0.0.$((i + 1))/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
  # The host's upload, then its download (the switch's side sends to it).
  tc -n "$ns" qdisc add dev eth0 root tbf rate "${RATE}mbit" burst 256kb latency 50ms
  tc -n "$SW" qdisc add dev "${P}v$i" root tbf rate "${RATE}mbit" burst 256kb latency 50ms
done

head -c "$((SIZE_MIB * 1024 * 1024))" /dev/urandom > "$WORK/model.bin"
SHA=$(sha256sum "$WORK/model.bin" | cut -d' ' -f1)
SIZE=$(stat -c %s "$WORK/model.bin")
cat > "$WORK/snapshot.json" <<EOF
{"repo":"bench/model","commit":"$(printf '%040d' 1)","files":[{"path":"model.safetensors","size":$SIZE,"blobId":"$(printf '%040d' 2)","sha256":"$SHA"}]}
EOF
DENO="deno run -A --quiet $ROOT/bench/peer_transfer.ts"
names=""
for i in $(seq 0 "$LAST"); do names="$names h$i"; done
# shellcheck disable=SC2086
$DENO pki "$WORK" $names
tx() { ip netns exec "${P}h0" cat /sys/class/net/eth0/statistics/tx_bytes; }

nginx_on() { # namespace, dir
  cat > "$2/nginx.conf" <<EOF
daemon off; pid $2/nginx.pid; error_log $2/error.log; worker_processes 1;
events {} http { access_log off; sendfile on; server { listen 8080; root $2; } }
EOF
  ip netns exec "$1" nginx -c "$2/nginx.conf" -e "$2/error.log" &
  PIDS+=($!)
}
wait_port() { # namespace, port
  for _ in $(seq 1 100); do
    ip netns exec "$1" bash -c "echo > /dev/tcp/127.0.0.1/$2" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "port $2 in $1 never opened" >&2
  exit 1
}

BEFORE=$(tx)
case "$CASE" in
aria2 | aria2x2)
  mkdir -p "$WORK/o0" && cp "$WORK/model.bin" "$WORK/o0/"
  nginx_on "${P}h0" "$WORK/o0"
  wait_port "${P}h0" 8080
  urls="http://10.0.0.1:8080/model.bin"
  if [ "$CASE" = aria2x2 ]; then
    mkdir -p "$WORK/o2" && cp "$WORK/model.bin" "$WORK/o2/"
    nginx_on "${P}h2" "$WORK/o2"
    wait_port "${P}h2" 8080
    urls="$urls http://10.0.0.3:8080/model.bin"
  fi
  mkdir -p "$WORK/c1"
  start=$(date +%s.%N)
  # shellcheck disable=SC2086
  ip netns exec "${P}h1" aria2c -q -d "$WORK/c1" -o model.bin -x8 -s8 -k16M \
    --file-allocation=none --checksum="sha-256=$SHA" $urls
  echo "{\"host\":\"h1\",\"seconds\":$(awk "BEGIN{printf \"%.2f\", $(date +%s.%N) - $start}")}"
  ;;
peer | chain | naive)
  ip netns exec "${P}h0" $DENO serve "$WORK" h0 "$WORK/cache0" "$WORK/model.bin" &
  PIDS+=($!)
  wait_port "${P}h0" 7443
  BEFORE=$(tx)
  fetchers=()
  for i in $(seq 1 "$HOSTS"); do
    from=1
    [ "$CASE" = chain ] && from=$i
    url="https://10.0.0.$from:7443"
    ip netns exec "${P}h$i" $DENO fetch "$WORK" "h$i" "$WORK/cache$i" "$WORK/snapshot.json" \
      "$url" --serve &
    fetchers+=($!)
    PIDS+=($!)
  done
  for _ in $(seq 1 36000); do
    [ "$(ls "$WORK"/done_h* 2>/dev/null | wc -l)" -ge "$HOSTS" ] && break
    sleep 0.1
  done
  cat "$WORK"/done_h*
  touch "$WORK/stop"
  for pid in "${fetchers[@]}"; do wait "$pid"; done
  ;;
torrent)
  T="deno run -A --quiet $ROOT/bench/peer_transfer_torrent.ts"
  mkdir -p "$WORK/c0" && cp "$WORK/model.bin" "$WORK/c0/"
  $T torrent "$WORK/model.bin" "http://10.0.0.1:6969/announce" "$WORK/model.torrent"
  ip netns exec "${P}h0" $T tracker 6969 &
  PIDS+=($!)
  wait_port "${P}h0" 6969
  # A host's completion: aria2 runs this with (GID, files, path) once every piece is checked.
  printf '#!/bin/sh\ndate +%%s.%%N > "$(dirname "$3").done"\n' > "$WORK/on_done.sh"
  chmod +x "$WORK/on_done.sh"
  # No DHT, no local discovery: peers come from the tracker only (and PEX among them).
  BT="aria2c -q --enable-dht=false --bt-enable-lpd=false --bt-tracker-interval=2 \
    --file-allocation=none --seed-ratio=0.0 --listen-port=6881 --bt-max-peers=55"
  # The origin holds the file already (as serve's origin does): seed it unhashed.
  ip netns exec "${P}h0" $BT -d "$WORK/c0" --bt-seed-unverified=true "$WORK/model.torrent" &
  PIDS+=($!)
  wait_port "${P}h0" 6881
  BEFORE=$(tx)
  start=$(date +%s.%N)
  for i in $(seq 1 "$HOSTS"); do
    mkdir -p "$WORK/c$i"
    ip netns exec "${P}h$i" $BT -d "$WORK/c$i" --on-bt-download-complete="$WORK/on_done.sh" \
      "$WORK/model.torrent" &
    PIDS+=($!)
  done
  for _ in $(seq 1 36000); do
    [ "$(ls "$WORK"/c*.done 2>/dev/null | wc -l)" -ge "$HOSTS" ] && break
    sleep 0.1
  done
  for i in $(seq 1 "$HOSTS"); do
    [ -f "$WORK/c$i.done" ] || { echo "h$i never completed" >&2; exit 1; }
    echo "{\"host\":\"h$i\",\"seconds\":$(awk "BEGIN{printf \"%.2f\", $(cat "$WORK/c$i.done") - $start}")}"
  done
  # BitTorrent checks SHA-1 per piece; the SHA-256 here is outside the timed part.
  for i in $(seq 1 "$HOSTS"); do
    [ "$(sha256sum "$WORK/c$i/model.bin" | cut -d' ' -f1)" = "$SHA" ] || { echo "h$i: sha-256 mismatch" >&2; exit 1; }
  done
  ;;
*)
  echo "unknown case $CASE" >&2
  exit 2
  ;;
esac
echo "{\"origin_bytes\":$(($(tx) - BEFORE)),\"model_bytes\":$SIZE}"
