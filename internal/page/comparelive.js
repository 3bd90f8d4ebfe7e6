'use strict';
// The live page's compare view: two sides, each a process the collector sees (all the
// view saw of it, or since its mark) or one before its mark, compared by the exporter
// (api/compare) and drawn as compare.html draws a comparison. A mark (api/mark) splits a
// process's run at now: before and after a change, without files.
window.profinferCompareLive = (function () {
  const state = { main: null, procs: [], sides: [], picks: null, result: null, error: null, seq: 0 };

  function el(tag, cls, ...children) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    for (const c of children) if (c !== null && c !== undefined) e.append(typeof c === 'string' ? document.createTextNode(c) : c);
    return e;
  }
  const pidOf = (p) => ((p.resource || []).find((a) => a.k === 'process.pid') || {}).v;
  const clock = (t) => new Date(t).toISOString().slice(11, 19) + ' UTC';

  // options are the sides to pick from: each process's current side, and the one before
  // its mark where it has one.
  function options() {
    const out = [];
    for (const p of state.procs) {
      const s = state.sides.find((x) => x.id === p.id);
      if (!s) continue;
      const title = p.title + (p.model ? ' · ' + p.model : '');
      if (s.mark) out.push({ id: p.id, part: 'before', pid: pidOf(p), label: title + ', before the mark at ' + clock(s.mark) });
      out.push({ id: p.id, part: '', pid: pidOf(p), label: title + (s.mark ? ', since the mark at ' + clock(s.mark) : '') });
    }
    return out;
  }
  const same = (o, pick) => pick && o.id === pick.id && o.part === pick.part;

  // defaults: the sides a link names (#compare&a=PID&b=PID&a_part=before), else the
  // marked process before and after its mark, else the first two processes.
  function defaults(opts) {
    const q = new URLSearchParams(location.hash.replace(/^#compare&?/, ''));
    const byPid = (k) => opts.find((o) => o.pid === q.get(k) && o.part === (q.get(k + '_part') || ''));
    if (byPid('a') && byPid('b')) return { a: byPid('a'), b: byPid('b') };
    const before = opts.find((o) => o.part === 'before');
    if (before) return { a: before, b: opts.find((o) => o.id === before.id && o.part === '') };
    return opts.length > 1 ? { a: opts[0], b: opts[1] } : null;
  }

  function linkTo(picks) {
    const part = (k, o) => (o.part ? '&' + k + '_part=' + o.part : '');
    history.replaceState(null, '', '#compare&a=' + picks.a.pid + part('a', picks.a) + '&b=' + picks.b.pid + part('b', picks.b));
  }

  function select(name, opts, pick, onPick) {
    const s = el('select');
    s.name = name;
    opts.forEach((o, i) => {
      const x = el('option', null, o.label);
      x.value = String(i);
      if (same(o, pick)) x.setAttribute('selected', ''); // the attribute: a link's picks show in the document too
      s.append(x);
    });
    s.addEventListener('change', () => onPick(opts[Number(s.value)]));
    return s;
  }

  // draw renders the view from what was last fetched. The pickers are redrawn only when
  // what they offer changed, so that a list open in them stays open across refreshes.
  function draw() {
    const main = state.main;
    const opts = options();
    if (!state.picks && opts.length) state.picks = defaults(opts);
    const marks = state.procs.filter((p) => state.sides.some((x) => x.id === p.id));
    const key = JSON.stringify([opts.map((o) => o.label), marks.map((p) => p.title), state.picks && [state.picks.a.id, state.picks.a.part, state.picks.b.id, state.picks.b.part]]);
    if (key !== state.key || !state.pickEl || state.pickEl.parentNode !== main) {
      state.key = key;
      state.pickEl = picker(opts, marks);
      main.replaceChildren(state.pickEl);
    }
    const out = el('div');
    out.id = 'compare-result';
    if (state.error) out.append(el('p', 'empty', state.error));
    else if (state.result) window.profinferCompare.render(out, state.result);
    if (state.pickEl.nextSibling) state.pickEl.nextSibling.replaceWith(out);
    else main.append(out);
  }

  function picker(opts, marks) {
    const s = el('section', null, el('h2', null, 'Compare two processes, or one before and after a mark'));
    s.id = 'compare-pick';
    const pick = (k) => (o) => { state.picks = Object.assign({}, state.picks, { [k]: o }); linkTo(state.picks); refresh(); };
    if (opts.length > 1) {
      s.append(el('div', 'picker', el('label', null, 'A ', select('a', opts, state.picks && state.picks.a, pick('a'))),
        el('label', null, 'B ', select('b', opts, state.picks && state.picks.b, pick('b')))));
    }
    if (marks.length) {
      const which = el('select', null, ...marks.map((p, i) => { const o = el('option', null, p.title); o.value = String(i); return o; }));
      which.name = 'mark';
      const button = el('button', null, 'mark now');
      button.addEventListener('click', () => mark(marks[Number(which.value)]));
      s.append(el('div', 'picker', el('label', null, 'Mark ', which), button,
        el('span', null, 'A mark splits a process\'s run at now: what it computes from then on is a side of its own, and what came before another.')));
    }
    if (opts.length < 2) s.append(el('p', 'empty', 'One side to pick from: mark the process to compare its run before and after now, or start another.'));
    return s;
  }

  const getJSON = (url, init) => fetch(url, init).then((r) => r.json().then((v) => (r.ok ? v : Promise.reject(new Error(v.error || url + ': ' + r.status)))));

  // refresh fetches the sides and the comparison, then draws; a later refresh's answer
  // wins.
  function refresh() {
    const seq = ++state.seq;
    getJSON('api/sides').then((v) => {
      if (seq !== state.seq) return null;
      state.sides = v.sides;
      const opts = options();
      const picks = state.picks;
      if (picks && !(opts.some((o) => same(o, picks.a)) && opts.some((o) => same(o, picks.b)))) state.picks = null;
      if (!state.picks) state.picks = defaults(opts);
      if (!state.picks) return null;
      const q = new URLSearchParams({ a: state.picks.a.id, b: state.picks.b.id });
      if (state.picks.a.part) q.set('a_part', state.picks.a.part);
      if (state.picks.b.part) q.set('b_part', state.picks.b.part);
      return getJSON('api/compare?' + q).then((c) => { state.result = c; state.error = null; }, (e) => { state.result = null; state.error = e.message; });
    }).then(() => { if (seq === state.seq) draw(); }, (e) => console.warn(e));
  }

  // mark splits process p's run at now, and compares it before and after.
  function mark(p) {
    getJSON('api/mark?id=' + encodeURIComponent(p.id), { method: 'POST', headers: { 'X-Profinfer-Mark': '1' } }).then(() => {
      state.picks = { a: { id: p.id, part: 'before', pid: pidOf(p) }, b: { id: p.id, part: '', pid: pidOf(p) } };
      linkTo(state.picks);
      refresh();
    }, (e) => { state.error = e.message; draw(); });
  }

  // show draws the view into main over the processes of the latest view, and fetches.
  function show(main, procs) {
    state.main = main;
    state.procs = procs;
    if (!state.pickEl || state.pickEl.parentNode !== main) draw(); // else the fetch redraws
    refresh();
  }

  return { show };
})();
