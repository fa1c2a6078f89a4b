/**
 * The dashboard's stylesheet, hand-written: a quiet light layout with one
 * accent, state colours that mean the same on every page, and GPU cells
 * small enough that eight of them fit beside a node's name.
 *
 * @module
 */

/** The stylesheet served at /ui/assets/app.css. */
export const APP_CSS = `
:root{--bg:#f5f6f8;--panel:#fff;--ink:#1d2330;--mute:#667085;--line:#e3e6eb;--accent:#3451b2;
--ok:#1a7f4b;--okb:#e3f4ea;--warn:#a15c00;--warnb:#fdf0dc;--bad:#b42318;--badb:#fde8e6;
--info:#3451b2;--infob:#e8edfb;--idle:#98a2b3;--idleb:#eef0f3;
font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--ink);background:var(--bg)}
*{box-sizing:border-box}body{margin:0}a{color:var(--accent);text-decoration:none}a:hover{text-decoration:underline}
header.top{display:flex;align-items:center;gap:24px;padding:0 24px;height:52px;background:#161b26;color:#e7eaf0}
header.top .brand{font-weight:700;letter-spacing:.02em;color:#fff}
header.top nav a{color:#c6ccd8;padding:15px 10px;display:inline-block;border-bottom:3px solid transparent}
header.top nav a.on{color:#fff;border-bottom-color:#7c93f0}header.top nav a:hover{text-decoration:none;color:#fff}
header.top .who{margin-left:auto;display:flex;gap:12px;align-items:center;color:#98a2b3;font-size:13px}
main{padding:20px 24px;max-width:1500px;margin:0 auto}
h1{font-size:20px;margin:0 0 14px}h2{font-size:15px;margin:22px 0 8px}
.panel{background:var(--panel);border:1px solid var(--line);border-radius:8px;padding:14px 16px;margin-bottom:16px}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(260px,1fr));gap:12px;margin-bottom:16px}
.card{background:var(--panel);border:1px solid var(--line);border-radius:8px;padding:12px 14px}
.card h3{margin:0 0 8px;font-size:12px;text-transform:uppercase;letter-spacing:.06em;color:var(--mute)}
.big{font-size:26px;font-weight:650}.mute{color:var(--mute)}.small{font-size:12px}
.chips{display:flex;flex-wrap:wrap;gap:6px}
.chip{display:inline-flex;gap:6px;align-items:center;padding:3px 9px;border-radius:999px;border:1px solid var(--line);background:#fff;color:var(--ink);font-size:12.5px}
.chip b{font-weight:650}.chip.on{border-color:var(--accent);background:var(--infob)}.chip:hover{text-decoration:none;border-color:var(--accent)}
.badge{display:inline-block;padding:1px 8px;border-radius:999px;font-size:12px;font-weight:600;white-space:nowrap}
.s-ready{color:var(--ok);background:var(--okb)}.s-loading,.s-starting{color:var(--info);background:var(--infob)}
.s-pending,.s-cordoned,.s-draining{color:var(--warn);background:var(--warnb)}
.s-failed,.s-lost,.s-unreachable{color:var(--bad);background:var(--badb)}.s-unknown{color:var(--mute);background:var(--idleb)}
table{border-collapse:collapse;width:100%}th,td{text-align:left;padding:7px 8px;border-bottom:1px solid var(--line);vertical-align:top}
th{font-size:12px;color:var(--mute);font-weight:600;text-transform:uppercase;letter-spacing:.04em}
tr.group td{background:#f0f2f6;font-weight:600;border-top:1px solid var(--line)}
.gpus{display:flex;flex-wrap:wrap;gap:3px;max-width:260px}
.g{width:22px;height:18px;border-radius:3px;display:inline-block;font:10px/18px ui-monospace,monospace;text-align:center;color:#fff}
.g.free{background:#cfd5df;color:#475467}.g.held{background:#3f62d8}.g.unhealthy{background:#d92d20}
.bar{height:6px;background:var(--idleb);border-radius:3px;overflow:hidden;min-width:80px}.bar i{display:block;height:100%;background:#3f62d8}
.bar.ok i{background:#2e9a62}
form.inline{display:inline}button,.btn{font:inherit;font-size:12.5px;padding:3px 10px;border-radius:6px;border:1px solid #c7ccd6;background:#fff;color:var(--ink);cursor:pointer}
button:hover{border-color:var(--accent)}button.danger{color:var(--bad);border-color:#f1b8b2}button.primary{background:var(--accent);border-color:var(--accent);color:#fff}
input,select{font:inherit;font-size:13px;padding:4px 8px;border:1px solid #c7ccd6;border-radius:6px;background:#fff}
.filters{display:flex;flex-wrap:wrap;gap:10px;align-items:center;margin-bottom:12px}
.pager{display:flex;gap:10px;align-items:center;margin-top:10px}
.problem{color:var(--bad);font-size:12.5px}.why{color:var(--mute);font-size:12.5px;max-width:560px}
pre.log{background:#10141c;color:#d7dce5;padding:12px 14px;border-radius:8px;max-height:520px;overflow:auto;font:12px/1.5 ui-monospace,Menlo,Consolas,monospace;margin:0;white-space:pre-wrap;word-break:break-all}
pre.log .gap{color:#f5b95b}pre.expl{background:#f7f8fa;border:1px solid var(--line);border-radius:8px;padding:10px 12px;font:12px/1.5 ui-monospace,monospace;white-space:pre-wrap;margin:0}
.grid2{display:grid;grid-template-columns:minmax(0,1fr) minmax(0,1fr);gap:16px}@media(max-width:1000px){.grid2{grid-template-columns:1fr}}
.deploy h2{margin:0;font-size:16px}.deploy .head{display:flex;gap:14px;align-items:center;flex-wrap:wrap;margin-bottom:10px}
.signin{max-width:420px;margin:80px auto}.signin input{width:100%;margin:8px 0 12px;padding:8px 10px}
.notice{padding:10px 12px;border-radius:8px;background:var(--badb);color:var(--bad);margin-bottom:12px}
.ok-note{padding:10px 12px;border-radius:8px;background:var(--okb);color:var(--ok);margin-bottom:12px}
dl.kv{display:grid;grid-template-columns:max-content 1fr;gap:4px 14px;margin:0}dl.kv dt{color:var(--mute)}dl.kv dd{margin:0}
.ev td{font-size:12.5px}.nowrap{white-space:nowrap}
`;
