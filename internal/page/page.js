'use strict';
// Renders the view JSON (summary.View) into the page. Every string from the data goes
// into the DOM as text (textContent), into charts drawn on canvas, or into tooltips
// rendered as rich text on the canvas: never as markup.
(function () {
  const errors = document.getElementById('page-errors');
  function pageError(msg) { errors.hidden = false; errors.textContent += msg + '\n'; }
  window.addEventListener('error', (e) => pageError(String(e.message)));
  window.addEventListener('unhandledrejection', (e) => pageError(String(e.reason)));

  let view = JSON.parse(document.getElementById('profinfer-data').textContent);
  let selected = null;
  let charts = [];
  let paused = false; // live: the user holds the page still to zoom or read
  let resourceOpen = false;
  // live: the compare view (comparelive.js) instead of a process; a link opens it (#compare)
  let comparing = window.PROFINFER_LIVE && /^#compare/.test(location.hash);

  function el(tag, cls, ...children) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    for (const c of children) {
      if (c === null || c === undefined) continue;
      e.append(typeof c === 'string' || typeof c === 'number' ? document.createTextNode(String(c)) : c);
    }
    return e;
  }
  function section(title, id) {
    const s = el('section', null, el('h2', null, title));
    if (id) s.id = id;
    return s;
  }
  const num = (x, d) => (x === undefined || x === null || !isFinite(x)) ? '–' : x.toFixed(d);
  const pct = (x) => num(100 * x, 1) + '%';
  function si(x, unit) {
    if (!x) return '–';
    const steps = [[1e12, 'T'], [1e9, 'G'], [1e6, 'M'], [1e3, 'k']];
    for (const [v, p] of steps) if (Math.abs(x) >= v) return (x / v).toFixed(1) + ' ' + p + unit;
    return x.toFixed(1) + ' ' + unit;
  }
  // rate names an op's achieved rate against the roof that bounds it, as the terminal report does.
  function rate(o) {
    if (!o.roof) return '–';
    const r = o.roof === 'compute' ? si(o.flops_per_second, 'FLOP/s') : si(o.bytes_per_second, 'B/s');
    return o.peak_fraction ? r + ' (' + pct(o.peak_fraction) + ' of roof)' : r;
  }
  // verdict is an op's bound, with what it stands on (or lacks) on hover.
  function verdict(o) {
    const text = o.bound || (o.why && o.why.startsWith('not judged') ? 'not judged' : '–');
    const v = el('span', 'bound-' + (o.bound || 'none'), text);
    if (o.why) v.title = o.why;
    return v;
  }
  function chart(container, option, cls) {
    const div = el('div', 'chart' + (cls ? ' ' + cls : ''));
    container.append(div);
    // Charts render after the div is in the document, so that it has a size.
    requestAnimationFrame(() => {
      const c = echarts.init(div, null, { renderer: 'canvas' });
      c.setOption(Object.assign({ animation: false, tooltip: { renderMode: 'richText' } }, option));
      charts.push(c);
    });
  }
  function table(headers, rows, id) {
    const t = el('table');
    if (id) t.id = id;
    const head = el('tr');
    for (const h of headers) head.append(el('th', null, h));
    t.append(el('thead', null, head));
    const body = el('tbody');
    for (const r of rows) {
      const tr = el('tr');
      for (const c of r) tr.append(c instanceof Node ? el('td', null, c) : el('td', null, String(c)));
      body.append(tr);
    }
    t.append(body);
    return t;
  }
  function tile(value, label) { return el('div', 'tile', el('b', null, value), el('span', null, label)); }

  // Backends as a person reads them: ggml names each by its functions' prefix
  // (ggml_backend_vk_…), which the data keeps.
  const backendNames = { VK: 'Vulkan' };
  const backendName = (b) => backendNames[b] || b;

  function pidOf(p) { return ((p.resource || []).find((a) => a.k === 'process.pid') || {}).v; }

  // The process a link names (#pid=1234), shown first.
  function linked() { const m = /(?:^#|&)pid=(\d+)/.exec(location.hash); return m && m[1]; }

  function render() {
    const scroll = window.scrollY;
    requestAnimationFrame(() => requestAnimationFrame(() => window.scrollTo(0, scroll)));
    for (const c of charts) c.dispose();
    charts = [];
    document.getElementById('generated').textContent = 'updated ' + new Date(view.generated).toLocaleString() + (window.PROFINFER_LIVE ? ' · live' : '');
    const procs = view.processes || [];
    const nav = document.getElementById('processes');
    nav.replaceChildren();
    if (!procs.some((p) => p.id === selected)) selected = (procs.find((p) => pidOf(p) === linked()) || procs[0] || {}).id || null;
    for (const p of procs) {
      const b = el('button', p.id === selected && !comparing ? 'active' : null, p.title + (p.model ? ' · ' + p.model : ''));
      b.addEventListener('click', () => { selected = p.id; comparing = false; history.replaceState(null, '', '#pid=' + pidOf(p)); render(); });
      nav.append(b);
    }
    const main = document.getElementById('main');
    if (window.PROFINFER_LIVE && procs.length) {
      const b = el('button', comparing ? 'active' : null, 'compare');
      b.id = 'compare-button';
      b.addEventListener('click', () => { comparing = true; history.replaceState(null, '', '#compare'); render(); });
      nav.append(b);
    }
    if (comparing && procs.length) {
      window.profinferCompareLive.show(main, procs);
      return;
    }
    main.replaceChildren();
    const p = procs.find((x) => x.id === selected);
    if (!p) {
      main.append(el('p', 'empty', 'No profiled process yet: start a GGML runtime (llama.cpp\'s llama-server, llama-cli or llama-bench, Ollama, whisper.cpp, a binding) and its work appears here.'));
      return;
    }
    renderProcess(main, p);
  }

  // What each runtime calls its steps and phases, for the words around the figures.
  const runtimes = {
    'llama.cpp': { step: 'llama_decode calls' },
    'ollama': { step: 'llama_decode calls or forward batches' },
    'whisper.cpp': { step: 'passes', speech: true },
    'ggml': { step: 'scheduler computations' },
  };
  function runtimeOf(p) { return runtimes[p.runtime] || runtimes['llama.cpp']; }
  // The heading of a phase's section: what one unit of it is.
  function phaseTitle(p, name) {
    if (name === 'outside decode') return 'graphs outside ' + (p.runtime === 'llama.cpp' || !p.runtime ? 'llama_decode' : 'a step');
    if (name === 'encode') return 'an encoder pass';
    if (name === 'decode' && runtimeOf(p).speech) return 'a decoder pass';
    if (name === 'compute') return 'a scheduler computation';
    if (name === 'mixed') return 'a mixed decode (a prompt beside other sequences\' next tokens)';
    return 'a ' + name + ' token';
  }

  // lead is where a token's time went in a process that offloads, backend by backend, in
  // seconds a token, as summary.LeadOf computes it for the text report; null where the
  // process computes on the CPU alone. The backends' sums cover every phase.
  function lead(p) {
    const bs = p.backends || [];
    if (!bs.some((b) => b.backend !== 'CPU' && b.splits > 0)) return null;
    const tokens = (p.phases || []).reduce((a, ph) => a + ph.tokens, 0);
    const steps = (p.phases || []).reduce((a, ph) => a + ph.decodes, 0);
    const l = { per: tokens || steps, unit: tokens ? 'token' : 'step', steps, parts: [] };
    if (!l.per) return null;
    const part = (name) => {
      let t = l.parts.find((x) => x.backend === name);
      if (!t) l.parts.push(t = { backend: name, splits: 0, compute: 0, handover: 0, copies: 0, copyBytes: 0, device: 0, wait: 0, seenDone: 0 });
      return t;
    };
    for (const b of bs) {
      const t = part(b.backend);
      t.splits = b.splits;
      if (b.backend === 'CPU') {
        t.compute = b.seconds / l.per;
        continue;
      }
      t.handover = b.seconds / l.per;
      if (b.device_splits) { // the mean of the splits seen done, times all
        const all = b.splits / b.device_splits / l.per;
        t.device = b.device_seconds * all;
        t.wait = (b.wait_seconds || 0) * all;
        t.seenDone = b.device_splits;
      }
    }
    for (const c of p.copies || []) { // a copy is its device end's
      const t = part(c.destination === 'CPU' ? c.source : c.destination);
      t.copies += c.seconds / l.per;
      t.copyBytes += c.bytes / l.per;
    }
    const time = (t) => t.compute + (t.seenDone ? t.device : t.handover) + t.copies;
    const sum = l.parts.reduce((a, t) => a + time(t), 0);
    for (const t of l.parts) t.share = sum ? time(t) / sum : 0;
    l.parts.sort((x, y) => y.share - x.share);
    return l;
  }

  function renderProcess(main, p) {
    const head = section(p.title, 'process');
    if (p.runtime) head.append(el('p', null, 'Runtime: ', el('b', 'runtime', p.runtime)));
    if (p.model) head.append(el('p', null, 'Model: ', el('b', 'model-name', p.model)));
    // How it ended, as the kernel gave it: what is below is what it computed by then.
    if (p.end) head.append(el('p', p.end.failed ? 'ended failed' : 'ended', 'Ended: ', el('b', 'end', p.end.text)));
    const kv = el('div', 'kv');
    for (const a of p.resource || []) kv.append(el('div', null, a.k + ' = ', el('code', null, a.v)));
    const details = el('details', null, el('summary', null, 'Resource attributes'), kv);
    details.open = resourceOpen;
    details.addEventListener('toggle', () => { resourceOpen = details.open; });
    head.append(details);
    main.append(head);
    const l = lead(p);
    if (l) renderLead(main, p, l);

    const fs = section('Findings: what to change', 'findings');
    if (!p.findings.length) fs.append(el('p', 'empty', 'No rule fired: nothing stands out in the measured figures.'));
    for (const f of p.findings) {
      const ul = el('ul');
      for (const e of f.evidence) ul.append(el('li', null, e));
      fs.append(el('div', 'finding ' + f.severity, el('h3', null, f.title), el('p', null, f.advice), ul));
      fs.lastChild.dataset.rule = f.id;
    }
    main.append(fs);

    if (runtimeOf(p).speech) renderSpeech(main, p);
    else renderThroughput(main, p);
    renderServing(main, p);
    for (const ph of p.phases || []) renderPhase(main, p, ph, !!l);
    renderRoofline(main, p, !!l);
    renderTimeline(main, p);
    renderMoE(main, p);
    renderBackends(main, p);
    renderSched(main, p);
  }

  // renderLead opens a process that offloads: each backend's part of a token, and what
  // each computed.
  function renderLead(main, p, l) {
    const s = section('Where a ' + l.unit + '\'s time went, by backend', 'lead');
    const phases = (p.phases || []).filter((ph) => ph.decodes).map((ph) => ph.name).join(' and ');
    const tiles = el('div', 'tiles');
    for (const t of l.parts) {
      const x = tile(pct(t.share), backendName(t.backend) + ': ' + (t.backend === 'CPU' ? 'the CPU computing' : t.seenDone ? 'its device, from handing over to done' : 'the CPU handing it work'));
      x.dataset.backend = t.backend;
      tiles.append(x);
    }
    s.append(tiles);
    const ms = (x) => x ? num(x * 1e3, 3) : '–';
    s.append(el('p', null, 'Milliseconds a ' + l.unit + ', over ' + l.per + ' ' + l.unit + 's in ' + l.steps + ' ' + runtimeOf(p).step + ' (' + phases + '). ' +
      'A device\'s time runs from each handing over until the CPU saw the work done, the CPU\'s wait included: the device\'s own is at most that. ' +
      'Each share is of the parts summed.'));
    const rows = l.parts.map((t) => [backendName(t.backend), pct(t.share), ms(t.compute), ms(t.handover), ms(t.copies), ms(t.device), ms(t.wait), t.splits]);
    const tbl = table(['backend', 'share', 'CPU computing', 'CPU handing over', 'copies', 'device, at most', 'CPU waiting', 'splits'], rows, 'lead-table');
    tbl.querySelectorAll('tbody tr').forEach((tr, i) => { tr.dataset.backend = l.parts[i].backend; });
    s.append(tbl);
    for (const t of l.parts) {
      const name = backendName(t.backend);
      if (t.backend === 'CPU') {
        for (const ph of (p.phases || []).filter((x) => (x.ops || []).length)) {
          s.append(el('p', 'lead-ops', 'On the CPU, ' + ph.name + ': ' + ph.ops.slice(0, 6).map((o) => o.op + (o.weight !== 'none' ? ' ' + o.weight : '') + ' ' + pct(o.share)).join(', ') +
            ' of its graph time (the CPU\'s part, below).'));
        }
        continue;
      }
      const b = (p.backends || []).find((x) => x.backend === t.backend) || {};
      const ops = Object.keys(b.ops || {});
      const secs = b.op_seconds || {};
      const timed = Object.values(secs).reduce((x, y) => x + y, 0);
      ops.sort((x, y) => (secs[y] || 0) - (secs[x] || 0) || b.ops[y] - b.ops[x] || (x < y ? -1 : x > y ? 1 : 0));
      const named = ops.slice(0, 6).map((op) => secs[op] !== undefined && timed ? op + ' ' + pct(secs[op] / timed) + ' (' + b.ops[op] + ' nodes)' : op + ' ' + b.ops[op] + ' nodes');
      if (ops.length > named.length) named.push((ops.length - named.length) + ' more');
      s.append(el('p', 'lead-ops', 'On ' + name + ': ' + (named.length ? named.join(', ') + (timed ? ' of the time the device timed.' : ', read from its splits (the device timed none of them).') : 'no node read from its splits.') +
        (t.seenDone && t.seenDone < t.splits ? ' Its device time is the mean of the ' + t.seenDone + ' of ' + t.splits + ' splits seen done.' : '') +
        (!t.seenDone && t.splits ? ' No split seen done: its part is the CPU\'s handing the work over alone.' : '') +
        (t.copyBytes ? ' Copies to and from it: ' + si(t.copyBytes, 'B') + ' a ' + l.unit + '.' : '')));
    }
    main.append(s);
  }

  function phaseOf(p, name) { return (p.phases || []).find((x) => x.name === name); }

  // A speech runtime's figures: its transcriptions, how much faster than real time, and
  // the encoder's and decoder's shares.
  function renderSpeech(main, p) {
    const s = section('Transcriptions: real-time factor, encoder and decoder', 'speech');
    const j = p.jobs;
    if (!j) {
      s.append(el('p', 'empty', 'No transcription finished yet.'));
      main.append(s);
      return;
    }
    const tiles = el('div', 'tiles');
    tiles.append(tile(String(j.count), 'transcriptions of ' + num(j.audio_seconds, 1) + ' s of audio in ' + num(j.seconds, 1) + ' s'),
      tile(num(j.rtf.p50, 2), 'real-time factor p50 (time over audio; under 1 is faster than real time)'), tile(num(j.rtf.p90, 2), 'p90'),
      tile(num(j.encode_seconds / j.count, 2) + ' s', 'encoder per transcription, ' + j.encode_passes + ' passes'),
      tile(num(j.decode_seconds / j.count, 2) + ' s', 'decoder per transcription, ' + j.decode_passes + ' passes'));
    cpuTiles(tiles, p);
    s.append(tiles);
    main.append(s);
  }

  // The graphs left out of a share: they ran beside the collector's own work.
  function perturbed(c) {
    return c.perturbed ? ' (' + c.perturbed + ' left out: they ran while profinfer attached or placed probes)' : '';
  }

  // What starved threads lacked their CPUs for.
  const lacked = { cpu: 'waiting for a CPU', disk: 'waiting for the disk', blocked: 'asleep' };

  // cpuShare is a phase's threads' share of a CPU as a phrase, or why it is no verdict.
  function cpuShare(c) {
    if (!c.judged) return 'threads on a CPU ' + (c.thin || 'not judged');
    return 'threads on a CPU ' + pct(c.share) + ' of graph time' + (c.starved ? ' (starved, ' + lacked[c.lacked] + ': ops are judged by that, not by their wall time)' : '') + perturbed(c);
  }

  // Whether the model's threads had their CPUs: the machine, not the model, may be the bottleneck.
  function cpuTiles(tiles, p) {
    for (const ph of p.phases || []) {
      if (!ph.cpu) continue;
      if (!ph.cpu.judged) {
        tiles.append(tile('–', ph.name + ' threads on a CPU: ' + (ph.cpu.thin || 'not judged')));
        continue;
      }
      const t = tile(pct(ph.cpu.share), ph.name + ' threads on a CPU, of ' + ph.cpu.graphs + ' graphs\' time' + (ph.cpu.starved ? ': starved, ' + lacked[ph.cpu.lacked] : '') + perturbed(ph.cpu));
      t.dataset.oncpu = ph.name;
      if (ph.cpu.starved) t.classList.add('starved');
      tiles.append(t);
    }
  }

  function renderThroughput(main, p) {
    const s = section(p.requests ? 'Tokens per second, decode latency and requests' : 'Tokens per second and decode latency', 'throughput');
    const tiles = el('div', 'tiles');
    for (const name of ['prefill', 'decode']) {
      const ph = phaseOf(p, name);
      if (ph) tiles.append(tile(num(ph.tokens_per_second, 1), name + ' tokens/s over ' + ph.decodes + ' ' + runtimeOf(p).step));
    }
    cpuTiles(tiles, p);
    const q = p.quota;
    if (q) {
      const t = tile(num(q.cpus, 2) + ' CPUs', 'cgroup quota of ' + q.cgroup + (q.threads ? ' for ' + q.threads + ' threads' : '') +
        (q.periods ? '; throttled in ' + pct(q.throttled / q.periods) + ' of periods, ' + num(q.throttled_seconds, 1) + ' s' + (q.since_made ? ' since the cgroup was made' : '') : ''));
      t.dataset.quota = '';
      if (q.threads > q.cpus || (q.periods && q.throttled / q.periods >= 0.1)) t.classList.add('starved');
      tiles.append(t);
    }
    const l = p.latency;
    if (l.count) {
      tiles.append(tile(num(l.p50, 1) + ' ms', 'decode latency p50'), tile(num(l.p90, 1) + ' ms', 'p90'),
        tile(num(l.p99, 1) + ' ms', 'p99'), tile(num(l.max, 1) + ' ms', 'max, of ' + l.count + ' decodes'));
    }
    s.append(tiles);
    const r = p.requests;
    if (r) {
      const req = el('div', 'tiles');
      req.append(tile(num(r.ttft.p50, 1) + ' ms', 'time to first token p50, of ' + r.count + ' requests'),
        tile(num(r.ttft.p90, 1) + ' ms', 'p90'), tile(num(r.tpot.p50, 1) + ' ms', 'per output token p50'),
        tile(num(r.tpot.p90, 1) + ' ms', 'p90'),
        tile(num(100 * r.cached / Math.max(1, r.input + r.cached), 0) + '%', 'prompt tokens from the cache'),
        tile(String(r.max_shared + 1), 'most sequences in one decode'));
      if (r.wait) {
        req.append(tile(num(r.wait.p50, 1) + ' ms', 'wait before the first decode p50, of ' + r.wait.count + ' arrivals seen'),
          tile(num(r.wait.p90, 1) + ' ms', 'p90'));
      }
      s.append(req);
    }
    if ((p.rate || []).length > 1) {
      const xs = p.rate.map((r) => r.t * 1000);
      chart(s, {
        legend: {}, grid: { left: 50, right: 20, top: 30, bottom: 30 },
        xAxis: { type: 'time' }, yAxis: { type: 'value', name: 'tokens/s' },
        tooltip: { trigger: 'axis', renderMode: 'richText' },
        series: ['prefill', 'decode'].map((k) => ({ name: k, type: 'line', showSymbol: false, data: p.rate.map((r, i) => [xs[i], r[k]]) })),
      });
    }
    main.append(s);
  }

  // A server's slots computed together: the sequences a decode carried, decode steps by
  // width against a step of one, the KV cells in use, each request's gaps between its
  // tokens and where its latency went. Only where a decode carried several sequences.
  const shareNames = {
    wait: 'waiting for a slot', prompt: 'its prompt', alone: 'its next token alone',
    batched: 'beside other sequences\' next tokens', mixed: 'beside other requests\' prompts',
    other_prompts: 'other requests\' prompts without it', other_decodes: 'other sequences\' next tokens without it',
    between: 'between decodes (sampling, grammar, sending)',
  };
  function renderServing(main, p) {
    const sv = p.serving;
    if (!sv || sv.max_sequences < 2) return;
    const s = section('Serving: the slots together', 'serving');
    const tiles = el('div', 'tiles');
    tiles.append(tile(num(sv.sequences / sv.steps, 1), 'sequences a decode on average, ' + sv.max_sequences + ' at most' + (sv.slots ? ', of ' + sv.slots + ' slots' : '')));
    if (sv.next_tokens_per_second) tiles.append(tile(num(sv.next_tokens_per_second, 1), 'next tokens a second of decoding, summed over the sequences'));
    if (sv.kv_cells) {
      tiles.append(tile(sv.context ? pct(sv.kv_cells / sv.context) : String(sv.kv_cells), 'KV cells in use at most: ' + sv.kv_cells + (sv.context ? ' of ' + sv.context : '')));
      if (sv.seq_context && sv.seq_context < sv.context) {
        tiles.append(tile(pct(sv.kv_seq_cells / sv.seq_context), 'one sequence\'s cells at most: ' + sv.kv_seq_cells + ' of its slot\'s ' + sv.seq_context));
      }
    }
    const r = p.requests;
    if (r && r.gap_median && r.gap_median.count) {
      tiles.append(tile(num(r.gap_median.p50, 1) + ' ms', 'a request\'s median gap between tokens, p50'),
        tile(num(r.gap_max.p50, 1) + ' ms', 'its longest gap, p50; at most ' + num(r.gap_max.max, 1) + ' ms'));
      if (r.stalled) {
        const t = tile(String(r.stalled), 'requests stalled ' + r.stall_ratio + '× their median or more by other requests\' prompts');
        t.classList.add('starved');
        tiles.append(t);
      }
    }
    if (r && r.full) tiles.append(tile(String(r.full), 'requests reached their context' + (r.truncated ? ', ' + r.truncated + ' cut there' : '') + (r.shifts ? '; ' + r.shifts + ' context shifts' : '')));
    s.append(tiles);
    const dec = phaseOf(p, 'decode');
    if (dec && (dec.widths || []).some((w) => w.width !== '1')) {
      s.append(el('p', null, 'Decode steps by the sequences each carried, each against a step of one sequence: what batching buys on this machine and build.'));
      s.append(table(['sequences a step', 'steps', 'step p50 ms', 'step p90 ms', 'a token ms', 'cost against one', 'tokens/s against one'],
        dec.widths.map((w) => [w.width, w.steps, num(w.step_ms.p50, 1), num(w.step_ms.p90, 1), num(w.token_ms, 1),
          w.cost ? num(w.cost, 2) + '×' : '–', w.gain ? num(w.gain, 2) + '×' : '–']), 'widths'));
    }
    if (r && (r.time || []).length && r.latency_seconds) {
      s.append(el('p', null, 'Where the requests\' latency went, ' + num(r.latency_seconds, 2) + ' s in all:'));
      s.append(table(['share', 'seconds', '% of latency'], r.time.filter((t) => t.seconds > 0).map((t) =>
        [shareNames[t.name] || t.name, num(t.seconds, 3), pct(t.seconds / r.latency_seconds)]), 'latency-shares'));
    }
    const rate = (p.rate || []).filter((x) => x.steps);
    if (rate.length > 1) {
      const xs = rate.map((x) => x.t * 1000);
      chart(s, {
        legend: {}, grid: { left: 50, right: 60, top: 30, bottom: 30 },
        xAxis: { type: 'time' },
        yAxis: [{ type: 'value', name: 'sequences a decode' }, { type: 'value', name: 'KV cells' }],
        tooltip: { trigger: 'axis', renderMode: 'richText' },
        series: [
          { name: 'sequences a decode', type: 'line', showSymbol: false, data: rate.map((x, i) => [xs[i], x.sequences / x.steps]) },
          { name: 'KV cells in use', type: 'line', yAxisIndex: 1, showSymbol: false, data: rate.map((x, i) => [xs[i], x.kv_cells || 0]) },
        ],
      });
    }
    main.append(s);
  }

  // What a phase with no graph traced node by node waits for: the next sampling window,
  // which its next graph brings forward unless the phase had its windows already.
  function waitingFor(p, ph) {
    const what = 'No ' + ph.name + ' graph traced node by node yet: ';
    if (!p.next_window) return what + 'node tracing is off (nodes.mode off), or this process is not sampled.';
    const secs = (Date.parse(p.next_window) - Date.now()) / 1000;
    if (secs <= 1) return what + 'a sampling window opens with its next graph.';
    return what + 'the next sampling window opens in ' + num(secs, 0) + ' s (nodes.sample_interval after the last).';
  }

  // renderPhase draws a phase's graphs: in a process that offloads, the CPU's part.
  function renderPhase(main, p, ph, offloads) {
    const s = section('Where ' + phaseTitle(p, ph.name) + '\'s time goes' + (offloads ? ' on the CPU' : ''), 'phase-' + ph.name.replace(/ /g, '-'));
    if (offloads) s.append(el('p', null, 'The CPU\'s part: the nodes of its graphs. Each backend\'s part is at the top.'));
    s.append(el('p', null, ph.traced_graphs + ' graphs traced node by node, ' + num(ph.graph_seconds * 1e3, 1) + ' ms of graph time' +
      (ph.tokens ? '; ' + ph.tokens + ' tokens in ' + ph.decodes + ' ' + runtimeOf(p).step : ph.decodes ? '; ' + ph.decodes + ' ' + runtimeOf(p).step : '') +
      (ph.name === 'mixed' ? ' (' + (ph.prompt_tokens || 0) + ' prompt tokens, ' + (ph.next_tokens || 0) + ' next tokens)' : '') +
      (ph.mixed_tokens ? '; ' + ph.mixed_tokens + ' more in mixed ' + runtimeOf(p).step : '') +
      (ph.cpu ? '; ' + cpuShare(ph.cpu) : '')));
    if (!ph.traced_graphs) {
      s.append(el('p', 'empty waiting', waitingFor(p, ph)));
      main.append(s);
      return;
    }
    const rows = (ph.ops || []).map((o) => [o.op, o.weight, o.calls, num(o.total_ms, 2), num(o.mean_us, 1), pct(o.share),
      verdict(o), rate(o)]);
    s.append(table(['op', 'weight type', 'calls', 'total ms', 'mean µs', '% of graph time', 'bound', 'achieved rate'], rows, 'ops-' + ph.name.replace(/ /g, '-')));
    // Where profinfer does not know why an op is slow, or knows for a reason of its own,
    // what it checked or lacked, as the terminal report says it under its table.
    for (const o of ph.ops || []) {
      if (o.share < 0.01 || !o.why || (ph.cpu && o.why === ph.cpu.thin)) continue;
      if (o.bound && o.bound !== 'unexplained' && o.bound !== 'simd') continue;
      s.append(el('p', 'op-why', o.op + ' ' + o.weight + ': ' + (o.bound ? o.bound + ', ' : '') + o.why));
    }
    const grid = el('div', 'grid2');
    s.append(grid);
    const top = (ph.ops || []).slice(0, 15).reverse();
    const byOp = el('div');
    grid.append(byOp);
    chart(byOp, {
      title: { text: 'share by op', textStyle: { fontSize: 13 } }, grid: { left: 150, right: 30, top: 30, bottom: 20 },
      xAxis: { type: 'value', axisLabel: { formatter: (v) => (100 * v).toFixed(0) + '%' } },
      yAxis: { type: 'category', data: top.map((o) => o.op + ' ' + o.weight), axisLabel: { width: 140, overflow: 'truncate' } },
      series: [{ type: 'bar', data: top.map((o) => o.share) }],
    });
    const byLayer = el('div');
    grid.append(byLayer);
    if ((ph.layers || []).length) {
      chart(byLayer, {
        title: { text: 'share by layer', textStyle: { fontSize: 13 } }, grid: { left: 50, right: 20, top: 30, bottom: 30 },
        xAxis: { type: 'category', data: ph.layers.map((l) => l.layer) },
        yAxis: { type: 'value', axisLabel: { formatter: (v) => (100 * v).toFixed(0) + '%' } },
        series: [{ type: 'bar', data: ph.layers.map((l) => l.share) }],
      });
    }
    const m = ph.op_layer;
    if (m && m.ops.length) {
      const data = [];
      let hi = 0;
      m.seconds.forEach((row, i) => row.forEach((v, j) => { data.push([j, i, v * 1e3]); hi = Math.max(hi, v * 1e3); }));
      s.append(el('h3', null, 'op × layer, ms'));
      chart(s, {
        grid: { left: 150, right: 30, top: 10, bottom: 90 },
        xAxis: { type: 'category', data: m.layers, name: 'layer', nameLocation: 'middle', nameGap: 25 }, yAxis: { type: 'category', data: m.ops, axisLabel: { width: 140, overflow: 'truncate' } },
        visualMap: { min: 0, max: hi || 1, calculable: true, orient: 'horizontal', left: 'center', bottom: 0 },
        series: [{ type: 'heatmap', data }],
      });
    }
    main.append(s);
  }

  function renderRoofline(main, p, offloads) {
    const r = p.roofs;
    const s = section('Roofline: each ' + (offloads ? 'CPU ' : '') + 'op against this machine\'s roofs', 'roofline');
    if (!r.flops || !r.bandwidth) {
      s.append(el('p', 'empty', 'No roofs known: the roofline layer is off, or no classified node was seen yet.'));
      main.append(s);
      return;
    }
    const caches = r.caches || [];
    s.append(el('p', null, 'Roofs: ' + si(r.flops, 'FLOP/s') + ' fp32 compute' + (r.int8 ? ', ' + si(r.int8, 'OP/s') + ' int8 (quantised matmuls)' : '') +
      (r.bf16 ? ', ' + si(r.bf16, 'FLOP/s') + ' bf16 (bf16 matmuls)' : '') +
      '; bandwidth ' + caches.map((c) => c.name + ' (' + si(c.size, 'B') + ') ' + si(c.bandwidth, 'B/s') + ', ').join('') +
      (caches.length ? 'DRAM ' : '') + si(r.bandwidth, 'B/s') + '; ' + (r.source || 'source unknown') + (r.measured ? ', measured ' + r.measured : '') +
      '. Ridge point ' + num(r.flops / r.bandwidth, 1) + ' FLOP/byte from DRAM. Each op is judged against its kernel\'s compute roof and the levels its bytes come from.'));
    const series = [];
    for (const ph of p.phases || []) {
      const pts = (ph.ops || []).filter((o) => o.intensity > 0 && o.flops_per_second > 0)
        .map((o) => ({ value: [o.intensity, o.flops_per_second / 1e9], name: o.op + ' ' + o.weight + ' (' + ph.name + ', ' + (o.bound || '?') + ')' }));
      series.push({ name: ph.name, type: 'scatter', data: pts, symbolSize: 9 });
    }
    // The cache-aware roofline: a roof per level under each compute roof.
    const roofLine = (name, peak, bandwidth, dashed) => {
      const data = [];
      for (let x = 0.01; x <= 10000; x *= 1.25) data.push([x, Math.min(peak, x * bandwidth) / 1e9]);
      series.push({ name, type: 'line', data, showSymbol: false, lineStyle: { color: '#333', width: dashed ? 1 : 2, type: dashed ? 'dashed' : 'solid' } });
    };
    const top = Math.max(r.flops, r.int8 || 0, r.bf16 || 0);
    roofLine('roof (DRAM)', top, r.bandwidth, false);
    for (const c of caches) roofLine('roof (' + c.name + ')', top, c.bandwidth, true);
    if (top > r.flops) roofLine('fp32 roof', r.flops, Math.max(r.bandwidth, ...caches.map((c) => c.bandwidth)), true);
    chart(s, {
      legend: {}, grid: { left: 70, right: 30, top: 30, bottom: 40 },
      tooltip: { trigger: 'item', renderMode: 'richText', formatter: (x) => x.name + '\n' + num(x.value[0], 2) + ' FLOP/B, ' + num(x.value[1], 2) + ' GFLOP/s' },
      xAxis: { type: 'log', name: 'FLOP per byte', nameLocation: 'middle', nameGap: 25 },
      yAxis: { type: 'log', name: 'GFLOP/s' }, series,
    }, 'tall');
    main.append(s);
  }

  function renderTimeline(main, p) {
    const t = p.timeline;
    const s = section('One traced token across threads', 'timeline');
    if (!t || !t.nodes.length) {
      s.append(el('p', 'empty', 'No graph traced node by node yet (nodes.mode off, or the next sampling window has not come).'));
      main.append(s);
      return;
    }
    s.append(el('p', null, 'A ' + t.phase + ' graph of ' + t.nodes.length + ' nodes' + (t.tokens ? ' (' + t.tokens + ' tokens)' : '') + ', ' +
      num(t.duration_us / 1e3, 2) + ' ms on ' + t.threads + ' threads; critical path ' + num(t.critical_us / 1e3, 2) + ' ms, in red.' +
      (t.nodes.some((n) => n.busy) ? ' Each thread\'s bar is its computing time before the barrier.' : ' Thread 0 delimits nodes (nodes.barriers off: per-thread busy time not probed).')));
    const lanes = ['critical path'];
    const threads = Math.max(1, t.threads);
    for (let i = 0; i < threads; i++) lanes.push('thread ' + i);
    const work = t.device || [];
    const devices = [...new Set(work.map((w) => w.backend))];
    const lane = (w) => lanes.indexOf(backendName(w.backend) + (w.copy ? ': copies queued' : ': device'));
    devices.forEach((d) => {
      if (work.some((w) => w.copy && w.backend === d)) lanes.push(backendName(d) + ': copies queued');
      lanes.push(backendName(d) + ': device');
      const splits = work.filter((w) => !w.copy && w.backend === d);
      const copies = work.filter((w) => w.copy && w.backend === d);
      s.append(el('p', 'device-work', backendName(d) + ' in this decode: ' + splits.length + (splits.length === 1 ? ' split' : ' splits') + ' of ' +
        splits.reduce((a, w) => a + (w.nodes || 0), 0) + ' nodes, ' + num(splits.reduce((a, w) => a + w.d, 0) / 1e3, 2) +
        ' ms from handing over to done, the CPU waiting ' + num(splits.reduce((a, w) => a + (w.wait || 0), 0) / 1e3, 2) + ' ms of it' +
        (copies.length ? '; ' + copies.length + (copies.length === 1 ? ' copy' : ' copies') + ' queued to it (' +
          copies.reduce((a, w) => a + (w.bytes || 0), 0) + ' bytes), each an arrow into the split that took it in.' : '.')));
    });
    const data = [];
    const ops = [...new Set(t.nodes.map((n) => n.op))];
    const palette = ['#5470c6', '#91cc75', '#fac858', '#73c0de', '#3ba272', '#fc8452', '#9a60b4', '#ea7ccc', '#8d6e63', '#26a69a'];
    t.nodes.forEach((n) => {
      const color = palette[ops.indexOf(n.op) % palette.length];
      if (n.c) data.push({ value: [0, n.s, n.s + n.d, n.d], name: n.op + ' ' + n.tensor, itemStyle: { color: '#d62728' } });
      for (let i = 0; i < threads; i++) {
        let d = n.busy ? n.busy[i] : (i === 0 ? n.d : 0);
        if (d > 0) data.push({ value: [i + 1, n.s, n.s + d, d], name: n.op + ' ' + n.tensor, itemStyle: { color } });
      }
    });
    // A copy flows into the first split on its device handed over after the copy began, as
    // the trace's flows do.
    const flows = [];
    work.forEach((w) => {
      if (w.copy) {
        data.push({ value: [lane(w), w.s, w.s + w.d, w.d], name: 'copy of ' + (w.tensor || '?') + ' to ' + backendName(w.backend) + ', ' + w.bytes + ' bytes',
          itemStyle: { color: '#8d6e63' } });
        const into = work.filter((x) => !x.copy && x.backend === w.backend && x.s >= w.s).sort((x, y) => x.s - y.s)[0];
        if (into) flows.push([lane(w), w.s + w.d, lane(into), into.s]);
      } else {
        data.push({ value: [lane(w), w.s, w.s + w.d, w.d], name: backendName(w.backend) + ' split of ' + w.nodes + ' nodes, the CPU waiting ' +
          num((w.wait || 0) / 1e3, 2) + ' ms' + (w.bound ? ' (its end a bound)' : ''), itemStyle: { color: '#7f7f7f' } });
      }
    });
    const xmin = Math.floor(Math.min(0, ...work.map((w) => w.s)));
    const xmax = Math.ceil(Math.max(t.duration_us, ...work.map((w) => w.s + w.d)));
    chart(s, {
      grid: { left: work.length ? 170 : 100, right: 30, top: 10, bottom: 60 },
      tooltip: { renderMode: 'richText', formatter: (x) => x.name + '\n' + num(x.value[3], 1) + ' µs at ' + num(x.value[1], 1) + ' µs' },
      dataZoom: [{ type: 'slider', filterMode: 'weakFilter', bottom: 5 }, { type: 'inside', filterMode: 'weakFilter' }],
      xAxis: { type: 'value', name: 'µs', min: xmin, max: xmax },
      yAxis: { type: 'category', data: lanes, inverse: true, axisLabel: { width: 160, overflow: 'truncate' } },
      series: [{
        type: 'custom', encode: { x: [1, 3], y: 0 }, data: flows, silent: true, z: 3,
        renderItem: (params, api) => {
          const a = api.coord([api.value(1), api.value(0)]);
          const b = api.coord([api.value(3), api.value(2)]);
          return { type: 'line', shape: { x1: a[0], y1: a[1], x2: b[0], y2: b[1] }, style: { stroke: '#8d6e63', lineWidth: 1.5 } };
        },
      }, {
        type: 'custom', encode: { x: [1, 2], y: 0 }, data,
        renderItem: (params, api) => {
          const lane = api.value(0);
          const a = api.coord([api.value(1), lane]);
          const b = api.coord([api.value(2), lane]);
          const h = api.size([0, 1])[1] * 0.7;
          const rect = echarts.graphic.clipRectByRect({ x: a[0], y: a[1] - h / 2, width: Math.max(b[0] - a[0], 0.5), height: h },
            { x: params.coordSys.x, y: params.coordSys.y, width: params.coordSys.width, height: params.coordSys.height });
          return rect && { type: 'rect', shape: rect, style: api.style() };
        },
      }],
    }, 'tall');
    main.append(s);
  }

  function renderMoE(main, p) {
    if (!(p.moe || []).length) return;
    const s = section('MoE routing: expert selections per layer', 'moe');
    const data = [];
    let experts = 0;
    let hi = 0;
    p.moe.forEach((l, i) => l.selections.forEach((v, e) => { data.push([e, i, v]); experts = Math.max(experts, e + 1); hi = Math.max(hi, v); }));
    chart(s, {
      grid: { left: 60, right: 30, top: 10, bottom: 90 },
      xAxis: { type: 'category', name: 'expert', data: [...Array(experts).keys()] },
      yAxis: { type: 'category', name: 'layer', data: p.moe.map((l) => l.layer) },
      visualMap: { min: 0, max: hi || 1, calculable: true, orient: 'horizontal', left: 'center', bottom: 0 },
      series: [{ type: 'heatmap', data }],
    }, 'tall');
    s.append(table(['layer', 'experts', 'selections', 'imbalance (CV)'],
      p.moe.map((l) => [l.layer, l.selections.length, l.selections.reduce((a, b) => a + b, 0), num(l.imbalance, 2)]), 'moe-table'));
    main.append(s);
  }

  function renderBackends(main, p) {
    if (!(p.backends || []).length && !(p.copies || []).length) return;
    const s = section('Backends: splits and the copies between them', 'backends');
    if ((p.backends || []).length) {
      // A device's splits: the CPU's seconds hand the work over; the device's run until the
      // CPU saw it done, and the CPU waited for part of them.
      s.append(table(['backend', 'splits', 'CPU seconds', 'device seconds', 'CPU waited'], p.backends.map((b) => [backendName(b.backend), b.splits, num(b.seconds, 3),
        b.device_splits ? num(b.device_seconds, 3) : '', b.device_splits ? num(b.wait_seconds, 3) : '']), 'backend-table'));
      for (const b of p.backends.filter((b) => b.ops)) {
        const secs = b.op_seconds;
        if (secs) { // the device timed them itself (ggml-vulkan's perf logger)
          s.append(el('h3', null, 'Nodes on ' + backendName(b.backend) + ', timed by the device'));
          const total = Object.values(secs).reduce((x, y) => x + y, 0);
          s.append(table(['op', 'nodes', 'device seconds', 'share'], Object.entries(b.ops).sort((x, y) => (secs[y[0]] || 0) - (secs[x[0]] || 0))
            .map(([op, n]) => [op, n, secs[op] !== undefined ? num(secs[op], 4) : '', secs[op] !== undefined ? pct(secs[op] / total) : '']), 'device-op-table'));
          continue;
        }
        s.append(el('h3', null, 'Nodes on ' + backendName(b.backend) + ', read from its splits (the device times none of them)'));
        s.append(table(['op', 'nodes'], Object.entries(b.ops).sort((x, y) => y[1] - x[1]).map(([op, n]) => [op, n]), 'device-op-table'));
      }
    }
    if ((p.copies || []).length) {
      s.append(el('h3', null, 'Tensor copies'));
      s.append(table(['from', 'to', 'copies', 'MB', 'seconds'], p.copies.map((c) => [backendName(c.source), backendName(c.destination), c.copies, num(c.bytes / 1e6, 2), num(c.seconds, 3)]), 'copy-table'));
    }
    main.append(s);
  }

  function renderSched(main, p) {
    const phases = (p.phases || []).filter((ph) => ph.sched.off_cpu || ph.sched.barrier_wait || (p.counters || []).length);
    if (!phases.length) return;
    const s = section('Scheduler, barriers and counters per op', 'sched');
    for (const ph of phases) {
      s.append(el('h3', null, ph.name + ': ' + pct((ph.sched.off_cpu + ph.sched.runqueue) / (ph.sched.thread_time || 1)) + ' of thread time off the CPU, ' +
        pct(ph.sched.barrier_wait / (ph.sched.thread_time || 1)) + ' waiting at barriers; ' + ph.sched.preemptions + ' preemptions, ' + ph.sched.migrations + ' migrations'));
      const counters = p.counters || [];
      const rows = (ph.ops || []).map((o) => [o.op, o.weight, num(o.sched.off_cpu * 1e3, 2), num(o.sched.runqueue * 1e3, 2), num(o.sched.barrier_wait * 1e3, 2),
        o.sched.preemptions, o.sched.migrations, ...counters.map((c) => (o.counters && o.counters[c]) || 0)]);
      s.append(table(['op', 'weight type', 'off-CPU ms', 'run queue ms', 'barrier wait ms', 'preemptions', 'migrations', ...counters], rows));
    }
    main.append(s);
  }

  render();
  if (window.PROFINFER_LIVE) {
    const hold = el('button', null, 'pause updates');
    hold.id = 'pause';
    hold.addEventListener('click', () => {
      paused = !paused;
      hold.textContent = paused ? 'resume updates' : 'pause updates';
      hold.className = paused ? 'active' : '';
    });
    document.querySelector('header').append(hold);
    setInterval(() => {
      if (paused) return;
      fetch('api/view').then((r) => r.ok ? r.json() : Promise.reject(new Error('api/view: ' + r.status)))
        .then((v) => { view = v; render(); }, (e) => console.warn(e));
    }, 3000);
  }
})();
