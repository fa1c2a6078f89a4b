/**
 * What `llmgw dev` prints once its cluster is up: where everything listens,
 * where its state lives and how to use it. The gateway line says whether it
 * needs an API key now: after a restart on a directory with keys, "open
 * until a key exists" would send the operator's first request to a 401.
 *
 * @module
 */

/** What the banner reports. */
export interface DevBannerFacts {
  /** The control plane's URL. */
  controlUrl: string;
  /** The gateway's URL. */
  gatewayUrl: string;
  /** The state directory. */
  dir: string;
  /** `DIR/dev.env`. */
  envPath: string;
  /** The cluster CA certificate. */
  caPath: string;
  /** The simulated nodes, `node (machine)`. */
  nodes: string[];
  /** How many gateway API keys the store holds. */
  apiKeys: number;
  /** Whether the admin token is the one kept from an earlier start of this directory. */
  tokenKept: boolean;
  /** How to run the CLI here: `deno task llmgw`, or through npx where `deno` is not on PATH. */
  cli: string;
  /** The hub models come from: the fake hub dev started, or the operator's `HF_ENDPOINT`. */
  hub: string;
}

/** The gateway's access rule as the banner states it. */
export function gatewayAccess(apiKeys: number): string {
  return apiKeys === 0
    ? "open to loopback until an API key exists"
    : `needs an API key: ${apiKeys} exist${apiKeys === 1 ? "s" : ""} (llmgw apikeys list)`;
}

/** The banner, ending with a blank line. */
export function devBanner(f: DevBannerFacts): string {
  const token = f.tokenKept
    ? `kept from this directory's last start, in ${f.envPath}`
    : `written to ${f.envPath}`;
  return `llmgw dev: a local cluster on simulated hardware (no GPU needed)\n` +
    `  control plane  ${f.controlUrl}   state in ${f.dir}\n` +
    `  gateway        ${f.gatewayUrl}/v1 (OpenAI-compatible; ${gatewayAccess(f.apiKeys)})\n` +
    `  dashboard      ${f.controlUrl}/ui/ (sign in with LLMGW_TOKEN from ${f.envPath})\n` +
    `  nodes          ${f.nodes.join(", ")}\n` +
    `  engines        the fake engine (dev/) stands in for vLLM and SGLang\n` +
    `  hub            ${f.hub}\n` +
    `  admin token    ${token}; use it with:\n` +
    `    set -a; . ${f.envPath}; set +a\n` +
    `    ${f.cli} get replicas\n` +
    `    ${f.cli} explain llama-405b\n` +
    `    ${f.cli} describe replica llama-8b-r0\n` +
    `  once a replica is ready, ask it through the gateway:\n` +
    `    curl -s --cacert ${f.caPath} ${f.gatewayUrl}/v1/chat/completions \\\n` +
    `      -H 'content-type: application/json' \\\n` +
    (f.apiKeys > 0 ? `      -H "authorization: Bearer $YOUR_API_KEY" \\\n` : "") +
    `      -d '{"model": "llama-8b", "messages": [{"role": "user", "content": "hi"}]}'\n\n`;
}

/**
 * How the banner tells the operator to run the CLI: the npx form the
 * README's quick start uses, at the Deno version running dev, when dev was
 * started through npx (`npm_command=exec`: npx puts its own deno on dev's
 * PATH only) or no `deno` is on PATH; else `deno task llmgw`.
 */
export function devCliCommand(
  env: { PATH?: string; npm_command?: string } = {
    PATH: Deno.env.get("PATH"),
    npm_command: Deno.env.get("npm_command"),
  },
  isExecutable: (file: string) => boolean = executable,
): string {
  const onPath = (env.PATH ?? "").split(":").some((d) => d !== "" && isExecutable(`${d}/deno`));
  return onPath && env.npm_command !== "exec"
    ? "deno task llmgw"
    : `npx -y deno@${Deno.version.deno} task llmgw`;
}

function executable(file: string): boolean {
  try {
    const st = Deno.statSync(file);
    return st.isFile && ((st.mode ?? 0) & 0o111) !== 0;
  } catch {
    return false;
  }
}
