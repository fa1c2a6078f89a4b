/**
 * The fake hub's CDN, a second listener on its own port standing in for the
 * hub's LFS CDN (CloudFront over S3): `GET|HEAD /repos/{xx}/{sha256}` with a
 * signed, short-lived query; `Range` as S3 reads it. It refuses what the real
 * one refuses: a missing, wrong or expired signature (403 AccessDenied) and a
 * request that also carries `Authorization` (400: a signed URL is the only
 * credential S3 takes). Every CDN request with `Authorization` is counted.
 *
 * @module
 */
import { type Asker, rangeAnswer, smallBody } from "./fake_hub_answers.ts";
import { blobBySha, type FakeHubState } from "./fake_hub_state.ts";

function s3Error(
  state: FakeHubState,
  asker: Asker,
  status: number,
  code: string,
  message: string,
  head: boolean,
) {
  const xml =
    `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${code}</Code><Message>${message}</Message></Error>`;
  return new Response(head ? null : smallBody(state, asker, xml), {
    status,
    headers: { "Content-Type": "application/xml" },
  });
}

/** Answers one request to the CDN listener. */
export function handleCdn(state: FakeHubState, request: Request): Response {
  const url = new URL(request.url);
  const asker: Asker = { kind: "cdn", caller: request.headers.get("User-Agent") ?? "-" };
  const head = request.method === "HEAD";
  const withAuthorization = request.headers.has("Authorization");
  state.counters.request("cdn", asker.caller, withAuthorization);
  const m = url.pathname.match(/^\/repos\/[0-9a-f]{2}\/([0-9a-f]{64})$/);
  if ((request.method !== "GET" && !head) || m === null) {
    return s3Error(state, asker, 403, "AccessDenied", "Access Denied", head);
  }
  if (withAuthorization) {
    return s3Error(
      state,
      asker,
      400,
      "InvalidArgument",
      "Only one auth mechanism allowed; only the X-Amz-Algorithm query parameter, Signature query string parameter or the Authorization header should be specified",
      head,
    );
  }
  const why = state.signer.refusal(m[1], url.searchParams);
  if (why !== null) return s3Error(state, asker, 403, "AccessDenied", why, head);
  const file = blobBySha(state, m[1]);
  if (file === undefined) {
    return s3Error(state, asker, 404, "NoSuchKey", "The specified key does not exist.", head);
  }
  const disposition = url.searchParams.get("response-content-disposition") ?? "attachment";
  return rangeAnswer(state, asker, request, file.size, file.read, {
    ETag: `"${file.sha256}"`,
    "Content-Type": "binary/octet-stream",
    "Content-Disposition": disposition,
  });
}
