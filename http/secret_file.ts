/**
 * Secrets kept in files readable by their owner only (0600): the agent's
 * tokens and each shard's engine key. Written atomically, so a crash never
 * leaves half a secret.
 *
 * @module
 */

/** Writes `text` to `path` with mode 0600, atomically. */
export function writeSecretFile(path: string, text: string): void {
  const tmp = `${path}.tmp-${crypto.randomUUID()}`;
  try {
    Deno.writeTextFileSync(tmp, text, { mode: 0o600 });
    Deno.chmodSync(tmp, 0o600); // mode is masked by the umask on creation
    Deno.renameSync(tmp, path);
  } catch (e) {
    try {
      Deno.removeSync(tmp);
    } catch {
      // Never written.
    }
    throw e;
  }
}

/** The secret kept in `path`, or null when there is none (or it is too short to be one). */
export function readSecretFile(path: string): string | null {
  try {
    const existing = Deno.readTextFileSync(path).trim();
    return existing.length >= 16 ? existing : null;
  } catch {
    return null;
  }
}

/** 32 random bytes, URL-safe base64 without padding: fits a Bearer header unquoted. */
export function randomSecret(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(32));
  return btoa(String.fromCharCode(...bytes)).replace(/\+/g, "-").replace(/\//g, "_")
    .replace(/=+$/, "");
}

/** A random secret kept in `path` (0600): read when there, else generated and written. */
export function loadOrCreateSecret(path: string): string {
  const existing = readSecretFile(path);
  if (existing !== null) return existing;
  const secret = randomSecret();
  writeSecretFile(path, secret + "\n");
  return secret;
}
