/**
 * The dashboard's own script, hand-written: the replica page's log follows
 * its SSE stream (EventSource reconnects by itself, sending Last-Event-ID,
 * and the server sends only what came after it). Everything else is htmx.
 *
 * @module
 */

/** Lines kept in a page's log view; older ones are dropped from the page. */
export const MAX_LOG_VIEW_LINES = 5_000;

/** The script served at /ui/assets/app.js. */
export const APP_JS = `(function(){
"use strict";
function follow(pre){
  var status=document.getElementById(pre.getAttribute("data-status"));
  var es=new EventSource(pre.getAttribute("data-src"));
  function add(node){
    var end=pre.scrollTop+pre.clientHeight>=pre.scrollHeight-8;
    pre.appendChild(node);
    while(pre.childNodes.length>${MAX_LOG_VIEW_LINES})pre.removeChild(pre.firstChild);
    if(end)pre.scrollTop=pre.scrollHeight;
  }
  es.onmessage=function(e){
    var line=document.createElement("div");
    line.textContent=e.data;
    line.setAttribute("data-id",e.lastEventId);
    add(line);
  };
  es.addEventListener("gap",function(e){
    var s=document.createElement("div");s.className="gap";s.textContent="\\u2026 "+e.data;add(s);
  });
  es.addEventListener("status",function(e){if(status)status.textContent=e.data;});
  es.onerror=function(){if(status)status.textContent="reconnecting\\u2026";};
}
document.querySelectorAll("pre[data-src]").forEach(follow);
})();
`;
