/**
 * A tiny HTTP server for lab tests: `hello_server.ts HOST PORT TEXT` answers
 * every request with 200 and TEXT, and prints "listening on HOST:PORT" once
 * it accepts connections. Run inside a lab host with
 * `deno run --allow-net hello_server.ts …`.
 *
 * @module
 */

if (import.meta.main) {
  const [hostname, portText, text, ...rest] = Deno.args;
  const port = Number(portText);
  if (hostname === undefined || text === undefined || rest.length > 0) {
    console.error("usage: hello_server.ts HOST PORT TEXT");
    Deno.exit(2);
  }
  if (!Number.isInteger(port) || port < 1 || port > 65535) {
    console.error(
      `Cannot start hello_server: port must be 1…65535, got ${JSON.stringify(portText)}`,
    );
    Deno.exit(2);
  }
  Deno.serve({
    hostname,
    port,
    onListen: ({ hostname, port }) => console.log(`listening on ${hostname}:${port}`),
  }, () => new Response(text));
}
