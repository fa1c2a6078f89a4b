import { assertEquals, assertOk, assertThrows } from "../tests/assert.ts";
import type { Gpu } from "../discovery/types.ts";
import { LivenessThresholdsError } from "./node_state.ts";
import {
  AllocationError,
  type AllocationRefusal,
  type AllocationRequest,
  InventoryStore,
  type NodeRegistration,
  NodeReportError,
  UnknownNodeError,
} from "./store.ts";

function gpu(index: number, problems: string[] = []): Gpu {
  return {
    index,
    uuid: `GPU-${index}`,
    name: "NVIDIA H100 80GB HBM3",
    class: "h100-80g",
    memory_total_mb: 81559,
    memory_used_mb: 0,
    compute_capability: "9.0",
    numa_node: 0,
    pci_bus_id: null,
    driver_version: "550.54.15",
    cuda_version: "12.4",
    nvlink_peers: [],
    health: { ecc_errors: 0, temperature_c: 40, problems },
  };
}

function registration(id: string, gpus: Gpu[] = [0, 1, 2, 3].map((i) => gpu(i))): NodeRegistration {
  return {
    id,
    hostname: `host-${id}`,
    mgmt_addr: "10.0.0.1",
    labels: { zone: "a" },
    gpus,
    fabrics: [{ fabric: "ib-a", hcas: ["mlx5_0"], ports: [], rate_gbps: 400 }],
    agent_version: "0.1.0",
    engine_versions: { vllm: "0.6.3" },
  };
}

function request(over: Partial<AllocationRequest> = {}): AllocationRequest {
  return {
    node: "n1",
    replica_id: "r-1",
    shard_id: "r-1/0",
    deployment: "llama",
    gpu_indices: [0, 1],
    ...over,
  };
}

function storeWith(...ids: string[]): InventoryStore {
  const store = new InventoryStore();
  for (const id of ids) store.upsertNode(registration(id), 0);
  return store;
}

Deno.test("upsertNode registers a ready node with no intent", () => {
  const store = new InventoryStore();
  const result = store.upsertNode(registration("n1"), 1_000);
  assertEquals(result.created, true);
  assertEquals(result.transition, null);
  assertEquals(result.node.state, "ready");
  assertEquals(result.node.liveness, "ready");
  assertEquals(result.node.intent, "none");
  assertEquals(result.node.last_seen_ms, 1_000);
  assertEquals(result.node.hostname, "host-n1");
  assertEquals(result.node.agent_version, "0.1.0");
  assertEquals(result.node.engine_versions, { vllm: "0.6.3" });
  assertEquals(store.getNode("n1"), result.node);
  assertEquals(store.getNode("n2"), undefined);
});

Deno.test("nodes are listed in natural id order", () => {
  const store = storeWith("n10", "n2", "n1", "m3");
  assertEquals(store.listNodes().map((n) => n.id), ["m3", "n1", "n2", "n10"]);
  assertEquals(store.snapshot().map((n) => n.id), ["m3", "n1", "n2", "n10"]);
});

Deno.test("re-registration replaces hardware and keeps intent and allocations", () => {
  const store = storeWith("n1");
  store.allocate(request());
  store.cordon("n1");
  const reg = registration("n1", [0, 1, 2, 3, 4].map((i) => gpu(i)));
  reg.hostname = "renamed";
  reg.labels = { zone: "b" };
  reg.engine_versions = { vllm: "0.7.0" };
  const result = store.upsertNode(reg, 2_000);
  assertEquals(result.created, false);
  assertEquals(result.transition, null);
  assertEquals(result.allocated_gpu_problems, []);
  const node = store.getNode("n1")!;
  assertEquals(node.state, "cordoned");
  assertEquals(node.hostname, "renamed");
  assertEquals(node.labels, { zone: "b" });
  assertEquals(node.engine_versions, { vllm: "0.7.0" });
  assertEquals(node.gpus.length, 5);
  assertEquals(node.last_seen_ms, 2_000);
  assertEquals(node.allocations.map((a) => a.shard_id), ["r-1/0"]);
  assertEquals(store.freeGpus("n1"), [2, 3, 4]);
});

Deno.test("a cordon or drain survives re-registration, heartbeats and coming back from lost", () => {
  for (const intent of ["cordoned", "draining"] as const) {
    const store = storeWith("n1");
    if (intent === "cordoned") store.cordon("n1");
    else store.drain("n1");
    store.upsertNode(registration("n1"), 1_000);
    assertEquals(store.getNode("n1")!.state, intent);
    store.heartbeat("n1", 2_000, [gpu(0)]);
    assertEquals(store.getNode("n1")!.state, intent);
    assertEquals(store.refresh(100_000), [{ node: "n1", from: intent, to: "lost" }]);
    const back = store.upsertNode(registration("n1"), 100_001);
    assertEquals(back.transition, { node: "n1", from: "lost", to: intent });
    assertEquals(back.node.intent, intent);
  }
});

Deno.test("cordon, drain and uncordon: drain supersedes cordon, uncordon clears both", () => {
  const store = storeWith("n1");
  assertEquals(store.cordon("n1").state, "cordoned");
  assertEquals(store.drain("n1").state, "draining");
  assertEquals(store.cordon("n1").state, "draining");
  assertEquals(store.uncordon("n1").state, "ready");
  assertEquals(store.drain("n1").state, "draining");
  assertEquals(store.uncordon("n1").intent, "none");
  assertEquals(store.uncordon("n1").state, "ready");
});

Deno.test("uncordon leaves liveness alone", () => {
  const store = storeWith("n1");
  store.cordon("n1");
  store.refresh(20_000);
  const node = store.uncordon("n1");
  assertEquals([node.state, node.liveness, node.intent], ["unreachable", "unreachable", "none"]);
});

Deno.test("refresh reports transitions by the configured thresholds", () => {
  const store = new InventoryStore({
    thresholds: { heartbeat_interval_ms: 10, unreachable_after_ms: 30, lost_after_ms: 100 },
  });
  for (const id of ["n2", "n10", "n1"]) store.upsertNode(registration(id), 0);
  store.cordon("n2");
  assertEquals(store.refresh(29), []);
  assertEquals(store.refresh(30), [
    { node: "n1", from: "ready", to: "unreachable" },
    { node: "n2", from: "cordoned", to: "unreachable" },
    { node: "n10", from: "ready", to: "unreachable" },
  ]);
  assertEquals(store.refresh(31), []);
  assertEquals(store.heartbeat("n10", 80).transition, {
    node: "n10",
    from: "unreachable",
    to: "ready",
  });
  assertEquals(store.refresh(100), [
    { node: "n1", from: "unreachable", to: "lost" },
    { node: "n2", from: "unreachable", to: "lost" },
  ]);
  assertEquals(store.refresh(100), []);
  assertEquals(store.refresh(109), []);
  assertEquals(store.refresh(110), [{ node: "n10", from: "ready", to: "unreachable" }]);
  assertEquals(store.getNode("n2")!.state, "lost");
});

Deno.test("refresh can jump straight from ready to lost", () => {
  const store = storeWith("n1");
  assertEquals(store.refresh(60_000), [{ node: "n1", from: "ready", to: "lost" }]);
});

Deno.test("refresh never revives a node when the clock steps back", () => {
  const store = storeWith("n1");
  store.refresh(60_000);
  assertEquals(store.refresh(0), []);
  assertEquals(store.getNode("n1")!.state, "lost");
});

Deno.test("a heartbeat brings a lost node back to ready, keeping its allocations", () => {
  const store = storeWith("n1");
  store.allocate(request());
  store.refresh(70_000);
  const update = store.heartbeat("n1", 70_001);
  assertEquals(update.transition, { node: "n1", from: "lost", to: "ready" });
  assertEquals(update.node.last_seen_ms, 70_001);
  assertEquals(update.node.allocations.length, 1);
  assertEquals(store.heartbeat("n1", 70_002).transition, null);
  assertEquals(store.refresh(70_002 + 14_999), []);
});

Deno.test("last_seen never moves back", () => {
  const store = storeWith("n1");
  store.heartbeat("n1", 5_000);
  assertEquals(store.heartbeat("n1", 1_000).node.last_seen_ms, 5_000);
  assertEquals(store.refresh(19_999), []);
});

Deno.test("heartbeat with GPUs updates health; allocated GPUs that go bad are reported and kept", () => {
  const store = storeWith("n1");
  store.allocate(request({ gpu_indices: [1, 0] }));
  const update = store.heartbeat("n1", 1_000, [
    gpu(0),
    gpu(1, ["2 uncorrected ECC errors"]),
    gpu(2),
  ]);
  assertEquals(update.allocated_gpu_problems, [{
    node: "n1",
    gpu_index: 1,
    replica_id: "r-1",
    shard_id: "r-1/0",
    problem: "unhealthy",
    message: "GPU 1 on node n1, held by shard r-1/0, is unhealthy: 2 uncorrected ECC errors",
  }]);
  assertEquals(store.getNode("n1")!.allocations[0].gpu_indices, [1, 0]);
  assertEquals(store.freeGpus("n1"), [2]);
  assertEquals(store.heartbeat("n1", 2_000).allocated_gpu_problems, []);
});

Deno.test("re-registration without an allocated GPU reports it missing and keeps the allocation", () => {
  const store = storeWith("n1");
  store.allocate(request({ replica_id: "r-7", shard_id: "0", gpu_indices: [3] }));
  const result = store.upsertNode(registration("n1", [gpu(0), gpu(1)]), 1_000);
  assertEquals(result.allocated_gpu_problems.map((p) => [p.gpu_index, p.problem, p.message]), [
    [3, "missing", "GPU 3 on node n1, held by shard r-7/0, is no longer reported"],
  ]);
  assertEquals(store.getNode("n1")!.allocations.length, 1);
  assertEquals(store.freeGpus("n1"), [0, 1]);
  assertThrows(() => store.allocate(request({ gpu_indices: [3] })), AllocationError, "no such GPU");
});

Deno.test("calls naming an unknown node throw UnknownNodeError and change nothing", () => {
  const store = storeWith("n1");
  const before = store.snapshot();
  const calls: [() => unknown, string][] = [
    [() => store.heartbeat("n9", 1), "Cannot heartbeat node n9: not registered"],
    [() => store.cordon("n9"), "Cannot cordon node n9: not registered"],
    [() => store.uncordon("n9"), "Cannot uncordon node n9: not registered"],
    [() => store.drain("n9"), "Cannot drain node n9: not registered"],
    [() => store.removeNode("n9"), "Cannot remove node n9: not registered"],
    [() => store.freeGpus("n9"), "Cannot list free GPUs of node n9: not registered"],
    [
      () => store.allocate(request({ node: "n9" })),
      "Cannot allocate shard r-1/0 on node n9: not registered",
    ],
  ];
  for (const [call, message] of calls) {
    const e = assertThrows(call, UnknownNodeError, message);
    assertEquals((e as UnknownNodeError).node, "n9");
  }
  assertEquals(store.snapshot(), before);
});

Deno.test("allocate refuses each bad request with its reason and changes nothing", () => {
  const store = new InventoryStore();
  store.upsertNode(registration("n1", [gpu(0), gpu(1), gpu(2, ["held by pid 4242"]), gpu(3)]), 0);
  store.upsertNode(registration("n2"), 0);
  store.allocate(request({ gpu_indices: [3] }));
  const cases: [Partial<AllocationRequest>, AllocationRefusal, string][] = [
    [{ replica_id: "" }, "empty-id", "Cannot allocate on node n1: empty replica id"],
    [{ shard_id: "" }, "empty-id", "Cannot allocate on node n1 for replica r-1: empty shard id"],
    [
      { shard_id: "1", gpu_indices: [] },
      "no-gpus",
      "Cannot allocate shard r-1/1 on node n1: no GPUs listed",
    ],
    [
      { node: "n2", gpu_indices: [0] },
      "duplicate-shard",
      "Cannot allocate shard r-1/0 on node n2: it already holds GPUs on node n1",
    ],
    [
      { shard_id: "1", gpu_indices: [7] },
      "unknown-gpu",
      "Cannot allocate GPU 7 on node n1: the node has no such GPU",
    ],
    [{ shard_id: "1", gpu_indices: [-1] }, "unknown-gpu", "GPU -1"],
    [{ shard_id: "1", gpu_indices: [0.5] }, "unknown-gpu", "GPU 0.5"],
    [
      { shard_id: "1", gpu_indices: [0, 0] },
      "duplicate-gpu",
      "Cannot allocate GPU 0 on node n1: listed twice for shard r-1/1",
    ],
    [
      { shard_id: "1", gpu_indices: [0, 2] },
      "unhealthy-gpu",
      "Cannot allocate GPU 2 on node n1: unhealthy (held by pid 4242)",
    ],
    [
      { replica_id: "r-2", shard_id: "r-2/0", gpu_indices: [1, 3] },
      "gpu-allocated",
      "Cannot allocate GPU 3 on node n1: already allocated to shard r-1/0",
    ],
  ];
  const before = store.snapshot();
  for (const [over, reason, message] of cases) {
    const e = assertThrows(() => store.allocate(request(over)), AllocationError, message);
    assertEquals((e as AllocationError).reason, reason, message);
    assertEquals(store.snapshot(), before, message);
    assertEquals(store.freeGpus("n1"), [0, 1], message);
  }
});

Deno.test("allocate records the allocation and the GPUs are no longer free", () => {
  const store = storeWith("n1");
  const a = store.allocate(request({ deployment: undefined, gpu_indices: [2, 0] }));
  assertEquals(a, {
    node: "n1",
    replica_id: "r-1",
    shard_id: "r-1/0",
    deployment: null,
    gpu_indices: [2, 0],
  });
  assertEquals(store.freeGpus("n1"), [1, 3]);
  assertEquals(store.snapshot()[0].allocations, [
    { replica_id: "r-1", shard_id: "r-1/0", deployment: null, gpu_indices: [2, 0] },
  ]);
});

Deno.test("the same shard id in different replicas is two shards", () => {
  const store = storeWith("n1");
  store.allocate(request({ replica_id: "r-1", shard_id: "0", gpu_indices: [0] }));
  store.allocate(request({ replica_id: "r-2", shard_id: "0", gpu_indices: [1] }));
  assertEquals(store.getNode("n1")!.allocations.map((a) => a.replica_id), ["r-1", "r-2"]);
});

Deno.test("releaseShard frees one shard; an unknown shard releases nothing", () => {
  const store = storeWith("n1");
  store.allocate(request({ shard_id: "r-1/0", gpu_indices: [0] }));
  store.allocate(request({ shard_id: "r-1/1", gpu_indices: [1] }));
  assertEquals(store.releaseShard("r-1", "r-1/0"), {
    node: "n1",
    replica_id: "r-1",
    shard_id: "r-1/0",
    deployment: "llama",
    gpu_indices: [0],
  });
  assertEquals(store.releaseShard("r-1", "r-1/0"), undefined);
  assertEquals(store.releaseShard("r-9", "r-1/1"), undefined);
  assertEquals(store.freeGpus("n1"), [0, 2, 3]);
  // The shard can be allocated again once released.
  store.allocate(request({ shard_id: "r-1/0", gpu_indices: [0] }));
});

Deno.test("releaseReplica frees every shard of the replica on every node, whole", () => {
  const store = storeWith("n1", "n2", "n10");
  store.allocate(request({ node: "n10", shard_id: "r-1/2", gpu_indices: [0] }));
  store.allocate(request({ node: "n2", shard_id: "r-1/1", gpu_indices: [0, 1] }));
  store.allocate(request({ node: "n1", shard_id: "r-1/0", gpu_indices: [0] }));
  store.allocate(request({ node: "n1", replica_id: "r-2", shard_id: "r-2/0", gpu_indices: [1] }));
  const released = store.releaseReplica("r-1");
  assertEquals(released.map((a) => [a.node, a.shard_id]), [
    ["n1", "r-1/0"],
    ["n2", "r-1/1"],
    ["n10", "r-1/2"],
  ]);
  assertEquals(store.releaseReplica("r-1"), []);
  assertEquals(store.snapshot().map((n) => n.allocations.map((a) => a.shard_id)), [
    ["r-2/0"],
    [],
    [],
  ]);
  assertEquals(store.freeGpus("n2"), [0, 1, 2, 3]);
});

Deno.test("removeNode returns its allocations and keeps the replica's other shards", () => {
  const store = storeWith("n1", "n2");
  store.allocate(request({ node: "n1", shard_id: "r-1/0", gpu_indices: [0] }));
  store.allocate(request({ node: "n2", shard_id: "r-1/1", gpu_indices: [0] }));
  const gone = store.removeNode("n1");
  assertEquals(gone.map((a) => [a.node, a.shard_id]), [["n1", "r-1/0"]]);
  assertEquals(store.getNode("n1"), undefined);
  assertEquals(store.listNodes().map((n) => n.id), ["n2"]);
  assertEquals(store.releaseReplica("r-1").map((a) => a.shard_id), ["r-1/1"]);
  // A node that registers again starts afresh, its old shards free to be placed anew.
  store.upsertNode(registration("n1"), 10);
  assertEquals(store.getNode("n1")!.allocations, []);
  store.allocate(request({ node: "n1", shard_id: "r-1/0", gpu_indices: [0] }));
});

Deno.test("freeGpus excludes allocated and unhealthy GPUs, ascending", () => {
  const store = new InventoryStore();
  store.upsertNode(registration("n1", [gpu(3), gpu(1, ["ECC"]), gpu(0), gpu(2)]), 0);
  assertEquals(store.freeGpus("n1"), [0, 2, 3]);
  store.allocate(request({ gpu_indices: [2] }));
  assertEquals(store.freeGpus("n1"), [0, 3]);
});

Deno.test("registrations and heartbeats with bad GPU lists are refused and change nothing", () => {
  const store = storeWith("n1");
  const before = store.listNodes();
  assertThrows(
    () => store.upsertNode(registration("n1", [gpu(0), gpu(0)]), 5),
    NodeReportError,
    "Cannot register node n1: GPU index 0 appears twice",
  );
  assertThrows(
    () => store.upsertNode(registration("n1", [gpu(-1)]), 5),
    NodeReportError,
    "GPU index -1 is not a non-negative integer",
  );
  assertThrows(() => store.upsertNode(registration(""), 5), NodeReportError, "empty id");
  assertThrows(
    () => store.heartbeat("n1", 5, [gpu(1), gpu(1)]),
    NodeReportError,
    "Cannot heartbeat node n1: GPU index 1 appears twice",
  );
  assertThrows(() => store.heartbeat("n1", Number.NaN), RangeError, "not a finite number");
  assertThrows(() => store.refresh(Infinity), RangeError, "not a finite number");
  assertEquals(store.listNodes(), before);
});

Deno.test("the store refuses unusable thresholds", () => {
  assertThrows(
    () => new InventoryStore({ thresholds: { lost_after_ms: 1_000 } }),
    LivenessThresholdsError,
    "lost_after_ms=1000",
  );
  assertEquals(new InventoryStore().thresholds.lost_after_ms, 60_000);
});

Deno.test("nothing handed in or out shares objects with the store", () => {
  const store = new InventoryStore();
  const reg = registration("n1");
  store.upsertNode(reg, 0);
  reg.gpus[0].health.problems.push("ECC");
  reg.labels.zone = "z";
  reg.gpus.pop();

  const req = request({ gpu_indices: [0] });
  const allocated = store.allocate(req);
  req.gpu_indices.push(1);
  allocated.gpu_indices.push(2);

  const node = store.getNode("n1")!;
  node.state = "lost";
  node.gpus[1].health.problems.push("ECC");
  node.allocations[0].gpu_indices.push(3);
  node.labels.zone = "y";
  node.engine_versions.vllm = "x";

  const snap = store.snapshot();
  snap[0].gpus.length = 0;
  snap[0].allocations.length = 0;
  store.listNodes()[0].fabrics[0].hcas.push("mlx5_9");
  store.cordon("n1").allocations.length = 0;
  store.heartbeat("n1", 1).node.gpus.length = 0;

  const hbGpus = [0, 1, 2, 3].map((i) => gpu(i));
  store.heartbeat("n1", 2, hbGpus);
  hbGpus[3].health.problems.push("ECC");
  store.thresholds.lost_after_ms = 1;

  const fresh = store.getNode("n1")!;
  assertEquals(fresh.labels, { zone: "a" });
  assertEquals(fresh.engine_versions, { vllm: "0.6.3" });
  assertEquals(fresh.fabrics[0].hcas, ["mlx5_0"]);
  assertEquals(fresh.state, "cordoned");
  assertEquals(fresh.gpus.length, 4);
  assertOk(fresh.gpus.every((g) => g.health.problems.length === 0));
  assertEquals(fresh.allocations, [
    { replica_id: "r-1", shard_id: "r-1/0", deployment: "llama", gpu_indices: [0] },
  ]);
  assertEquals(store.freeGpus("n1"), [1, 2, 3]);
  assertEquals(store.refresh(1_000), []);

  const released = store.releaseReplica("r-1");
  released[0].gpu_indices.push(9);
  assertEquals(store.freeGpus("n1"), [0, 1, 2, 3]);
});

Deno.test("peekNode shows what getNode shows placement, without liveness, and unknown ids as undefined", () => {
  const store = storeWith("n1");
  store.allocate(request());
  const copy = store.getNode("n1")!;
  const peek = store.peekNode("n1")!;
  const {
    liveness: _l,
    intent: _i,
    last_seen_ms: _s,
    agent_version: _a,
    engine_versions: _e,
    ...placementView
  } = copy;
  assertEquals({ ...peek }, placementView);
  assertEquals(store.peekNode("nope"), undefined);
});

Deno.test("a restored node shows when it was really last heard from; its liveness counts from the restore", () => {
  const store = new InventoryStore();
  // Restored at 1,000,000 from a record last heard from at 400,000.
  store.upsertNode(registration("n1"), 1_000_000);
  store.restoreLastSeen("n1", 400_000);
  store.restoreLastSeen("unknown", 1);
  assertEquals(store.getNode("n1")!.last_seen_ms, 400_000);
  assertEquals(store.lastHeard("n1"), 400_000);
  assertEquals(store.lastHeard("unknown"), undefined);
  // The whole window from the restore: still ready 14 s later, not lost at once.
  assertEquals(store.refresh(1_014_000), []);
  assertEquals(store.getNode("n1")!.state, "ready");
  // A later time never moves it forward; a heartbeat does.
  store.restoreLastSeen("n1", 900_000);
  assertEquals(store.getNode("n1")!.last_seen_ms, 400_000);
  store.heartbeat("n1", 1_060_000);
  assertEquals(store.getNode("n1")!.last_seen_ms, 1_060_000);
});
