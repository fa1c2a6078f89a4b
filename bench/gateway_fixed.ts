/**
 * The gateway with a fixed endpoint table, for bench/gateway_vs_nginx.sh:
 * `deno run -A bench/gateway_fixed.ts PORT UPSTREAM_URL` (model "bench").
 */
import { EndpointTable } from "../gateway/endpoints.ts";
import { startGateway } from "../gateway/server.ts";

const [port, upstream] = Deno.args;
const table = new EndpointTable();
table.setEndpoints([{ model: "bench", replica_id: "bench-r0", url: upstream }], ["bench"]);
startGateway(table, { hostname: "127.0.0.1", port: Number(port) });
