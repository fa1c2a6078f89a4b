/**
 * Reading deployment files (design §6.1): YAML or JSON, through the one zod
 * schema, then design §6.2's validation. Every error names the field path.
 *
 * @module
 */
import { decodeDocuments, type DeploymentDocument, DocumentError } from "./documents.ts";
import { type Deployment, DeploymentSchema } from "./schema.ts";
import { isLocalModel, modelRevision } from "./model_revision.ts";
import { formatIssues, zodIssues } from "../validation/issues.ts";
import {
  type DeploymentIssue,
  resolveGpusPerNode,
  validateDeployment,
  type ValidateOptions,
} from "./validate.ts";

/** Raised for a deployment that cannot be used; `issues` lists every problem found. */
export class DeploymentError extends Error {
  /** Each problem with its field path. */
  readonly issues: DeploymentIssue[];
  /** Creates the error; the message lists the issues, one per line. */
  constructor(where: string, issues: DeploymentIssue[]) {
    super(
      `Cannot use deployment ${where}:\n${formatIssues(issues)}`,
    );
    this.name = "DeploymentError";
    this.issues = issues;
  }
}

/** A deployment that passed the schema and validation, with warnings to show. */
export interface LoadedDeployment {
  /** The deployment with defaults applied. */
  deployment: Deployment;
  /** Problems that do not block it. */
  warnings: DeploymentIssue[];
}

/**
 * Parses one deployment from text, read as `llmgw apply` reads it
 * (deployment/documents.ts): JSON when `where` ends in `.json`, otherwise
 * YAML, which reads JSON text too. The text must hold exactly one deployment.
 *
 * @throws {DeploymentError} Naming every bad field with its path.
 */
export function parseDeploymentText(
  text: string,
  where: string,
  options: ValidateOptions = {},
): LoadedDeployment {
  let docs: DeploymentDocument[];
  try {
    docs = decodeDocuments(text, where);
  } catch (e) {
    if (!(e instanceof DocumentError)) throw e;
    // "FILE (document 2)" names the document; the path names the file already.
    const document = /^ \((document \d+)\)$/.exec(e.source.slice(where.length))?.[1];
    const message = document === undefined ? e.reason : `${document} is ${e.reason}`;
    throw new DeploymentError(where, [{ path: [], message }]);
  }
  if (docs.length !== 1) {
    const message = docs.length === 0
      ? "holds no deployment"
      : `holds ${docs.length} deployments; give one per file`;
    throw new DeploymentError(where, [{ path: [], message }]);
  }
  return parseDeployment(docs[0].doc, where, options);
}

/**
 * Checks an already-decoded document (from a file or an API body).
 *
 * @throws {DeploymentError} Naming every bad field with its path.
 */
export function parseDeployment(
  raw: unknown,
  where: string,
  options: ValidateOptions = {},
): LoadedDeployment {
  const deployment = withDefaults(raw, where);
  const { errors, warnings } = validateDeployment(deployment, options);
  if (errors.length > 0) throw new DeploymentError(where, errors);
  return { deployment, warnings };
}

/**
 * The schema alone, with every default applied (`served_model_name`,
 * `gpus_per_node`, …) and none of design §6.2's rules: what a stored spec
 * is read back through before two specs are compared (deployment/canonical.ts).
 *
 * @throws {DeploymentError} Naming every bad field with its path.
 */
export function withDefaults(raw: unknown, where: string): Deployment {
  const parsed = DeploymentSchema.safeParse(raw);
  if (!parsed.success) throw new DeploymentError(where, zodIssues(parsed.error));
  const issues: DeploymentIssue[] = [];
  const profiles = parsed.data.profiles.map((p, i) => {
    const gpusPerNode = resolveGpusPerNode(p);
    if (gpusPerNode === null) {
      issues.push({
        path: ["profiles", i, "gpus_per_node"],
        message:
          `profile "${p.name}": not given, and tensor_parallel × pipeline_parallel (${p.tensor_parallel} × ${p.pipeline_parallel}) does not divide evenly over ${p.nodes} nodes`,
      });
    }
    return { ...p, engine_options: p.engine_options ?? {}, gpus_per_node: gpusPerNode ?? 0 };
  });
  const { model, revision } = parsed.data;
  if (revision !== undefined && isLocalModel(model)) {
    issues.push({
      path: ["revision"],
      message:
        `a local path model (${model}) takes no revision: its files are used as they are; remove revision or name a hub model`,
    });
  }
  if (issues.length > 0) throw new DeploymentError(where, issues);
  const { revision: _given, ...rest } = parsed.data;
  const read = modelRevision(model, revision);
  return {
    ...rest,
    ...(read === undefined ? {} : { revision: read }),
    served_model_name: parsed.data.served_model_name ?? parsed.data.name,
    profiles,
  };
}
