// The dashboard in a real headless Chromium, driven by playwright-core under
// Node (Deno has had Playwright launch regressions). Run by
// dashboard_test.ts against a `llmgw dev` it started; everything it needs
// comes in the environment:
//
//   LLMGW_URL, LLMGW_TOKEN, LLMGW_CA   the dev cluster (dev.env)
//   UI_CHROMIUM                        the browser executable
//   UI_DENO, UI_ROOT                   deno and the repository, for the CLI
//   UI_CORDON_NODE                     the node to cordon from the page
//   UI_ENGINE_PORT, UI_REPLICA         a ready replica and its engine's port
//   UI_SCREENSHOTS                     where the screenshots go
//
// It prints one JSON line per check and exits non-zero on the first failure.
import { execFile } from "node:child_process";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { chromium } from "playwright-core";

const env = (name) => {
  const v = process.env[name];
  if (v === undefined || v === "") {
    throw new Error(`dashboard.mjs: ${name} is not set`);
  }
  return v;
};
const base = env("LLMGW_URL");
const token = env("LLMGW_TOKEN");
const cordonNode = env("UI_CORDON_NODE");
const replica = env("UI_REPLICA");
const enginePort = env("UI_ENGINE_PORT");
const shots = env("UI_SCREENSHOTS");
mkdirSync(shots, { recursive: true });

/** The bound every "within 2 s" check is held to. */
const WITHIN_MS = 2_000;
const LOOPBACK = new Set(["127.0.0.1", "localhost", "[::1]", "::1"]);

const report = (check, extra = {}) => console.log(JSON.stringify({ check, ...extra }));

/** `llmgw get nodes -o json`, as an operator runs it. */
function cliNodes() {
  return new Promise((resolve, reject) => {
    execFile(
      env("UI_DENO"),
      [
        "run",
        "--allow-all",
        join(env("UI_ROOT"), "main.ts"),
        "get",
        "nodes",
        "-o",
        "json",
      ],
      { env: { ...process.env, NO_COLOR: "1" }, timeout: 30_000 },
      (err, stdout, stderr) => {
        if (err) {
          reject(
            new Error(`llmgw get nodes failed: ${err.message}\n${stderr}`),
          );
        } else resolve(JSON.parse(stdout));
      },
    );
  });
}

const browser = await chromium.launch({
  executablePath: env("UI_CHROMIUM"),
  headless: true,
  args: ["--no-sandbox", "--disable-dev-shm-usage"],
});
const requests = [];
try {
  // The cluster's own CA signs the control plane's certificate; the browser
  // has no trust store for it, and everything here is on loopback.
  const context = await browser.newContext({
    ignoreHTTPSErrors: true,
    viewport: { width: 1440, height: 900 },
    deviceScaleFactor: 1,
  });
  // Every request is recorded; one for anywhere but loopback is refused.
  await context.route("**/*", (route) => {
    const url = new URL(route.request().url());
    requests.push(url.href);
    return LOOPBACK.has(url.hostname) ? route.continue() : route.abort("blockedbyclient");
  });
  const page = await context.newPage();
  const consoleErrors = [];
  page.on(
    "console",
    (m) => m.type() === "error" && consoleErrors.push(m.text()),
  );
  page.on("pageerror", (e) => consoleErrors.push(String(e)));

  // Without a session: the sign-in form, no fleet data.
  await page.goto(`${base}/ui/`);
  await page.waitForSelector("form[action='/ui/sign-in']");
  const anon = await page.content();
  if (anon.includes(cordonNode)) {
    throw new Error("the sign-in page shows fleet data");
  }
  await page.screenshot({ path: join(shots, "sign-in.png") });
  report("sign-in page without a session");

  await page.fill("#token", token);
  // The form posts, and its answer redirects back to the page asked for.
  const [signInAnswer] = await Promise.all([
    page.waitForResponse((r) =>
      r.url() === `${base}/ui/sign-in` && r.request().method() === "POST"
    ),
    page.click("button[type=submit]"),
  ]);
  if (signInAnswer.status() !== 303) {
    throw new Error(`sign-in answered ${signInAnswer.status()}: ${await page.content()}`);
  }
  await page.waitForSelector("tr[data-node]");
  const cookies = await context.cookies();
  const session = cookies.find((c) => c.name === "llmgw_ui");
  if (!session?.httpOnly || session.sameSite !== "Strict" || !session.secure) {
    throw new Error(
      `session cookie attributes: ${JSON.stringify({ ...session, value: "…" })}`,
    );
  }
  if ((await page.content()).includes(token)) {
    throw new Error("the page shows the token");
  }
  // The first page was answered 401 (the sign-in form in its place), which Chromium logs.
  consoleErrors.length = 0;
  report("signed in", {
    cookie: { httpOnly: true, sameSite: "Strict", secure: true },
  });

  // The fleet page renders the dev cluster: every node, its GPUs, its fabric.
  for (const id of ["h100-a", "h100-b", "a100-a", "l40s-a"]) {
    await page.waitForSelector(`tr[data-node='${id}']`);
  }
  const cells = await page.locator("tr[data-node='h100-a'] .g").count();
  if (cells !== 8) throw new Error(`h100-a shows ${cells} GPUs, not 8`);
  await page.waitForSelector("tr[data-node='h100-a'] .g.held");
  report("fleet page renders the dev cluster", { gpusOnH100a: cells });
  await page.screenshot({ path: join(shots, "fleet.png"), fullPage: true });

  // Cordon from the page; the CLI sees it within 2 s of the click.
  const row = page.locator(`tr[data-node='${cordonNode}']`);
  const clicked = Date.now();
  await row.getByRole("button", { name: "Cordon" }).click();
  let seenAfter = null;
  while (seenAfter === null && Date.now() - clicked <= WITHIN_MS) {
    const started = Date.now() - clicked;
    const answer = await cliNodes();
    // The list, as `get nodes -o json` prints it (older CLIs wrapped it in {nodes}).
    const nodes = Array.isArray(answer) ? answer : answer.nodes;
    if (nodes.find((n) => n.id === cordonNode)?.state === "cordoned") {
      seenAfter = started;
    }
  }
  if (seenAfter === null) {
    throw new Error(
      `llmgw get nodes did not show ${cordonNode} cordoned within ${WITHIN_MS} ms`,
    );
  }
  report("cordon clicked shows in llmgw get nodes", {
    cliStartedAfterMs: seenAfter,
  });
  await row.locator(".badge.s-cordoned").waitFor({ timeout: WITHIN_MS * 2 });
  await row.getByRole("button", { name: "Uncordon" }).click();
  await row.locator(".badge.s-ready").waitFor({ timeout: WITHIN_MS * 2 });
  report("uncordon from the page");

  // Deployments and their replicas' lifecycle.
  await page.goto(`${base}/ui/deployments`);
  await page.waitForSelector(`tr[data-replica='${replica}'] .badge.s-ready`);
  await page.waitForSelector("[data-deployment='llama-405b'] .badge.s-pending");
  report("deployments page shows ready and pending replicas");
  await page.screenshot({
    path: join(shots, "deployments.png"),
    fullPage: true,
  });

  // The replica page; a line the engine writes shows in its log within 2 s.
  await page.goto(`${base}/ui/replicas/${encodeURIComponent(replica)}`);
  await page.waitForSelector("#log div");
  const marker = `ui-marker-${Date.now().toString(36)}`;
  // The fake engine writes an access line for every request it serves. Not a
  // probe path: successful probe and scrape lines are left out of the tail.
  const wrote = Date.now();
  const answer = await fetch(`http://127.0.0.1:${enginePort}/${marker}`);
  await answer.arrayBuffer();
  await page.locator("#log div", { hasText: marker }).waitFor({
    timeout: WITHIN_MS,
  });
  report("engine log line on the replica page", {
    afterMs: Date.now() - wrote,
  });
  // Each line once: ids are unique on the page.
  const ids = await page.locator("#log div[data-id]").evaluateAll((els) =>
    els.map((e) => e.getAttribute("data-id"))
  );
  if (new Set(ids).size !== ids.length) {
    throw new Error("a log line shows twice");
  }
  // The cold start's download says where its bytes came from (downloadSourcesText's words).
  const download = page.locator("[data-cold-start] tr[data-phase='download']").first();
  // The fragment refreshes every 2 s; the receipt may come with a later heartbeat.
  await download.waitFor({ timeout: 10_000 });
  const fetched = await download.innerText();
  if (!/[KMGT]?i?B fetched( from |: )\S/.test(fetched)) {
    throw new Error(`the download row names no source: ${fetched}`);
  }
  report("cold start download sources on the replica page", { row: fetched });
  await page.screenshot({ path: join(shots, "replica.png"), fullPage: true });

  if (consoleErrors.length > 0) throw new Error(`console errors: ${consoleErrors.join(" | ")}`);
  report("no console errors while signed in");

  // Sign-out ends the session.
  await Promise.all([
    page.waitForURL(`${base}/ui/sign-in`),
    page.click("form[action='/ui/sign-out'] button"),
  ]);
  if ((await context.cookies()).some((c) => c.name === "llmgw_ui")) {
    throw new Error("the session cookie outlived sign-out");
  }
  report("signed out");

  const away = requests.filter((u) => !LOOPBACK.has(new URL(u).hostname));
  if (away.length > 0) {
    throw new Error(`requests left loopback: ${away.join(", ")}`);
  }
  report("no request left loopback", { requests: requests.length });
} finally {
  await browser.close();
}
