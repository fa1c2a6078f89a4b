/**
 * CPU seconds per GiB of the model cache's download paths beside reference
 * tools (issue #25 item 3; numbers in docs/benchmarks.md "Peer route CPU per
 * GiB"), on loopback, unshaped: CPU time, unlike wall time, is not inflated
 * by other work on a shared machine.
 *
 *   deno run -A bench/peer_cpu.ts [SIZE_MIB] [CASE…]
 *
 * Cases (all by default): `sha256sum`; `curl-http`, `curl-https`,
 * `aria2-http`, `aria2-https` (from nginx, one process, `master_process
 * off`, so its CPU is one pid's; aria2c `-x8 -k16M` with `--checksum`);
 * `hub` (the agent's model cache from the fake hub, plain HTTP, through the
 * hub client and its CDN redirect); `peer` (the model cache from another
 * process's peer route over mTLS: bench/peer_transfer.ts `serve` and
 * `fetch`, the agent's defaults of 16 MiB chunks, 8 at once). The receiver's
 * CPU is measured around the transfer only (process start excluded); the
 * server's from `/proc/<pid>/stat` before and after. Prints one JSON line
 * per case, then a Markdown table.
 *
 * `PEER_CPU_DIR=DIR` puts the files (model, caches) under DIR (default: the
 * system's temporary directory). `PEER_CPU_PROFILE=DIR` runs the `peer` case's two processes under
 * `perf record -g` (with V8's perf map), leaving `DIR/{receiver,server}.data`.
 *
 * @module
 */
import { join } from "node:path";
import { HubClient } from "../models/hub_client.ts";
import { ModelCache } from "../agent/model_cache/model_cache.ts";
import { cpuSince, type CpuTime, cpuTime } from "./proc_cpu.ts";

const ROOT = new URL("..", import.meta.url).pathname;
const GIB = 2 ** 30;

/** One measured case. */
interface Row {
  case: string;
  bytes: number;
  seconds: number;
  receiver: CpuTime;
  server: CpuTime | null;
}

function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

/** Runs `cmd` under /usr/bin/time; its CPU seconds. */
async function timed(cmd: string[]): Promise<{ cpu: CpuTime; seconds: number }> {
  const began = performance.now();
  const out = await new Deno.Command("/usr/bin/time", {
    args: ["-f", "cpu %U %S", ...cmd],
    stdout: "null",
    stderr: "piped",
  }).output();
  const seconds = (performance.now() - began) / 1000;
  const err = new TextDecoder().decode(out.stderr);
  const m = /cpu ([\d.]+) ([\d.]+)\s*$/.exec(err);
  if (!out.success || m === null) throw new Error(`${cmd.join(" ")} failed: ${err.slice(-2000)}`);
  return { cpu: { user: Number(m[1]), system: Number(m[2]) }, seconds };
}

/** A long-running child, its stdout read line by line until `ready` matches one (bounded). */
async function startChild(
  args: string[],
  env: Record<string, string>,
  ready: RegExp,
): Promise<{ child: Deno.ChildProcess; seen: string }> {
  const child = new Deno.Command(args[0], {
    args: args.slice(1),
    env,
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const lines = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let seen = "";
  const deadline = Date.now() + 120_000;
  while (!ready.test(seen)) {
    const next = await Promise.race([
      lines.read(),
      new Promise<null>((r) => setTimeout(() => r(null), Math.max(0, deadline - Date.now()))),
    ]);
    if (next === null || next.done) {
      await stop(child);
      throw new Error(`${args.join(" ")} never printed ${ready}: ${seen.slice(-500)}`);
    }
    seen += next.value;
  }
  // Keep draining, so the child never blocks on a full pipe.
  (async () => {
    while (!(await lines.read().catch(() => ({ done: true }))).done) { /* drain */ }
  })();
  return { child, seen };
}

async function stop(child: Deno.ChildProcess): Promise<void> {
  try {
    child.kill("SIGTERM");
  } catch { /* already gone */ }
  const timer = setTimeout(() => {
    try {
      child.kill("SIGKILL");
    } catch { /* gone */ }
  }, 5_000);
  await child.status;
  clearTimeout(timer);
}

async function sha256(path: string): Promise<{ hex: string; row: Row }> {
  const out = await new Deno.Command("/usr/bin/time", {
    args: ["-f", "cpu %U %S", "sha256sum", path],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const m = /cpu ([\d.]+) ([\d.]+)\s*$/.exec(new TextDecoder().decode(out.stderr));
  if (!out.success || m === null) throw new Error(`sha256sum ${path} failed`);
  const size = (await Deno.stat(path)).size;
  return {
    hex: new TextDecoder().decode(out.stdout).split(" ")[0],
    row: {
      case: "sha256sum (reference)",
      bytes: size,
      seconds: 0,
      receiver: { user: Number(m[1]), system: Number(m[2]) },
      server: null,
    },
  };
}

async function nginxCases(work: string, size: number, sha: string, cases: Set<string>) {
  const rows: Row[] = [];
  const http = freePort();
  const https = freePort();
  const www = join(work, "www");
  await Deno.mkdir(www, { recursive: true });
  await Deno.link(join(work, "model.bin"), join(www, "model.bin"));
  const conf = join(work, "nginx.conf");
  await Deno.writeTextFile(
    conf,
    `daemon off; master_process off; pid ${work}/nginx.pid; error_log ${work}/nginx_error.log;
events {} http { access_log off; sendfile on;
  server { listen 127.0.0.1:${http}; root ${www}; }
  server { listen 127.0.0.1:${https} ssl; ssl_certificate ${work}/h0.crt;
    ssl_certificate_key ${work}/h0.key; root ${www}; } }
`,
  );
  const nginx = new Deno.Command("nginx", { args: ["-c", conf, "-e", `${work}/nginx_error.log`] })
    .spawn();
  try {
    await waitPort(https);
    const out = join(work, "out");
    const ca = join(work, "ca.crt");
    const tools: [string, string[]][] = [
      ["curl-http", [
        "curl",
        "-sf",
        "-o",
        join(out, "model.bin"),
        `http://127.0.0.1:${http}/model.bin`,
      ]],
      ["curl-https", [
        "curl",
        "-sf",
        "--cacert",
        ca,
        "-o",
        join(out, "model.bin"),
        `https://127.0.0.1:${https}/model.bin`,
      ]],
      ...(["http", "https"] as const).map((scheme): [string, string[]] => [
        `aria2-${scheme}`,
        [
          "aria2c",
          "-q",
          "-x8",
          "-s8",
          "-k16M",
          "--file-allocation=none",
          `--ca-certificate=${ca}`,
          `--checksum=sha-256=${sha}`,
          "-d",
          out,
          "-o",
          "model.bin",
          `${scheme}://127.0.0.1:${scheme === "http" ? http : https}/model.bin`,
        ],
      ]),
    ];
    for (const [name, cmd] of tools) {
      if (!cases.has(name)) continue;
      await Deno.remove(out, { recursive: true }).catch(() => {});
      await Deno.mkdir(out);
      const before = cpuTime(nginx.pid);
      const { cpu, seconds } = await timed(cmd);
      const server = cpuSince(before, cpuTime(nginx.pid));
      rows.push({
        case: `${name} from nginx (reference)`,
        bytes: size,
        seconds,
        receiver: cpu,
        server,
      });
      console.log(JSON.stringify(rows.at(-1)));
    }
  } finally {
    await stop(nginx);
  }
  return rows;
}

async function waitPort(port: number): Promise<void> {
  for (let i = 0; i < 200; i++) {
    try {
      (await Deno.connect({ hostname: "127.0.0.1", port })).close();
      return;
    } catch {
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  throw new Error(`port ${port} never opened`);
}

/** perf record around a command, when profiling. */
function profiled(cmd: string[], name: string): string[] {
  const dir = Deno.env.get("PEER_CPU_PROFILE");
  if (dir === undefined) return cmd;
  const [deno, run, ...rest] = cmd;
  return [
    "perf",
    "record",
    "-g",
    "-F",
    "499",
    "-o",
    join(dir, `${name}.data`),
    "--",
    deno,
    run,
    "--v8-flags=--perf-basic-prof",
    ...rest,
  ];
}

async function peerCase(work: string, size: number): Promise<Row> {
  const port = freePort();
  const env = { PEER_PORT: String(port) };
  await Deno.link(join(work, "model.bin"), join(work, "serve.bin"));
  const transfer = join(ROOT, "bench/peer_transfer.ts");
  const deno = ["deno", "run", "-A", "--quiet"];
  const { child: server } = await startChild(
    profiled(
      [...deno, transfer, "serve", work, "h0", join(work, "cache0"), join(work, "serve.bin")],
      "server",
    ),
    env,
    /serving/,
  );
  try {
    // Under perf the pid is perf's; the server is its only child.
    const serverPid = Deno.env.get("PEER_CPU_PROFILE") === undefined
      ? server.pid
      : Number(Deno.readTextFileSync(`/proc/${server.pid}/task/${server.pid}/children`).trim());
    const before = cpuTime(serverPid);
    const began = performance.now();
    const [cmd, ...args] = profiled(
      [
        ...deno,
        transfer,
        "fetch",
        work,
        "h1",
        join(work, "cache1"),
        join(work, "snapshot.json"),
        `https://127.0.0.1:${port}`,
      ],
      "receiver",
    );
    const out = await new Deno.Command(cmd, { args, env, stdout: "inherit", stderr: "inherit" })
      .output();
    const seconds = (performance.now() - began) / 1000;
    const serverCpu = cpuSince(before, cpuTime(serverPid));
    if (!out.success) throw new Error("the peer fetch failed");
    const done = JSON.parse(await Deno.readTextFile(join(work, "done_h1")));
    return {
      case: "model cache from a peer (mTLS)",
      bytes: size,
      seconds,
      receiver: done.cpu,
      server: serverCpu,
    };
  } finally {
    await stop(server);
  }
}

async function hubCase(work: string, sizeMib: number): Promise<Row> {
  const { child: hub, seen } = await startChild(
    [
      "deno",
      "run",
      "-A",
      "--no-config",
      "--quiet",
      join(ROOT, "dev/fake_hub/fake_hub.ts"),
      "--port",
      "0",
      "--cdn-port",
      "0",
      "--synthetic",
      `bench/hubmodel,shards=1,bytes=${sizeMib}MiB`,
    ],
    {},
    /listening/,
  );
  try {
    const endpoint = JSON.parse(seen.split("\n").find((l) => l.includes("listening"))!).endpoint;
    const before = cpuTime(hub.pid);
    const out = await new Deno.Command("deno", {
      args: ["run", "-A", "--quiet", new URL(import.meta.url).pathname, "hub-fetch", work],
      env: { HUB_ENDPOINT: endpoint },
      stdout: "piped",
      stderr: "inherit",
    }).output();
    const server = cpuSince(before, cpuTime(hub.pid));
    if (!out.success) throw new Error("the hub fetch failed");
    const got = JSON.parse(new TextDecoder().decode(out.stdout).trim().split("\n").at(-1)!);
    return {
      case: "model cache from the fake hub (plain HTTP)",
      bytes: got.bytes,
      seconds: got.seconds,
      receiver: got.cpu,
      server,
    };
  } finally {
    await stop(hub);
  }
}

/** The child of the `hub` case: fetches from `HUB_ENDPOINT`, prints seconds and CPU. */
async function hubFetch(work: string): Promise<void> {
  const endpoint = Deno.env.get("HUB_ENDPOINT")!;
  const client = new HubClient({ config: { endpoint }, userAgent: "llmgw-bench" });
  const snapshot = await client.resolveRevision("bench/hubmodel", "main");
  const cache = new ModelCache({ root: join(work, "cache_hub") });
  const began = performance.now();
  const before = cpuTime();
  await cache.ensureSnapshot(snapshot, [client.byteSource()]);
  const cpu = cpuSince(before, cpuTime());
  const bytes = snapshot.files.reduce((n, f) => n + f.size, 0);
  console.log(JSON.stringify({ seconds: (performance.now() - began) / 1000, cpu, bytes }));
}

function perGib(cpu: CpuTime | null, bytes: number): string {
  if (cpu === null) return "—";
  const g = bytes / GIB;
  return `${((cpu.user + cpu.system) / g).toFixed(2)} (${(cpu.user / g).toFixed(2)} + ${
    (cpu.system / g).toFixed(2)
  })`;
}

async function main(): Promise<void> {
  const [first, ...rest] = Deno.args;
  if (first === "hub-fetch") return await hubFetch(rest[0]);
  const sizeMib = Number(first ?? "1024");
  const all = ["sha256sum", "curl-http", "curl-https", "aria2-http", "aria2-https", "hub", "peer"];
  const cases = new Set(rest.length > 0 ? rest : all);
  const work = await Deno.makeTempDir({
    prefix: "llmgw_peer_cpu_",
    dir: Deno.env.get("PEER_CPU_DIR"),
  });
  const rows: Row[] = [];
  try {
    const model = join(work, "model.bin");
    const made = await new Deno.Command("sh", {
      args: ["-c", `head -c ${sizeMib * 2 ** 20} /dev/urandom > ${model}`],
    }).output();
    if (!made.success) throw new Error("cannot write the model file");
    const { hex, row } = await sha256(model);
    if (cases.has("sha256sum")) {
      rows.push(row);
      console.log(JSON.stringify(row));
    }
    const size = (await Deno.stat(model)).size;
    await Deno.writeTextFile(
      join(work, "snapshot.json"),
      JSON.stringify({
        repo: "bench/model",
        commit: "1".padStart(40, "0"),
        files: [{ path: "model.safetensors", size, blobId: "2".padStart(40, "0"), sha256: hex }],
      }),
    );
    const pki = await new Deno.Command("deno", {
      args: ["run", "-A", "--quiet", join(ROOT, "bench/peer_transfer.ts"), "pki", work, "h0", "h1"],
    }).output();
    if (!pki.success) throw new Error("pki failed");
    rows.push(...await nginxCases(work, size, hex, cases));
    if (cases.has("hub")) {
      rows.push(await hubCase(work, sizeMib));
      console.log(JSON.stringify(rows.at(-1)));
    }
    if (cases.has("peer")) {
      rows.push(await peerCase(work, size));
      console.log(JSON.stringify(rows.at(-1)));
    }
  } finally {
    await Deno.remove(work, { recursive: true });
  }
  console.log(
    "\n| case | wall s | receiver CPU s/GiB (user + sys) | server CPU s/GiB (user + sys) |",
  );
  console.log("| --- | --- | --- | --- |");
  for (const r of rows) {
    console.log(
      `| ${r.case} | ${r.seconds.toFixed(1)} | ${perGib(r.receiver, r.bytes)} | ${
        perGib(r.server, r.bytes)
      } |`,
    );
  }
}

if (import.meta.main) await main();
