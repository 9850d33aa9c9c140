// The gradient-flow DAG of tape.tools.report: a layered layout of its own, module boxes nested and never
// overlapping (see layout), redrawn whenever a module is collapsed into one node or expanded again.
(function () {
  const source = document.getElementById('dag-data');
  if (!source) return;
  const G = JSON.parse(source.textContent);
  const svg = document.getElementById('dag-svg');
  const NS = svg.namespaceURI;
  const W = 176, H = 46, GAP = 22, VGAP = 38, PAD = 10, LABEL = 16;
  const byKey = {};
  G.nodes.forEach((n, i) => { n.order = i; byKey[n.key] = n; });
  const modules = new Set();
  G.nodes.forEach(n => { if (n.module) n.module.split('.').forEach((_, i, a) => modules.add(a.slice(0, i + 1).join('.'))); });
  const collapsed = new Set();
  function owner(n) {
    if (!n.module) return null;
    const parts = n.module.split('.');
    for (let i = 1; i <= parts.length; i++) { const p = parts.slice(0, i).join('.'); if (collapsed.has(p)) return p; }
    return null;
  }
  function summarise(v) {
    const m = v.members, dead = m.filter(n => n.kind === 'param' && (n.status === 'missing' || n.status === 'zero'));
    const stub = m.some(n => n.status === 'stub'), bad = m.some(n => n.status === 'nonfinite');
    const last = m.filter(n => n.kind === 'op').pop() || m[m.length - 1];
    Object.assign(v, { fill: last.fill, text: last.text, status: stub ? 'stub' : bad ? 'nonfinite' : last.status,
      grad: (dead.length ? dead.length + ' dead param(s); ' : '') + (last.grad || ''),
      shape: m.filter(n => n.kind === 'op').length + ' ops', op: 'module' });
    if (stub) Object.assign(v, { fill: '__STUB__', text: '#7f1d1d' });
    else if (bad) Object.assign(v, { fill: '__NONFINITE__', text: '#ffffff' });
    else if (dead.length) Object.assign(v, { fill: '__DEAD__', text: '#111827' });
  }
  function build() {
    const vis = {}, list = [];
    G.nodes.forEach(n => {
      const o = owner(n), key = o ? 'm:' + o : n.key;
      if (!vis[key]) {
        vis[key] = o ? { key, name: o, kind: 'module', module: o, members: [], order: n.order } : Object.assign({ members: [n] }, n);
        list.push(vis[key]);
      }
      if (o) vis[key].members.push(n);
      n.vis = key;
    });
    list.forEach(v => { if (v.kind === 'module') summarise(v); });
    const edges = [], seen = new Set();
    G.edges.forEach(e => {
      const a = byKey[e.from].vis, b = byKey[e.to].vis, k = a + '>' + b;
      if (a === b || seen.has(k)) return;
      seen.add(k);
      edges.push(Object.assign({}, e, { from: a, to: b }));
    });
    return { list, vis, edges };
  }
  // Compound layout: every expanded module is a box laid out inside its parent's box (rows by longest path among
  // the box's own items -- its nodes and its child modules' boxes -- ordered by the parents' mean position), so two
  // module boxes are nested or apart and no node sits in a box it does not belong to.
  const parentOf = p => { const i = p.lastIndexOf('.'); return i < 0 ? '' : p.slice(0, i); };
  const containerOf = v => v.kind === 'module' ? parentOf(v.name) : (v.module || '');
  function chain(p) {
    const out = [''];
    if (p) p.split('.').forEach((_, i, a) => out.push(a.slice(0, i + 1).join('.')));
    return out;
  }
  function itemIn(C, v) {
    const c = containerOf(v);
    return c === C ? v.key : 'c:' + c.split('.').slice(0, C ? C.split('.').length + 1 : 1).join('.');
  }
  function layout(g) {
    const boxes = {};
    const box = C => boxes[C] || (boxes[C] = { items: [], seen: new Set(), order: {}, edges: [] });
    g.list.forEach(v => chain(containerOf(v)).forEach(C => {
      const b = box(C), it = itemIn(C, v);
      if (!b.seen.has(it)) { b.seen.add(it); b.items.push(it); b.order[it] = v.order; }
    }));
    g.edges.forEach(e => {
      const a = g.vis[e.from], b = g.vis[e.to], ca = chain(containerOf(a)), cb = chain(containerOf(b));
      let k = 0;
      while (k + 1 < ca.length && k + 1 < cb.length && ca[k + 1] === cb[k + 1]) k++;
      const from = itemIn(ca[k], a), to = itemIn(ca[k], b);
      if (from !== to) box(ca[k]).edges.push([from, to]);
    });
    const size = {}, rel = {};
    function measure(C) {  // the size of C's content, and each item's position relative to it
      const b = boxes[C], preds = {}, succs = {}, rank = {};
      b.items.forEach(k => { preds[k] = []; succs[k] = []; });
      b.edges.forEach(([f, t]) => { preds[t].push(f); succs[f].push(t); });
      b.items.forEach(k => {
        if (!k.startsWith('c:')) { size[k] = [W, H]; return; }
        const [w, h] = measure(k.slice(2));
        size[k] = [w + 2 * PAD, h + 2 * PAD + LABEL];
      });
      const items = b.items.slice().sort((x, y) => b.order[x] - b.order[y]), done = new Set(), topo = [];
      while (topo.length < items.length) {  // Kahn's order; a cycle (a module called twice) is cut at its first item
        const ready = items.filter(k => !done.has(k) && preds[k].every(p => done.has(p)));
        (ready.length ? ready : [items.find(k => !done.has(k))]).forEach(k => { done.add(k); topo.push(k); });
      }
      topo.forEach(k => {
        const ps = preds[k].filter(p => p in rank);
        rank[k] = ps.length ? Math.max(...ps.map(p => rank[p] + 1)) : 0;
      });
      topo.forEach(k => { if (!preds[k].length && succs[k].length) rank[k] = Math.max(0, Math.min(...succs[k].map(s => rank[s])) - 1); });
      const rows = [];
      topo.forEach(k => { (rows[rank[k]] = rows[rank[k]] || []).push(k); });
      const filled = rows.filter(Boolean), pos = {};
      filled.forEach(r => r.forEach((k, i) => { pos[k] = i; }));
      for (let sweep = 0; sweep < 2; sweep++) {
        filled.forEach(r => {
          const mean = k => preds[k].length ? preds[k].reduce((s, p) => s + pos[p], 0) / preds[k].length : pos[k];
          r.sort((x, y) => mean(x) - mean(y)).forEach((k, i) => { pos[k] = i; });
        });
      }
      const widths = filled.map(r => r.reduce((s, k) => s + size[k][0], 0) + GAP * (r.length - 1));
      const width = Math.max(W, ...widths);
      let y = 0;
      filled.forEach((r, i) => {
        let x = (width - widths[i]) / 2;
        r.forEach(k => { rel[k] = [x, y]; x += size[k][0] + GAP; });
        y += Math.max(...r.map(k => size[k][1])) + VGAP;
      });
      return [width, Math.max(H, y - VGAP)];
    }
    const xy = {}, clusters = [];
    function place(C, ox, oy) {
      boxes[C].items.forEach(k => {
        const x = ox + rel[k][0], y = oy + rel[k][1];
        if (!k.startsWith('c:')) { xy[k] = [x, y]; return; }
        clusters.push({ name: k.slice(2), x, y, width: size[k][0], height: size[k][1] });
        place(k.slice(2), x + PAD, y + PAD + LABEL);
      });
    }
    const [width, height] = measure('');
    place('', 20, 20);
    return { xy, clusters, width: width + 40, height: height + 40 };
  }
  function el(tag, attrs, parent, text) {
    const e = document.createElementNS(NS, tag);
    Object.entries(attrs).forEach(([k, v]) => e.setAttribute(k, v));
    if (text !== undefined) e.textContent = text;
    parent.appendChild(e);
    return e;
  }
  function draw() {
    const g = build(), L = layout(g);
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    svg.setAttribute('width', L.width); svg.setAttribute('height', L.height);
    L.clusters.sort((a, b) => a.name.split('.').length - b.name.split('.').length).forEach(c => {
      const grp = el('g', { class: 'cluster' }, svg);
      el('rect', { x: c.x, y: c.y, width: c.width, height: c.height, rx: 8 }, grp);
      const label = el('text', { x: c.x + 6, y: c.y + 13 }, grp, '\u25BE ' + c.name);
      label.addEventListener('click', () => { collapsed.add(c.name); draw(); });
    });
    g.edges.forEach(e => {
      const [x1, y1] = L.xy[e.from], [x2, y2] = L.xy[e.to];
      const a = [x1 + W / 2, y1 + H], b = [x2 + W / 2, y2];
      const dead = e.status === 'missing' || e.status === 'zero';
      const p = el('path', { d: `M${a[0]},${a[1]} C${a[0]},${a[1] + 30} ${b[0]},${b[1] - 30} ${b[0]},${b[1]}`, fill: 'none',
        stroke: e.colour, 'stroke-width': e.status === 'constant' ? 1 : 2, 'stroke-dasharray': dead ? '5 3' : 'none' }, svg);
      el('title', {}, p, (e.shape || '') + (e.grad ? '  ' + e.grad : ''));
    });
    g.list.forEach(v => {
      const [x, y] = L.xy[v.key];
      const grp = el('g', { class: 'node ' + v.kind, 'data-status': v.status }, svg);
      el('rect', { x, y, width: W, height: H, rx: v.kind === 'op' ? 3 : v.kind === 'module' ? 8 : H / 2, fill: v.fill,
        stroke: v.status === 'stub' ? '#b91c1c' : '#6b7280', 'stroke-width': v.status === 'stub' ? 3 : v.kind === 'module' ? 2 : 1 }, grp);
      const sub = v.kind === 'op' && v.name !== v.op ? v.op + ' ' + v.shape : v.shape;
      [v.name, sub, v.status === 'stub' ? 'BACKWARD STUB' : v.grad].forEach((t, i) => {
        el('text', { x: x + W / 2, y: y + 13 + i * 13, 'text-anchor': 'middle', style: 'fill:' + v.text }, grp, (t || '').slice(0, 30));
      });
      el('title', {}, grp, [v.name, v.op, v.shape, v.grad, v.site ? 'at ' + v.site : ''].filter(Boolean).join('\n'));
      if (v.kind === 'module') grp.addEventListener('click', () => { collapsed.delete(v.name); draw(); });
    });
  }
  document.getElementById('dag-collapse').addEventListener('click', () => {
    [...modules].filter(m => !m.includes('.')).forEach(m => collapsed.add(m)); draw();
  });
  document.getElementById('dag-expand').addEventListener('click', () => { collapsed.clear(); draw(); });
  draw();
})();
