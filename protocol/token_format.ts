/**
 * The format of llmgw's access tokens (design §11.2), shared by the control
 * plane, which issues and checks them, and the agent, which reads the CA
 * hash a join token carries: `llmgw1.<id>.<secret>[.<ca-hash>]`.
 *
 * @module
 */

/** The parts of a token in llmgw's own format. */
export interface TokenParts {
  /** The id. */
  id: string;
  /** `llmgw1.<id>.<secret>`: what is hashed and matched. */
  credential: string;
  /** The CA public-key hash of a join token (hex), or null. */
  caHash: string | null;
}

const TOKEN_RE = /^llmgw1\.([0-9a-f]{8,32})\.([A-Za-z0-9_-]{20,128})(?:\.([0-9a-f]{64}))?$/;

/** Splits a token in llmgw's format; null for anything else (an operator's own string, say). */
export function tokenParts(token: string): TokenParts | null {
  const m = TOKEN_RE.exec(token);
  if (m === null) return null;
  return { id: m[1], credential: `llmgw1.${m[1]}.${m[2]}`, caHash: m[3] ?? null };
}
