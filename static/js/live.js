// A WebSocket that reconnects with exponential backoff and resumes where it left off:
// every (re)connection asks for ?after=<last round seen>, so the server sends only what is missing.
(function () {
  "use strict";
  const FORBIDDEN = 4403;

  function connect(opts) {
    let delay = 1000;
    let stopped = false;
    let socket = null;
    const state = (s) => opts.onState && opts.onState(s);

    function open() {
      const scheme = location.protocol === "https:" ? "wss:" : "ws:";
      const sep = opts.url.includes("?") ? "&" : "?";
      const after = opts.after ? `${sep}after=${opts.after()}` : "";
      socket = new WebSocket(`${scheme}//${location.host}${opts.url}${after}`);
      socket.onopen = () => { delay = 1000; state("live"); };
      socket.onmessage = (e) => {
        const ev = JSON.parse(e.data);
        // Rounds that came faster than a page draws arrive together (orchestrator/live/fanout.py).
        if (ev.type === "rounds") ev.rounds.forEach((round) => opts.onMessage(round));
        else opts.onMessage(ev);
      };
      socket.onclose = (e) => {
        if (stopped || e.code === FORBIDDEN) { state(stopped ? "closed" : "forbidden"); return; }
        state("down");
        setTimeout(open, delay + Math.random() * 300);
        delay = Math.min(delay * 2, 30000);
      };
    }
    open();
    return { close() { stopped = true; if (socket) socket.close(); } };
  }

  window.FedWebLive = { connect };
})();
