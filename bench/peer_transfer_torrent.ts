/**
 * BitTorrent tooling for the `torrent` case of bench/peer_transfer.sh (numbers
 * in docs/benchmarks.md "Model distribution", weighed in docs/models.md
 * "Sources"). aria2 speaks BitTorrent but has no tracker and no option to name
 * peers, so the bench brings both pieces here:
 *
 * - `torrent FILE ANNOUNCE OUT`: writes a single-file .torrent for FILE (4 MiB
 *   pieces, SHA-1 each, as BEP 3 defines it) announcing to ANNOUNCE;
 * - `tracker PORT`: a minimal HTTP tracker: every announce is remembered
 *   (address as seen, `port` as sent) and answered with the compact list
 *   (BEP 23) of every other peer, asking peers to announce again in 2 s.
 *
 * One torrent per run, so the tracker ignores `info_hash`.
 *
 * @module
 */

const PIECE = 4 * 2 ** 20;

type Bencodable = number | string | Uint8Array | Bencodable[] | { [key: string]: Bencodable };

/** Bencodes a value (BEP 3): dictionary keys sorted by their raw bytes. */
export function bencode(value: Bencodable): Uint8Array<ArrayBuffer> {
  const parts: Uint8Array[] = [];
  const text = (s: string) => parts.push(new TextEncoder().encode(s));
  const bytes = (b: Uint8Array) => {
    text(`${b.length}:`);
    parts.push(b);
  };
  const walk = (v: Bencodable) => {
    if (typeof v === "number") text(`i${Math.trunc(v)}e`);
    else if (typeof v === "string") bytes(new TextEncoder().encode(v));
    else if (v instanceof Uint8Array) bytes(v);
    else if (Array.isArray(v)) {
      text("l");
      v.forEach(walk);
      text("e");
    } else {
      text("d");
      for (const key of Object.keys(v).sort()) {
        walk(key);
        walk(v[key]);
      }
      text("e");
    }
  };
  walk(value);
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

async function makeTorrent(file: string, announce: string, out: string) {
  const { size } = await Deno.stat(file);
  const hashes = new Uint8Array(Math.ceil(size / PIECE) * 20);
  const f = await Deno.open(file);
  try {
    const buf = new Uint8Array(PIECE);
    for (let i = 0; i * PIECE < size; i++) {
      let filled = 0;
      while (filled < PIECE) {
        const n = await f.read(buf.subarray(filled));
        if (n === null) break;
        filled += n;
      }
      const digest = await crypto.subtle.digest("SHA-1", buf.subarray(0, filled));
      hashes.set(new Uint8Array(digest), i * 20);
    }
  } finally {
    f.close();
  }
  const name = file.split("/").pop()!;
  const info = { length: size, name, "piece length": PIECE, pieces: hashes };
  await Deno.writeFile(out, bencode({ announce, info }));
}

function tracker(port: number) {
  const peers = new Map<string, Uint8Array>();
  Deno.serve({ hostname: "0.0.0.0", port, onListen: () => {} }, (req, info) => {
    const url = new URL(req.url);
    const peerPort = Number(url.searchParams.get("port"));
    const addr = info.remoteAddr.hostname;
    const octets = addr.split(".").map(Number);
    if (octets.length !== 4 || !(peerPort > 0 && peerPort < 65536)) {
      return new Response(bencode({ "failure reason": `bad announce from ${addr}` }));
    }
    const self = `${addr}:${peerPort}`;
    if (url.searchParams.get("event") === "stopped") peers.delete(self);
    else peers.set(self, new Uint8Array([...octets, peerPort >> 8, peerPort & 255]));
    const others = [...peers].filter(([k]) => k !== self).map(([, v]) => v);
    const compact = new Uint8Array(others.length * 6);
    others.forEach((p, i) => compact.set(p, i * 6));
    return new Response(bencode({ interval: 2, "min interval": 1, peers: compact }));
  });
}

const [mode, ...args] = Deno.args;
if (mode === "torrent") {
  const [file, announce, out] = args;
  await makeTorrent(file, announce, out);
} else if (mode === "tracker") {
  tracker(Number(args[0]));
} else {
  console.error("usage: peer_transfer_torrent.ts torrent FILE ANNOUNCE OUT | tracker PORT");
  Deno.exit(2);
}
