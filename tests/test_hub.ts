/**
 * The model source of a test that runs real agents (`llmgw agent run`): every
 * agent fetches a hub model's files into its model cache before it starts
 * an engine (docs/models.md), and these machines reach no hub. A test names
 * the models its deployments use and passes {@link TestHub.env} to its
 * agents; the fake hub serves each as a small synthetic model with a real
 * `config.json` (dev/fake_hub/). Stop it with `await using`, or `stop()` in
 * a `finally`.
 *
 * @module
 */
import { startFakeHub } from "../dev/fake_hub/fake_hub_server.ts";
import { syntheticModel } from "../dev/fake_hub/synthetic_model.ts";

/** A fake hub serving a test's models on loopback. */
export interface TestHub extends AsyncDisposable {
  /** Its URL, as `HF_ENDPOINT` names it. */
  endpoint: string;
  /** The environment an agent (or control plane) needs to fetch from it. */
  env: { HF_ENDPOINT: string };
  /** Stops both of its listeners. */
  stop(): Promise<void>;
}

/** Starts a fake hub serving `repos` (`org/name` each) as 2-shard synthetic models of 64 KiB. */
export async function startTestHub(repos: readonly string[]): Promise<TestHub> {
  const models = await Promise.all(
    repos.map((repo) => syntheticModel({ repo, shards: 2, weightBytes: 64 * 1024 })),
  );
  const hub = startFakeHub({ repos: models });
  const stop = () => hub.stop();
  return {
    endpoint: hub.endpoint,
    env: { HF_ENDPOINT: hub.endpoint },
    stop,
    [Symbol.asyncDispose]: stop,
  };
}
