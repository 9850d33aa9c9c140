// The gradient-flow DAG of tape.tools.report: a layered layout of its own (ranks by longest path, order by the
// parents' mean position), redrawn whenever a module is collapsed into one node or expanded again.
(function () {
  const source = document.getElementById('dag-data');
  if (!source) return;
  const G = JSON.parse(source.textContent);
  const svg = document.getElementById('dag-svg');
  const NS = svg.namespaceURI;
  const W = 176, H = 46, GAP = 22, RANK = 84;
  const byKey = {};
  G.nodes.forEach((n, i) => { n.order = i; byKey[n.key] = n; });
  const modules = new Set();
  G.nodes.forEach(n => { if (n.module) n.module.split('.').forEach((_, i, a) => modules.add(a.slice(0, i + 1).join('.'))); });
  const collapsed = new Set();
  const within = (m, path) => m === path || m.startsWith(path + '.');
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
  function layout(g) {
    const preds = {}, succs = {}, indeg = {}, rank = {};
    g.list.forEach(v => { preds[v.key] = []; succs[v.key] = []; indeg[v.key] = 0; });
    g.edges.forEach(e => { preds[e.to].push(e.from); succs[e.from].push(e.to); indeg[e.to]++; });
    const queue = g.list.filter(v => !indeg[v.key]).map(v => v.key), topo = [];
    while (queue.length) {
      const k = queue.shift(); topo.push(k);
      succs[k].forEach(s => { if (--indeg[s] === 0) queue.push(s); });
    }
    topo.forEach(k => { rank[k] = preds[k].length ? Math.max(...preds[k].map(p => rank[p] + 1)) : 0; });
    topo.forEach(k => { if (!preds[k].length && succs[k].length) rank[k] = Math.max(0, Math.min(...succs[k].map(s => rank[s])) - 1); });
    const ranks = [];
    topo.forEach(k => { (ranks[rank[k]] = ranks[rank[k]] || []).push(k); });
    const pos = {};
    ranks.forEach(r => r.forEach((k, i) => { pos[k] = i; }));
    for (let sweep = 0; sweep < 2; sweep++) {
      ranks.forEach(r => {
        const mean = k => preds[k].length ? preds[k].reduce((s, p) => s + pos[p], 0) / preds[k].length : pos[k];
        r.sort((a, b) => mean(a) - mean(b)).forEach((k, i) => { pos[k] = i; });
      });
    }
    const widest = Math.max(...ranks.map(r => r.length));
    const xy = {};
    ranks.forEach((r, y) => r.forEach((k, i) => {
      xy[k] = [20 + (widest - r.length) * (W + GAP) / 2 + i * (W + GAP), 20 + y * RANK];
    }));
    return { xy, width: widest * (W + GAP) + 40, height: ranks.length * RANK + 40 };
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
    [...modules].filter(m => !collapsed.has(m) && !g.vis['m:' + m] && !g.list.some(v => v.kind === 'module' && within(m, v.name)))
      .sort((a, b) => a.split('.').length - b.split('.').length).forEach(m => {
        const inside = g.list.filter(v => v.module && within(v.module, m) && L.xy[v.key]);
        if (!inside.length) return;
        const depth = m.split('.').length, pad = Math.max(4, 16 - 3 * depth);
        const xs = inside.map(v => L.xy[v.key][0]), ys = inside.map(v => L.xy[v.key][1]);
        const grp = el('g', { class: 'cluster' }, svg);
        el('rect', { x: Math.min(...xs) - pad, y: Math.min(...ys) - pad - 12, width: Math.max(...xs) - Math.min(...xs) + W + 2 * pad,
          height: Math.max(...ys) - Math.min(...ys) + H + 2 * pad + 12, rx: 8 }, grp);
        const label = el('text', { x: Math.min(...xs) - pad + 4, y: Math.min(...ys) - pad - 2 }, grp, '\u25BE ' + m);
        label.addEventListener('click', () => { collapsed.add(m); draw(); });
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
