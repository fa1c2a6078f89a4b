import { assertEquals } from "../tests/assert.ts";
import { isProbeLine, probeLinesNote } from "./probe_lines.ts";

Deno.test("isProbeLine: the access lines of llmgw's probes, in each engine's real format", () => {
  const cases: [string, boolean][] = [
    // vLLM: uvicorn's default access format, with and without the V1 front end's prefix.
    ['INFO:     127.0.0.1:43210 - "GET /health HTTP/1.1" 200 OK', true],
    ['INFO:     127.0.0.1:43212 - "GET /v1/models HTTP/1.1" 200 OK', true],
    ['INFO:     127.0.0.1:43214 - "GET /metrics HTTP/1.1" 200 OK', true],
    ['(APIServer pid=34165) INFO:     127.0.0.1:54342 - "GET /health HTTP/1.1" 200 OK', true],
    ['(APIServer pid=34165) INFO:     127.0.0.1:54342 - "GET /metrics HTTP/1.1" 200 OK', true],
    ['INFO:     ::1:43210 - "GET /health HTTP/1.1" 200 OK', true],
    ['INFO:     127.0.0.1:43210 - "GET /metrics?name[]=x HTTP/1.1" 200 OK', true],
    // SGLang: a timestamp before the same.
    ['[2025-06-01 12:00:00] INFO:     127.0.0.1:43210 - "GET /health HTTP/1.1" 200 OK', true],
    ['[2025-06-01 12:00:05] INFO:     127.0.0.1:43216 - "GET /v1/models HTTP/1.1" 200 OK', true],
    // Failed probes stay: they may say why a shard is not ready.
    ['INFO:     127.0.0.1:43210 - "GET /health HTTP/1.1" 503 Service Unavailable', false],
    ['INFO:     127.0.0.1:43210 - "GET /v1/models HTTP/1.1" 401 Unauthorized', false],
    // Traffic and other paths stay.
    ['INFO:     127.0.0.1:43218 - "POST /v1/chat/completions HTTP/1.1" 200 OK', false],
    ['INFO:     127.0.0.1:43218 - "GET /v1/models/qwen HTTP/1.1" 200 OK', false],
    ['INFO:     127.0.0.1:43218 - "GET /healthz HTTP/1.1" 200 OK', false],
    ['INFO:     127.0.0.1:43218 - "GET /health_generate HTTP/1.1" 200 OK', false],
    ['[2025-06-01 12:00:00] INFO:     127.0.0.1:43210 - "POST /generate HTTP/1.1" 200 OK', false],
    // Engine messages that mention the paths are not access lines.
    ["INFO 05-11 17:59:14 [launcher.py:36] Route: /health, Methods: GET", false],
    [
      "(APIServer pid=34165) INFO 05-06 21:00:52 [launcher.py:46] Route: /metrics, Methods: GET",
      false,
    ],
    ['WARNING:  127.0.0.1:43210 - "GET /health HTTP/1.1" 200 OK', false],
    ['someone logged INFO:     127.0.0.1:1 - "GET /health HTTP/1.1" 200 OK', false],
    ["", false],
  ];
  for (const [line, want] of cases) assertEquals(isProbeLine(line), want, line);
});

Deno.test("probeLinesNote: nothing for none or an agent that does not say, else the count", () => {
  const cases: [number | null | undefined, string][] = [
    [undefined, ""],
    [null, ""],
    [0, ""],
    [1, "1 probe line hidden"],
    [240, "240 probe lines hidden"],
  ];
  for (const [n, want] of cases) assertEquals(probeLinesNote(n), want, String(n));
});
