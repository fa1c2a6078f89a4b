/**
 * Repos from a directory, for the fake hub as a program (`--models DIR`):
 * each `DIR/{org}/{name}/` is a repo with one commit of every file under it
 * (`.git` skipped), `main` pointing at it. Bytes are read from disk per
 * range; hashes are computed once, at load, by streaming each file.
 *
 * @module
 */
import { type FakeFile, fakeFile, type FakeRepo, fakeRepo, type ReadRange } from "./fake_repo.ts";

/** A directory the fake hub cannot serve. */
export class ModelsDirError extends Error {
  /** Builds one. */
  constructor(message: string) {
    super(message);
    this.name = "ModelsDirError";
  }
}

function readFromDisk(path: string): ReadRange {
  return async function* (start, end) {
    using file = await Deno.open(path);
    await file.seek(start, Deno.SeekMode.Start);
    let at = start;
    const buffer = new Uint8Array(256 * 1024);
    while (at < end) {
      const n = await file.read(buffer.subarray(0, Math.min(buffer.byteLength, end - at)));
      if (n === null) throw new Error(`${path} ended at byte ${at}, before ${end}`);
      yield buffer.slice(0, n);
      at += n;
    }
  };
}

async function filesUnder(root: string, prefix = ""): Promise<FakeFile[]> {
  const out: FakeFile[] = [];
  for await (const entry of Deno.readDir(prefix === "" ? root : `${root}/${prefix}`)) {
    if (entry.name === ".git") continue;
    const rel = prefix === "" ? entry.name : `${prefix}/${entry.name}`;
    if (entry.isDirectory) out.push(...await filesUnder(root, rel));
    else if (entry.isFile) {
      const { size } = await Deno.stat(`${root}/${rel}`);
      out.push(await fakeFile(rel, size, readFromDisk(`${root}/${rel}`)));
    }
  }
  return out;
}

/** Every `DIR/{org}/{name}/` as a repo. */
export async function reposFromDir(dir: string): Promise<FakeRepo[]> {
  const repos: FakeRepo[] = [];
  let orgs: Deno.DirEntry[];
  try {
    orgs = await Array.fromAsync(Deno.readDir(dir));
  } catch {
    throw new ModelsDirError(`Cannot read --models ${dir}: not a readable directory`);
  }
  for (const org of orgs.filter((e) => e.isDirectory)) {
    for await (const name of Deno.readDir(`${dir}/${org.name}`)) {
      if (!name.isDirectory) continue;
      const files = await filesUnder(`${dir}/${org.name}/${name.name}`);
      if (files.length > 0) repos.push(fakeRepo(`${org.name}/${name.name}`, files));
    }
  }
  if (repos.length === 0) {
    throw new ModelsDirError(
      `Cannot serve --models ${dir}: it has no {org}/{name}/ directory with files`,
    );
  }
  return repos.sort((a, b) => (a.id < b.id ? -1 : 1));
}
