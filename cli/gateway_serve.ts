/**
 * `llmgw gateway serve` (design §3, §12): the OpenAI-compatible gateway,
 * following the control plane's ready endpoints.
 *
 * API keys (design §12) come from the control plane (`llmgw apikeys`). While
 * none is configured the gateway is open to loopback clients only, unless
 * `--allow-open`; it says which at start.
 *
 * @module
 */
import { readCaFile, TlsMaterialError } from "../tls/authority.ts";
import { UpstreamClient } from "../gateway/upstream_client.ts";
import { pinnedFetch } from "../tls/trust.ts";
import { startFollowingGateway, startFollowingGatewayTls } from "../gateway/server.ts";
import { fileCertificate } from "../tls/certificate_source.ts";
import { z } from "zod";
import { expandConfig } from "./config_file.ts";
import { BindError } from "../http/bind_error.ts";
import { controlUrlsOf, parseFlags, parseListen, UsageError } from "./usage_error.ts";
import { FailoverFetch } from "../http/failover_fetch.ts";
import { createLogger, lineSink } from "../log/log.ts";
import { stopSignal } from "./stop_signals.ts";

/** `gateway serve --config FILE`: the flags' settings, snake_case (cli/config_file.ts). */
export const GatewayConfigSchema = z.object({
  listen: z.string(),
  control: z.union([z.string(), z.array(z.string()).min(1)]),
  poll_interval: z.number().positive(),
  allow_open: z.boolean(),
  tls_cert: z.string(),
  tls_key: z.string(),
}).partial().strict();

/** Usage of the command. */
export const GATEWAY_USAGE = `Usage: llmgw gateway serve --control URL [options]

Runs the OpenAI-compatible gateway (/v1/models, /v1/chat/completions,
/v1/completions, /v1/embeddings), routing by model to ready replicas.

Options:
  --control URL[,URL]  the control planes' URLs, in order of preference
                       (repeatable; or env LLMGW_URL, comma-separated); polls
                       move to the next on a failure or "not the leader"
  --listen HOST:PORT   where to listen (default 127.0.0.1:8080)
  --poll-interval S    poll the control plane every S seconds (default 2)
  --allow-open         while no API key is configured, serve clients from
                       any address (by default only loopback clients are
                       served until a key exists: llmgw apikeys create)
  --tls-cert FILE      serve HTTPS with this certificate (PEM, with its chain)
  --tls-key FILE       … and this key; both files are read again every minute,
                       so a renewed certificate is used without a restart
  --config FILE        settings as JSON: listen, control, poll_interval,
                       allow_open, tls_cert, tls_key (flags win)

A gateway token (llmgw tokens create gateway) comes from env LLMGW_TOKEN
(never a flag). For an https control plane, env LLMGW_CA names the cluster
CA certificate (PEM) the gateway trusts for the control plane and the agents'
engine proxies.
`;

/** What a gateway started with `openToNetwork` does while no API key exists (said at start). */
export function openNotice(openToNetwork: boolean): string {
  return openToNetwork
    ? "llmgw gateway: OPEN (--allow-open): while no API key exists, anyone who can reach it can use every model\n"
    : "llmgw gateway: API keys come from the control plane; while none exists, only loopback clients are served\n";
}

/**
 * Runs `llmgw gateway serve` until SIGINT/SIGTERM; returns the exit code
 * (1 when it cannot listen: one line naming the address, the port and, where
 * /proc can be read, its holder).
 *
 * @throws {UsageError} Naming the flag or variable that is wrong (exit code 2).
 */
export async function gatewayServeCommand(
  argv: string[],
  out: (t: string) => void,
  err: (t: string) => void,
  // The variables it reads (LLMGW_URL, LLMGW_TOKEN, LLMGW_CA): tests pass their own, never
  // setting the process's, which test files running in parallel share.
  env: (name: string) => string | undefined = (name) => Deno.env.get(name),
): Promise<number> {
  const args = expandConfig("gateway serve", argv, GatewayConfigSchema, ["tls_cert", "tls_key"]);
  const { values, positionals } = parseFlags("gateway serve", args, {
    control: { type: "string", multiple: true },
    "tls-cert": { type: "string" },
    "tls-key": { type: "string" },
    listen: { type: "string" },
    "poll-interval": { type: "string" },
    "allow-open": { type: "boolean" },
    help: { type: "boolean", short: "h" },
  });
  if (values.help) {
    out(GATEWAY_USAGE);
    return 0;
  }
  if (positionals.length > 0) {
    throw new UsageError(`gateway serve: unexpected argument "${positionals[0]}"`);
  }
  // Several URLs may be given (issue #15): calls move to the next on a failure or "not the leader".
  const envUrl = env("LLMGW_URL") || undefined;
  const controlUrls = controlUrlsOf("gateway serve", "--control", [
    values.control,
    envUrl === undefined ? undefined : [envUrl],
  ]);
  if (controlUrls.length === 0) {
    throw new UsageError("gateway serve: --control URL is required (or env LLMGW_URL)");
  }
  const control = controlUrls[0];
  const token = env("LLMGW_TOKEN") ?? "";
  if (token === "") {
    throw new UsageError(
      "gateway serve: env LLMGW_TOKEN (a gateway token: llmgw tokens create gateway) is required",
    );
  }
  const listen = parseListen(values.listen ?? "127.0.0.1:8080");
  let intervalMs = 2_000;
  if (values["poll-interval"] !== undefined) {
    const s = Number(values["poll-interval"]);
    if (!Number.isFinite(s) || s <= 0) {
      throw new UsageError(
        `gateway serve: --poll-interval must be a positive number of seconds, got "${
          values["poll-interval"]
        }"`,
      );
    }
    intervalMs = Math.round(s * 1000);
  }
  const openToNetwork = values["allow-open"] === true;
  const caFile = env("LLMGW_CA") || undefined;
  let caPem: string | undefined;
  if (caFile !== undefined) {
    try {
      caPem = readCaFile(caFile);
    } catch (e) {
      if (!(e instanceof TlsMaterialError)) throw e;
      err(`llmgw: LLMGW_CA: ${e.message}\n`);
      return 1;
    }
  } else if (control.startsWith("https:")) {
    throw new UsageError(
      "gateway serve: an https control plane needs env LLMGW_CA (the cluster CA certificate)",
    );
  }
  const certFile = values["tls-cert"];
  const keyFile = values["tls-key"];
  if ((certFile === undefined) !== (keyFile === undefined)) {
    throw new UsageError("gateway serve: --tls-cert and --tls-key go together");
  }
  const trust = caPem === undefined ? null : pinnedFetch(caPem);
  // The running gateway's notes are JSON lines (log/log.ts); start-up messages stay plain text.
  const log = createLogger("gateway", (line) => err(`${line}\n`));
  let running;
  try {
    const settings = {
      ...listen,
      controlUrl: control,
      token,
      intervalMs,
      log: lineSink(log, "warn"),
      openToNetwork,
      controlFetch: new FailoverFetch(
        controlUrls,
        trust?.fetch ?? fetch,
        lineSink(log, "warn"),
      ).fetch,
      client: caPem === undefined ? undefined : new UpstreamClient({ caCerts: [caPem] }),
    };
    running = certFile === undefined || keyFile === undefined
      ? startFollowingGateway(settings)
      : await startFollowingGatewayTls({
        ...settings,
        tls: {
          source: fileCertificate(certFile, keyFile),
          log: lineSink(log, "warn"),
        },
      });
  } catch (e) {
    trust?.close();
    if (e instanceof TlsMaterialError) {
      err(`llmgw: ${e.message}\n`);
      return 1;
    }
    if (!(e instanceof BindError)) throw e;
    err(`llmgw: ${e.message}\n`);
    return 1;
  }
  out(
    `llmgw gateway listening on ${running.url}, following ${control}\n${openNotice(openToNetwork)}`,
  );
  // Said at every start, once it runs (a failed bind stays one line).
  if (!control.startsWith("https:")) {
    err(
      "llmgw: WARNING: the control plane URL is http://: the gateway token and the engine " +
        "proxies' credentials cross the network in clear (lab use only)\n",
    );
  }
  await stopSignal();
  await running.close();
  trust?.close();
  return 0;
}
