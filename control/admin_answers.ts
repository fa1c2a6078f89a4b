/**
 * The control plane's answers are what protocol/admin_protocol.ts declares:
 * `deno check` fails here when a view, a stored record or a status drifts
 * from the schema `llmgw` parses it with. Types only; nothing runs.
 *
 * @module
 */
import type { z } from "zod";
import type { ApplyResult } from "./deployments.ts";
import type {
  ApplyAnswer,
  EventSchema,
  NodeSchema,
  ReplicaFailureSchema,
  ReplicaViewSchema,
  RevisionSchema,
  RolloutRecordSchema,
  RolloutStatusSchema,
  ShardViewSchema,
  StoredDeploymentSchema,
} from "../protocol/admin_protocol.ts";
import type { Assert, Same } from "../protocol/same_type.ts";
import type { InventoryNode } from "../inventory/node_record.ts";
import type { RolloutStatus } from "./rollout_status.ts";
import type {
  DeploymentRevision,
  EventRecord,
  ReplicaFailure,
  RolloutRecord,
  StoredDeployment,
} from "./store/store.ts";
import type { ReplicaView, ShardView } from "./views.ts";

/** `T` without the open schemas' index signatures: the fields they name. */
type Known<T> = T extends readonly (infer E)[] ? Known<E>[]
  : T extends object ? { [K in keyof T as string extends K ? never : K]: Known<T[K]> }
  : T;

/** `true` when every `A` has the fields an open schema `B` names, of its types. */
type Extends<A, B> = [A] extends [Known<B>] ? true : false;

type _ShardView = Assert<Same<z.output<typeof ShardViewSchema>, ShardView>>;
type _ReplicaView = Assert<Same<z.output<typeof ReplicaViewSchema>, ReplicaView>>;
type _ReplicaFailure = Assert<Same<z.output<typeof ReplicaFailureSchema>, ReplicaFailure>>;
type _Event = Assert<Same<z.output<typeof EventSchema>, EventRecord>>;
type _RolloutRecord = Assert<Same<z.output<typeof RolloutRecordSchema>, RolloutRecord>>;
type _RolloutStatus = Assert<Same<z.output<typeof RolloutStatusSchema>, RolloutStatus>>;
// Specs and nodes are open schemas (the fields llmgw reads): the stored types must satisfy them.
type _Revision = Assert<Extends<DeploymentRevision, z.output<typeof RevisionSchema>>>;
type _Deployment = Assert<Extends<StoredDeployment, z.output<typeof StoredDeploymentSchema>>>;
type _Apply = Assert<Extends<ApplyResult, z.output<typeof ApplyAnswer>>>;
type _Node = Assert<Extends<InventoryNode, z.output<typeof NodeSchema>>>;
