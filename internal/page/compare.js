'use strict';
// Renders a comparison (internal/compare's Comparison, the JSON of compare.json) into a
// container: the whole of compare.html, and the live page's compare view. Every string
// from the data goes into the DOM as text (textContent, or an SVG title's text), never
// as markup.
window.profinferCompare = (function () {
  const svgNS = 'http://www.w3.org/2000/svg';
  let setupOpen = false; // the folded setup stays as the reader left it across redraws
  const expanded = new Set(); // phases whose every row is shown

  function el(tag, cls, ...children) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    for (const c of children) {
      if (c === null || c === undefined) continue;
      e.append(typeof c === 'string' || typeof c === 'number' ? document.createTextNode(String(c)) : c);
    }
    return e;
  }
  function svg(tag, attrs) {
    const e = document.createElementNS(svgNS, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
    return e;
  }
  function section(title, id) {
    const s = el('section', 'cmp', el('h2', null, title));
    s.id = id;
    return s;
  }
  function tile(value, label, cls) { return el('div', 'tile' + (cls ? ' ' + cls : ''), el('b', null, value), el('span', null, label)); }
  function row(cells, cls) {
    const tr = el('tr', cls);
    for (const c of cells) tr.append(el('td', null, c));
    return tr;
  }
  function table(headers, id) {
    const t = el('table', null, el('thead', null, el('tr', null, ...headers.map((h) => el('th', null, h)))), el('tbody'));
    if (id) t.id = id;
    return t;
  }

  const backendNames = { VK: 'Vulkan' }; // ggml's prefix, as the live page names it
  const backendName = (b) => backendNames[b] || b;
  // num prints ms to three significant digits, as the text report does: per-token times
  // run from µs to seconds.
  function num(v) {
    if (!v || !isFinite(v)) return v ? '–' : '0';
    return v.toFixed(Math.min(Math.max(2 - Math.floor(Math.log10(Math.abs(v))), 1), 6));
  }
  const signed = (v) => (v > 0 ? '+' : '') + num(v);
  const percent = (r) => (r >= 0 ? '+' : '') + (100 * r).toFixed(1) + '%';
  const pct = (r) => (Math.round(100 * r) || 0) + '%'; // no "-0%"
  // ranges writes layers as runs, as compare.Ranges does: 0–3, 7.
  function ranges(xs) {
    const out = [];
    for (let i = 0; i < xs.length;) {
      let j = i;
      while (j + 1 < xs.length && xs[j + 1] === xs[j] + 1) j++;
      out.push(j > i ? xs[i] + '–' + xs[j] : String(xs[i]));
      i = j + 1;
    }
    return out.join(', ');
  }
  const stamp = (t) => new Date(t).toISOString().slice(0, 19).replace('T', ' ');
  const verdict = (ph) => ph.beyond_noise ? ph.verdict + ', beyond noise' : ph.verdict;

  function render(container, c) {
    container.append(sidesSection(c));
    if ((c.warnings || []).length) {
      const s = section('Warnings: the sides compare different things', 'compare-warnings');
      for (const w of c.warnings) s.append(el('div', 'finding warning', el('p', null, w)));
      container.append(s);
    }
    container.append(setupSection(c.setup || []));
    for (const ph of c.phases || []) container.append(phaseSection(ph));
    container.append(el('p', 'cmp-method', 'Intervals: ' + pct(c.method.confidence) + ', from ' + c.method.resamples +
      ' resamples of each side\'s time-ordered blocks of steps and of traced graphs. A change is beyond noise when its interval lies wholly ' +
      'beyond the phase\'s noise floor (what two runs of the same thing differ by) of the larger side\'s time; a row\'s, beyond the floor of ' +
      'the row\'s larger side and ' + pct(c.method.min_share) + ' of the phase\'s time (' + pct(c.method.few_graphs_share) +
      ' where the ops\' split rests on fewer than 3 traced graphs a side). The grey band behind each bar is that noise.'));
  }

  function sidesSection(c) {
    const s = section('B against A: what changed, and where the time per token went', 'compare-sides');
    for (const x of [c.a, c.b]) {
      const p = el('p', 'cmp-side', el('b', null, x.name + ': '), x.selection.spec + ': ' + (x.processes || []).join(', ') +
        ', ' + stamp(x.first) + ' to ' + stamp(x.last).slice(11) + ' UTC');
      p.dataset.side = x.name;
      s.append(p);
    }
    return s;
  }

  // setupSection shows what differs, then what one side does not say (?) and the
  // measured figures within their tolerance (≈); what is the same, or unknown on both,
  // is folded.
  function setupSection(items) {
    const s = section('The setup', 'compare-setup');
    const t = table(['', 'setup', 'A', 'B'], 'setup-differs');
    const same = [], neither = [];
    for (const it of items) {
      if (it.differs) t.tBodies[0].append(row(['≠', it.label, it.a, it.b], 'differs'));
      else if (it.a === it.b && it.a === 'unknown') neither.push(it.label);
      else if (it.a === it.b) same.push(it);
      else if (it.a === 'unknown' || it.b === 'unknown') t.tBodies[0].append(row(['?', it.label, it.a, it.b], 'unknown'));
      else t.tBodies[0].append(row(['≈', it.label, it.a, it.b], 'near'));
    }
    s.append(t.tBodies[0].rows.length ? t : el('p', 'empty', 'Nothing differs that both sides say.'));
    const rest = table(['setup', 'on both'], 'setup-same');
    for (const it of same) rest.tBodies[0].append(row([it.label, it.a]));
    const d = el('details', null, el('summary', null, 'The same on both: ' + same.length + (neither.length ? '; unknown on both: ' + neither.length : '')), rest);
    if (neither.length) d.append(el('p', null, 'Unknown on both (older recordings lack them): ' + neither.join(', ') + '.'));
    d.open = setupOpen;
    d.addEventListener('toggle', () => { setupOpen = d.open; });
    s.append(d);
    return s;
  }

  // bar draws a change's interval against its noise band (grey, around zero) on a scale
  // of ±max ms: green beyond noise and faster, red beyond noise and slower, grey within.
  function bar(e, noise, beyond, max, label) {
    const w = 300, h = 18, mid = w / 2;
    const x = (v) => mid + Math.max(-1, Math.min(1, v / max)) * (mid - 3);
    const g = svg('svg', { width: w, height: h, viewBox: '0 0 ' + w + ' ' + h, class: 'ci ' + (beyond ? (e.value > 0 ? 'slower' : 'faster') : 'noise') });
    g.dataset.band = noise;
    const t = svg('title', {});
    t.textContent = label;
    g.append(t, svg('line', { class: 'axis', x1: 0, x2: w, y1: h / 2, y2: h / 2 }), svg('rect', { class: 'band', x: x(-noise), y: 1, width: x(noise) - x(-noise), height: h - 2 }),
      svg('line', { class: 'zero', x1: mid, x2: mid, y1: 0, y2: h }),
      svg('rect', { class: 'iv', x: x(e.low), y: 5, width: Math.max(x(e.high) - x(e.low), 1.5), height: h - 10 }),
      svg('line', { class: 'point', x1: x(e.value), x2: x(e.value), y1: 2, y2: h - 2 }));
    return g;
  }

  // rowName is what a row computed, as the text report names it: the op and its weights'
  // type, both where it changed.
  function rowName(r, split) {
    switch (r.kind) {
      case 'device': return 'device work (handing over to done)';
      case 'copy': return 'copies';
      case 'graph': return split ? 'graphs, outside their nodes' : 'graphs (not split by op)';
      case 'outside': return 'outside the graphs';
    }
    let name = r.op === '(undescribed)' ? 'nodes not described' : r.op;
    const wa = r.weight_a || '', wb = r.weight_b || '';
    if (wa === wb && wa) name += ' ' + wa;
    else if (r.presence === 'a' && wa) name += ' ' + wa;
    else if (r.presence === 'b' && wb) name += ' ' + wb;
    else if (wa !== wb) name += ' ' + (wa || 'none') + ' → ' + (wb || 'none');
    if (r.shapes_differ) name += ' (' + r.shapes_differ + ' of ' + r.nodes + ' shapes differ)';
    return name;
  }
  function backendOf(r) {
    if (r.kind === 'outside') return '';
    if (r.kind === 'copy') return (r.backend_a || r.backend_b).split('→').map(backendName).join('→');
    if (r.presence === 'moved') return backendName(r.backend_a) + ' → ' + backendName(r.backend_b);
    return backendName(r.backend_a || r.backend_b);
  }
  const badges = { a: 'only in A', b: 'only in B', moved: 'moved' };

  function phaseSection(ph) {
    const unit = ph.unit;
    const s = section(ph.phase + ': ms a ' + unit, 'compare-' + ph.phase.replace(/ /g, '-'));
    s.dataset.phase = ph.phase;
    const judged = ph.beyond_noise ? (ph.change_ms.value > 0 ? 'slower' : 'faster') : 'none';
    if (!ph.a.steps || !ph.b.steps) {
      s.append(el('p', 'verdict verdict-none', ph.verdict));
      notes(s, ph);
      return s;
    }
    const per = (x) => num(x.units_per_second) + ' ' + unit + 's/s, ' + (unit === 'token' ? x.tokens + ' tokens in ' : '') + x.steps + ' steps, ' + x.traced_steps + ' traced';
    const phaseBand = ph.noise_ms;
    const tiles = el('div', 'tiles');
    tiles.append(tile(num(ph.a.ms_per_unit) + ' ms', 'A: ' + per(ph.a), 'side-a'), tile(num(ph.b.ms_per_unit) + ' ms', 'B: ' + per(ph.b), 'side-b'),
      tile(signed(ph.change_ms.value) + ' ms (' + percent(ph.relative.value) + ')', '95% interval ' + signed(ph.change_ms.low) + ' … ' + signed(ph.change_ms.high) + ' ms', 'change'),
      tile(verdict(ph), 'noise floor ±' + pct(ph.noise_floor) + ' of the larger side', 'verdict verdict-' + judged));
    s.append(tiles);
    const scale = Math.max(phaseBand, Math.abs(ph.change_ms.low), Math.abs(ph.change_ms.high)) * 1.05;
    s.append(el('div', 'phase-bar', bar(ph.change_ms, phaseBand, ph.beyond_noise, scale,
      'the change ' + signed(ph.change_ms.low) + ' … ' + signed(ph.change_ms.high) + ' ms against the noise floor ±' + num(phaseBand) + ' ms'),
    el('span', null, 'the change\'s interval against the noise floor (grey)')));

    const callouts = el('ul', 'callouts');
    for (const mv of ph.moves || []) {
      callouts.append(el('li', 'move', 'Moved from ' + backendName(mv.from) + ' to ' + backendName(mv.to) + ': ' + mv.nodes + ' nodes' +
        ((mv.layers || []).length ? ' of layers ' + ranges(mv.layers) : '') + '; where the device timed no node, their time there is in its device work.'));
    }
    const lone = ph.rows.filter((r) => r.presence === 'a' || r.presence === 'b');
    if (lone.length) {
      callouts.append(el('li', 'lone', 'On one side only: ' + lone.slice(0, 6).map((r) => rowName(r, true) + ' (' + badges[r.presence] + ', ' + signed(r.change_ms.value) + ' ms)').join('; ') +
        (lone.length > 6 ? '; ' + (lone.length - 6) + ' more' : '') + '.'));
    }
    if (callouts.children.length) s.append(callouts);
    s.append(rowsTable(ph));
    notes(s, ph);
    return s;
  }

  // rowsTable lists where the change went, largest first: the 12 largest, the rest
  // behind a button, and last, always, what no node explains.
  function rowsTable(ph) {
    const unit = ph.unit;
    const t = table(['backend', 'row', 'A ms', 'B ms', 'change ms', '95% interval', 'share of the change', 'change against its noise'], 'rows-' + ph.phase.replace(/ /g, '-'));
    const split = ph.rows.some((r) => r.kind === 'op' && (r.backend_a === 'CPU' || r.backend_b === 'CPU'));
    const bands = ph.rows.map((r) => r.noise_ms);
    // One scale for the rows, set by all but the last: what no node explains may be
    // wide (a device's work overlapping the CPU's), and its bar is clipped instead.
    const scaled = ph.rows.length > 1 ? ph.rows.slice(0, -1) : ph.rows;
    const scale = Math.max(1e-9, ...scaled.map((r, i) => Math.max(Math.abs(r.change_ms.low), Math.abs(r.change_ms.high), bands[i]))) * 1.05;
    const cell = (v, present) => present ? num(v) : '–';
    const rows = ph.rows.slice(0, -1);
    const shown = expanded.has(ph.phase) ? rows.length : Math.min(rows.length, 12);
    ph.rows.forEach((r, i) => {
      const name = el('span', null, rowName(r, split));
      if (badges[r.presence]) name.append(el('span', 'badge ' + r.presence, badges[r.presence]));
      if ((r.tensors || []).length || (r.layers || []).length) {
        name.title = (r.tensors || []).join(', ') + ((r.layers || []).length ? '; layers ' + ranges(r.layers) : '') + (r.nodes ? '; ' + r.nodes + ' nodes' : '');
      }
      const e = r.change_ms;
      const tr = row([backendOf(r), name, cell(r.a_ms, r.backend_a || r.kind === 'outside'), cell(r.b_ms, r.backend_b || r.kind === 'outside'),
        signed(e.value), signed(e.low) + ' … ' + signed(e.high), ph.beyond_noise ? pct(r.share) : '–',
        bar(e, bands[i], r.beyond_noise, scale, signed(e.low) + ' … ' + signed(e.high) + ' ms a ' + unit + ' against its noise ±' + num(bands[i]) + ' ms' +
          (r.beyond_noise ? ': beyond it' : ': within it'))], r.beyond_noise ? 'beyond' : null);
      tr.dataset.kind = r.kind;
      tr.dataset.presence = r.presence;
      tr.hidden = i >= shown && i < rows.length;
      t.tBodies[0].append(tr);
    });
    const box = el('div', 'cmp-rows', el('h3', null, 'Where the change went, largest first (ms a ' + unit + ')'), t);
    if (rows.length > shown) {
      const more = el('button', 'more-rows', 'show ' + (rows.length - shown) + ' more rows');
      more.addEventListener('click', () => {
        expanded.add(ph.phase);
        t.querySelectorAll('tr[hidden]').forEach((tr) => { tr.hidden = false; });
        more.remove();
      });
      box.append(more);
    }
    return box;
  }

  function notes(s, ph) {
    if (!(ph.notes || []).length) return;
    s.append(el('ul', 'notes', ...ph.notes.map((n) => el('li', null, n))));
  }

  return { render };
})();
