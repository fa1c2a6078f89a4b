import { assertEquals, assertRejects, assertThrows } from "../tests/assert.ts";
import { ControlUrlError, FailoverFetch, type Fetch, parseControlUrls } from "./failover_fetch.ts";

/** A fake network: each origin answers with a function, or refuses the connection. */
function network(
  answers: Record<string, ((req: Request) => Response | Promise<Response>) | "refused">,
) {
  const seen: string[] = [];
  const fetch: Fetch = (input, init) => {
    const req = new Request(input, init);
    seen.push(`${req.method} ${req.url}`);
    const answer = answers[new URL(req.url).origin];
    if (answer === undefined || answer === "refused") {
      return Promise.reject(new TypeError("error sending request: Connection refused"));
    }
    return Promise.resolve(answer(req));
  };
  return { fetch, seen };
}

const notLeader = () =>
  Response.json({ error: { code: "not_leader", message: "no", path: null, leader: null } }, {
    status: 503,
  });

Deno.test("FailoverFetch: a refused connection moves to the next URL and stays there", async () => {
  const net = network({
    "http://a:1": "refused",
    "http://b:1": async (req) => Response.json({ got: await req.text() }),
  });
  const logs: string[] = [];
  const f = new FailoverFetch(["http://a:1", "http://b:1"], net.fetch, (l) => logs.push(l));
  const res = await f.fetch("http://a:1/v1/agent/heartbeat?x=1", {
    method: "POST",
    body: JSON.stringify({ n: 1 }),
  });
  assertEquals(await res.json(), { got: '{"n":1}' });
  assertEquals(f.current, "http://b:1");
  assertEquals(net.seen, [
    "POST http://a:1/v1/agent/heartbeat?x=1",
    "POST http://b:1/v1/agent/heartbeat?x=1",
  ]);
  assertEquals(logs.length, 1);
  // The next request goes straight to b.
  await (await f.fetch("http://a:1/v1/nodes")).body?.cancel();
  assertEquals(net.seen.at(-1), "GET http://b:1/v1/nodes");
});

Deno.test("FailoverFetch: not_leader moves on; other errors are answers", async () => {
  const net = network({
    "http://a:1": notLeader,
    "http://b:1": () => Response.json({ error: { code: "not_found" } }, { status: 404 }),
  });
  const f = new FailoverFetch(["http://a:1", "http://b:1"], net.fetch);
  assertEquals((await f.fetch("http://a:1/v1/x")).status, 404);
  assertEquals(f.current, "http://b:1");
  const other = network({ "http://a:1": () => new Response("busy", { status: 503 }) });
  const g = new FailoverFetch(["http://a:1", "http://b:1"], other.fetch);
  assertEquals(await (await g.fetch("http://a:1/v1/x")).text(), "busy");
  assertEquals(g.current, "http://a:1", "a plain 503 is an answer, not a refusal");
});

Deno.test("FailoverFetch: every URL refusing gives the last refusal; every URL down, the error", async () => {
  const f = new FailoverFetch(
    ["http://a:1", "http://b:1"],
    network({ "http://a:1": notLeader, "http://b:1": notLeader }).fetch,
  );
  const res = await f.fetch("http://a:1/v1/x", { method: "POST", body: "{}" });
  assertEquals(res.status, 503);
  assertEquals((await res.json()).error.code, "not_leader");
  const down = new FailoverFetch(["http://a:1", "http://b:1"], network({}).fetch);
  await assertRejects(() => down.fetch("http://a:1/v1/x"), TypeError);
});

Deno.test("FailoverFetch: a request that timed out is not resent, and the next one tries the next URL", async () => {
  const net = network({
    "http://a:1": () => new Response("late"),
    "http://b:1": () => new Response("b"),
  });
  const hanging: Fetch = (input, init) => {
    if (String(input).startsWith("http://a:1")) {
      return new Promise((_, reject) =>
        init?.signal?.addEventListener(
          "abort",
          () => reject(new DOMException("aborted", "AbortError")),
        )
      );
    }
    return net.fetch(input, init);
  };
  const f = new FailoverFetch(["http://a:1", "http://b:1"], hanging);
  await assertRejects(
    () => f.fetch("http://a:1/v1/x", { signal: AbortSignal.timeout(50) }),
    DOMException,
  );
  assertEquals(net.seen, []);
  assertEquals(await (await f.fetch("http://a:1/v1/x")).text(), "b");
});

Deno.test("FailoverFetch: other URLs pass through untouched", async () => {
  const net = network({ "http://other:2": () => new Response("o") });
  const f = new FailoverFetch(["http://a:1"], net.fetch);
  assertEquals(await (await f.fetch("http://other:2/x")).text(), "o");
  assertEquals(net.seen, ["GET http://other:2/x"]);
});

Deno.test("parseControlUrls: comma-separated and repeated; a bad entry is named", () => {
  assertEquals(
    parseControlUrls(["https://a:7070, https://b:7070", "https://c:7070"], "--control"),
    [
      "https://a:7070",
      "https://b:7070",
      "https://c:7070",
    ],
  );
  const e = assertThrows(
    () => parseControlUrls(["https://a:7070,ftp://b"], "--control"),
    ControlUrlError,
  );
  assertEquals(e.message, '--control: "ftp://b" is not an http(s) URL');
  assertThrows(() => new FailoverFetch([]), ControlUrlError);
});

Deno.test("FailoverFetch: a read a silent control plane does not answer in time goes to the next", async () => {
  const silent: Fetch = (input, init) => {
    if (String(input).startsWith("http://a:1")) {
      return new Promise((_, reject) =>
        init?.signal?.addEventListener(
          "abort",
          () => reject(new DOMException("aborted", "AbortError")),
        )
      );
    }
    return Promise.resolve(new Response("b"));
  };
  const f = new FailoverFetch(["http://a:1", "http://b:1"], silent, () => {}, {
    readAttemptTimeoutMs: 30,
  });
  assertEquals(await (await f.fetch("http://a:1/v1/nodes")).text(), "b");
  assertEquals(f.current, "http://b:1");
  // A write is never sent twice: it waits on the silent one until the caller gives up.
  const g = new FailoverFetch(["http://a:1", "http://b:1"], silent, () => {}, {
    readAttemptTimeoutMs: 30,
  });
  await assertRejects(
    () =>
      g.fetch("http://a:1/v1/x", { method: "POST", body: "{}", signal: AbortSignal.timeout(100) }),
    DOMException,
  );
});

Deno.test("FailoverFetch: an answer forwarded by a follower moves the client to the leader it names", async () => {
  const net = network({
    "http://a:1": () => new Response("via a", { headers: { "x-llmgw-leader": "http://b:1" } }),
    "http://b:1": () => new Response("b"),
  });
  const f = new FailoverFetch(["http://a:1", "http://b:1"], net.fetch);
  assertEquals(await (await f.fetch("http://a:1/v1/nodes")).text(), "via a");
  assertEquals(f.current, "http://b:1");
  assertEquals(await (await f.fetch("http://a:1/v1/nodes")).text(), "b");
  // A leader the client does not list changes nothing.
  const g = new FailoverFetch(
    ["http://a:1"],
    network({
      "http://a:1": () => new Response("x", { headers: { "x-llmgw-leader": "http://c:1" } }),
    }).fetch,
  );
  await (await g.fetch("http://a:1/v1/x")).body?.cancel();
  assertEquals(g.current, "http://a:1");
});
