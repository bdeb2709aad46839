// qoslane fabric audit page: draws the data of #data (written by qoslane)
// as SVG. Only text and attributes are ever set: never markup.
(function () {
  'use strict';
  var started = window.performance.now();
  var D = JSON.parse(document.getElementById('data').textContent);
  var NS = 'http://www.w3.org/2000/svg';
  var STATES = ['link_down', 'dropped', 'not_operational', 'starved', 'other_vl',
    'unread', 'arbitration_unknown', 'carried'];
  var MARK = { link_down: 'L', dropped: 'D', not_operational: 'N', starved: 'S',
    other_vl: 'V', unread: 'U', arbitration_unknown: 'A', carried: '' };
  var PROBLEM = { link_down: 1, dropped: 1, not_operational: 1, starved: 1, other_vl: 1 };
  var svg = document.getElementById('fabric');
  var details = document.getElementById('details');
  var BW = 96, BH = 26, ROW = 150;

  function el(name, attrs, parent) {
    var e = document.createElementNS(NS, name);
    Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, String(attrs[k])); });
    if (parent) { parent.appendChild(e); }
    return e;
  }
  function h(name, text, parent) {
    var e = document.createElement(name);
    if (text !== undefined) { e.textContent = text; }
    if (parent) { parent.appendChild(e); }
    return e;
  }
  function worse(a, b) { return STATES.indexOf(a) <= STATES.indexOf(b) ? a : b; }
  function words(s) { return s.replace(/_/g, ' '); }
  function short(s) { return s.length > 14 ? s.slice(0, 13) + '…' : s; }

  // Layout: a row per tier of switches (top tier first), then one box per
  // group of HCAs under the switch they hang from.
  var nodes = D.nodes, links = D.links, levels = D.levels;
  var top = 0;
  nodes.forEach(function (n) { if (n.tier > top) { top = n.tier; } });
  var rows = {};
  var groups = [], groupOf = {};
  nodes.forEach(function (n, i) {
    if (n.kind === 'hca') {
      var key = n.leaf === undefined ? -1 : n.leaf;
      if (groupOf[key] === undefined) {
        groupOf[key] = groups.length;
        groups.push({ leaf: key, hcas: [] });
      }
      groups[groupOf[key]].hcas.push(i);
    } else {
      (rows[n.tier] = rows[n.tier] || []).push(i);
    }
  });
  var widest = groups.length;
  Object.keys(rows).forEach(function (t) { widest = Math.max(widest, rows[t].length); });
  var W = Math.max(600, widest * (BW + 16));
  // Tiers spread so that the whole drawing keeps about the box's shape.
  // (At most 400: a wide fabric scrolls rather than grow that tall.)
  ROW = Math.min(400, Math.max(ROW, W * 0.5 / (top + 1)));
  var MARK_SIZE = Math.max(12, W / 80);
  var pos = [];
  Object.keys(rows).forEach(function (t) {
    var r = rows[t];
    r.forEach(function (i, k) { pos[i] = { x: (k + 0.5) * W / r.length, y: 40 + (top - t) * ROW }; });
  });
  var gy = 40 + top * ROW;
  groups.forEach(function (g, k) {
    var x = g.leaf >= 0 && pos[g.leaf] ? pos[g.leaf].x : (k + 0.5) * W / groups.length;
    g.pos = { x: x, y: gy };
    g.hcas.forEach(function (i) { pos[i] = g.pos; });
  });
  var H = gy + 60;

  // Cables: switch to switch drawn one by one; an HCA's cables joined per
  // (group, switch).
  var pairs = {}, joined = {}, joinedList = [];
  links.forEach(function (l, li) {
    var ha = nodes[l.a].kind === 'hca', hb = nodes[l.b].kind === 'hca';
    if (ha || hb) {
      var hca = ha ? l.a : l.b, sw = ha ? l.b : l.a;
      var key = groupOf[nodes[hca].leaf === undefined ? -1 : nodes[hca].leaf] + '/' + sw;
      if (!joined[key]) {
        joined[key] = { group: groupOf[nodes[hca].leaf === undefined ? -1 : nodes[hca].leaf], sw: sw, links: [] };
        joinedList.push(joined[key]);
      }
      joined[key].links.push(li);
    } else {
      var pk = Math.min(l.a, l.b) + '/' + Math.max(l.a, l.b);
      l.shift = pairs[pk] = (pairs[pk] === undefined ? 0 : pairs[pk] + 1);
    }
  });

  function endText(level, li, side) {
    var l = links[li], e = levels[level].ends[li][side];
    var from = side === 0 ? [l.a, l.ap] : [l.b, l.bp], to = side === 0 ? [l.b, l.bp] : [l.a, l.ap];
    var t = nodes[from[0]].name + ' port ' + from[1] + ' → ' + nodes[to[0]].name + ' port ' + to[1] + ': ';
    if (!e.g) { return t + words(e.s) + (e.s === 'unread' ? ' (the port could not be read)' : ''); }
    t += e.g.map(function (g) {
      var s = 'SL ' + levels[level].sl + ' → VL ' + g[0] + ' ' + words(g[1]);
      s += ', arbitration weight ' + (g[2] === null ? 'not read' : g[2]);
      if (g[3].length) { s += ', from in ports ' + g[3].join(','); }
      return s;
    }).join('; ');
    if (e.w !== undefined) { t += '; wait ' + e.w + ' ticks'; }
    return t;
  }
  function linkState(level, li) {
    var e = levels[level].ends[li];
    return worse(e[0].s, e[1].s);
  }
  function linkWait(level, li) {
    var e = levels[level].ends[li], w = [e[0].w, e[1].w].filter(function (x) { return x !== undefined; });
    return w.length ? Math.max.apply(null, w) : undefined;
  }
  // One wait scale for the whole fabric, every level: four bands up to
  // the fabric's most ticks (0 a band of its own).
  var most = 0;
  levels.forEach(function (lv, level) {
    links.forEach(function (l, li) { var w = linkWait(level, li); if (w > most) { most = w; } });
  });
  var edges = [0, 1, 2, 3, 4].map(function (b) { return Math.floor(b * most / 4); });
  function band(w) { var b = 0; while (b < 4 && w > edges[b]) { b += 1; } return b; }
  function waitClass(w) { return w === undefined ? '' : ' w' + band(w); }
  function num(n) { return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ','); }
  // What each failing end reaches: the HCAs whose traffic takes it.
  function reachText(level, li, side) {
    var r = levels[level].ends[li][side].r;
    if (!r) { return ''; }
    var names = r.slice(0, 12).map(function (i) { return nodes[i].name; });
    return 'affects ' + r.length + (r.length === 1 ? ' HCA: ' : ' HCAs: ') + names.join(', ') +
      (r.length > names.length ? ' and ' + (r.length - names.length) + ' more' : '');
  }
  function reachOf(level, lis) {
    var out = [];
    lis.forEach(function (li) {
      levels[level].ends[li].forEach(function (e) { if (e.r) { out = out.concat(e.r); } });
    });
    return out;
  }
  function reachItems(level, li, ul) {
    [0, 1].forEach(function (side) {
      var t = reachText(level, li, side);
      if (t) {
        var l = links[li], at = side === 0 ? [l.a, l.ap] : [l.b, l.bp];
        h('li', nodes[at[0]].name + ' port ' + at[1] + ' ' + t, ul).className = 'reach';
      }
    });
  }
  function mark(parent, x, y, state) {
    if (MARK[state]) {
      el('text', { class: 'mark', x: x, y: y, 'font-size': MARK_SIZE }, parent).textContent = MARK[state];
    }
  }

  // One view per level: its cables.
  var views = [], badNodes = [];
  levels.forEach(function (lv, level) {
    var g = el('g', { class: 'view' + (links.length > 200 ? ' many' : ''), 'data-level': lv.name }, svg);
    g.setAttribute('hidden', '');
    var marks = el('g', { class: 'marks' });
    var bad = {};
    links.forEach(function (l, li) {
      if (l.shift === undefined) { return; }
      var s = linkState(level, li), a = pos[l.a], b = pos[l.b];
      var up = a.y <= b.y ? [a, b] : [b, a], dx = l.shift * 5;
      var line = el('line', { class: 'link s-' + s + waitClass(linkWait(level, li)),
        'data-ends': nodes[l.a].name + ':' + l.ap + ' ' + nodes[l.b].name + ':' + l.bp, 'data-state': s,
        x1: up[0].x + dx, y1: up[0].y + BH / 2, x2: up[1].x + dx, y2: up[1].y - BH / 2, tabindex: 0,
        role: 'button' }, g);
      var label = words(s) + ': ' + endText(level, li, 0) + ' | ' + endText(level, li, 1);
      line.setAttribute('aria-label', label);
      el('title', {}, line).textContent = label;
      line.qlShow = function () { remember(function () { showLink(current, li); }); };
      line.qlNodes = [l.a, l.b];
      line.qlReach = reachOf(level, [li]);
      mark(marks, (a.x + b.x) / 2 + dx, (a.y + b.y) / 2, s);
      if (PROBLEM[levels[level].ends[li][0].s]) { bad[l.a] = true; }
      if (PROBLEM[levels[level].ends[li][1].s]) { bad[l.b] = true; }
    });
    joinedList.forEach(function (j) {
      var s = 'carried', failing = [], w;
      j.links.forEach(function (li) {
        var ls = linkState(level, li), lw = linkWait(level, li);
        s = worse(s, ls);
        if (ls !== 'carried') {
          var l = links[li], hca = nodes[l.a].kind === 'hca' ? [l.a, l.ap] : [l.b, l.bp];
          failing.push(nodes[hca[0]].name + ':' + hca[1]);
        }
        if (lw !== undefined && (w === undefined || lw > w)) { w = lw; }
        var l2 = links[li];
        if (PROBLEM[levels[level].ends[li][0].s] && nodes[l2.a].kind !== 'hca') { bad[l2.a] = true; }
        if (PROBLEM[levels[level].ends[li][1].s] && nodes[l2.b].kind !== 'hca') { bad[l2.b] = true; }
      });
      var gp = groups[j.group].pos, sp = pos[j.sw];
      var line = el('line', { class: 'link grp s-' + s + waitClass(w),
        'data-group': nodes[j.sw].name, 'data-state': s, 'data-failing': failing.join(' '),
        x1: sp.x, y1: sp.y + BH / 2, x2: gp.x, y2: gp.y - BH / 2, tabindex: 0, role: 'button' }, g);
      var label = j.links.length + ' HCA links of ' + nodes[j.sw].name + ': ' + words(s) +
        (failing.length ? ' (' + failing.join(', ') + ')' : '');
      line.setAttribute('aria-label', label);
      el('title', {}, line).textContent = label;
      line.qlShow = function () { remember(function () { showJoined(current, j); }); };
      line.qlNodes = [j.sw];
      line.qlGroup = j.group;
      line.qlReach = reachOf(level, j.links);
      mark(marks, (sp.x + gp.x) / 2, (sp.y + gp.y) / 2, s);
    });
    // The worst drawn last, over the carried ones.
    Array.prototype.slice.call(g.childNodes)
      .sort(function (x, y) {
        return STATES.indexOf(y.getAttribute('data-state')) - STATES.indexOf(x.getAttribute('data-state'));
      })
      .forEach(function (line) { g.appendChild(line); });
    g.appendChild(marks);
    views.push(g);
    badNodes.push(bad);
  });

  // The nodes, drawn over every view.
  var nodeLayer = el('g', { class: 'nodes' }, svg);
  var nodeEls = [], groupEls = [];
  Object.keys(rows).forEach(function (t) {
    el('text', { class: 'tier-label', x: 4, y: 40 + (top - t) * ROW - BH }, nodeLayer).textContent =
      'tier ' + t + (Number(t) === 1 ? ' (leaves)' : '');
    rows[t].forEach(function (i) {
      var n = nodes[i], p = pos[i];
      var g = el('g', { class: 'node ' + n.kind, 'data-name': n.name, tabindex: 0, role: 'button',
        'aria-label': n.kind + ' ' + n.name + ', lid ' + n.lid }, nodeLayer);
      el('rect', { x: p.x - BW / 2, y: p.y - BH / 2, width: BW, height: BH, rx: 4 }, g);
      el('text', { x: p.x, y: p.y }, g).textContent = short(n.name);
      el('title', {}, g).textContent = n.kind + ' ' + n.name + ' (lid ' + n.lid + ', ' + n.guid + ')';
      g.qlShow = function () { remember(function () { showNode(i); }); };
      nodeEls[i] = g;
    });
  });
  el('text', { class: 'tier-label', x: 4, y: gy - BH }, nodeLayer).textContent = 'HCAs, per leaf';
  groups.forEach(function (gr, k) {
    var names = gr.hcas.map(function (i) { return nodes[i].name; });
    var leafName = gr.leaf >= 0 ? nodes[gr.leaf].name : 'no switch';
    var g = el('g', { class: 'group', 'data-leaf': leafName, tabindex: 0, role: 'button',
      'aria-label': gr.hcas.length + ' HCAs of ' + leafName }, nodeLayer);
    el('rect', { x: gr.pos.x - BW / 2, y: gr.pos.y - BH / 2, width: BW, height: BH, rx: 10 }, g);
    el('text', { x: gr.pos.x, y: gr.pos.y }, g).textContent = gr.hcas.length + ' HCAs';
    el('title', {}, g).textContent = names.join(', ');
    g.qlShow = function () { remember(function () { showGroup(k); }); };
    groupEls[k] = g;
  });

  // Details: what was last shown is shown again, of the level chosen,
  // when the level changes.
  var current = 0, again = null;
  function remember(f) { again = f; f(); }
  function panel(title) {
    while (details.firstChild) { details.removeChild(details.firstChild); }
    h('h2', title, details);
    return h('ul', undefined, details);
  }
  function showLink(level, li) {
    var l = links[li];
    var ul = panel('Link ' + nodes[l.a].name + ' ↔ ' + nodes[l.b].name);
    h('li', 'level ' + levels[level].name + ': ' + words(linkState(level, li)), ul);
    h('li', endText(level, li, 0), ul);
    h('li', endText(level, li, 1), ul);
    reachItems(level, li, ul);
  }
  function showJoined(level, j) {
    var ul = panel(nodes[j.sw].name + ' ↔ its HCAs');
    h('li', 'level ' + levels[level].name, ul);
    j.links.forEach(function (li) {
      h('li', endText(level, li, 0), ul);
      h('li', endText(level, li, 1), ul);
      reachItems(level, li, ul);
    });
  }
  function showNode(i) {
    var n = nodes[i];
    var ul = panel(n.kind + ' ' + n.name);
    h('li', 'lid ' + n.lid + ', guid ' + n.guid + ', tier ' + n.tier, ul);
    h('li', 'level ' + levels[current].name, ul);
    links.forEach(function (l, li) {
      [l.a, l.b].forEach(function (at, side) {
        if (at !== i) { return; }
        h('li', endText(current, li, side), ul);
        var t = reachText(current, li, side);
        if (t) { h('li', 'port ' + (side === 0 ? l.ap : l.bp) + ' ' + t, ul).className = 'reach'; }
      });
    });
  }
  function showGroup(k) {
    var ul = panel(groups[k].hcas.length + ' HCAs of ' +
      (groups[k].leaf >= 0 ? nodes[groups[k].leaf].name : 'no switch'));
    h('li', 'level ' + levels[current].name, ul);
    groups[k].hcas.forEach(function (i) {
      links.forEach(function (l, li) {
        if (l.a === i || l.b === i) {
          h('li', nodes[i].name + ': ' + words(linkState(current, li)) + ' — ' +
            endText(current, li, l.a === i ? 0 : 1) + ' | ' + endText(current, li, l.a === i ? 1 : 0), ul);
        }
      });
    });
  }
  function shown(t) { var e = t; while (e && !e.qlShow) { e = e.parentNode; } return e; }
  svg.addEventListener('click', function (ev) { var e = shown(ev.target); if (e) { e.qlShow(); } });
  svg.addEventListener('mouseover', function (ev) { var e = shown(ev.target); if (e) { e.qlShow(); } });
  svg.addEventListener('keydown', function (ev) {
    var e = shown(ev.target);
    if (e && (ev.key === 'Enter' || ev.key === ' ')) { e.qlShow(); ev.preventDefault(); return; }
    var step = view.w / 10;
    var keys = { ArrowLeft: [-step, 0], ArrowRight: [step, 0], ArrowUp: [0, -step], ArrowDown: [0, step] };
    if (keys[ev.key] && ev.target === svg) { view.x += keys[ev.key][0]; view.y += keys[ev.key][1]; apply(); ev.preventDefault(); }
    if (ev.key === '+' || ev.key === '=') { zoom(0.8); }
    if (ev.key === '-') { zoom(1.25); }
    if (ev.key === '0') { fit(); }
  });

  // Levels.
  var tabs = document.getElementById('levels');
  var buttons = levels.map(function (lv, level) {
    var b = h('button', 'level ' + lv.name + ' (SL ' + lv.sl + (lv.vl === null ? '' : ' → VL ' + lv.vl) + ')', tabs);
    b.type = 'button';
    b.setAttribute('role', 'tab');
    b.className = lv.carried ? 'ok' : 'bad';
    b.addEventListener('click', function () { select(level); });
    b.addEventListener('keydown', function (ev) {
      var d = ev.key === 'ArrowRight' ? 1 : ev.key === 'ArrowLeft' ? -1 : 0;
      if (d) { var k = (level + d + levels.length) % levels.length; select(k); buttons[k].focus(); }
    });
    return b;
  });
  function select(level) {
    current = level;
    views.forEach(function (v, k) { if (k === level) { v.removeAttribute('hidden'); } else { v.setAttribute('hidden', ''); } });
    buttons.forEach(function (b, k) {
      b.setAttribute('aria-selected', String(k === level));
      b.tabIndex = k === level ? 0 : -1;
    });
    nodeEls.forEach(function (g, i) { if (g) { g.classList.toggle('bad', !!badNodes[level][i]); } });
    quiet();
    if (again) { again(); }
  }

  // Only what fails: the links with no finding in the level shown hidden,
  // and the switches and groups of HCAs with none left.
  var only = document.getElementById('only-failing'), hiddenCount = document.getElementById('hidden-count');
  function quiet() {
    var on = only.checked, keep = {}, keepGroup = {}, n = { links: 0, switches: 0, groups: 0 };
    Array.prototype.forEach.call(views[current] ? views[current].childNodes : [], function (line) {
      var s = line.getAttribute('data-state');
      if (!s) { return; }
      var q = s === 'carried';
      line.classList.toggle('quiet', on && q);
      if (q) { n.links += 1; return; }
      line.qlNodes.forEach(function (i) { keep[i] = true; });
      if (line.qlGroup !== undefined) { keepGroup[line.qlGroup] = true; }
      // The HCAs a failing link affects stay in view.
      line.qlReach.forEach(function (i) { keepGroup[groupOf[nodes[i].leaf === undefined ? -1 : nodes[i].leaf]] = true; });
    });
    nodeEls.forEach(function (g, i) { if (g) { g.classList.toggle('quiet', on && !keep[i]); if (!keep[i]) { n.switches += 1; } } });
    groupEls.forEach(function (g, k) { g.classList.toggle('quiet', on && !keepGroup[k]); if (!keepGroup[k]) { n.groups += 1; } });
    svg.classList.toggle('only-failing', on);
    hiddenCount.textContent = on ? 'hidden, no finding in level ' + levels[current].name + ': ' +
      n.links + ' links, ' + n.switches + ' switches, ' + n.groups + ' groups of HCAs' : '';
  }
  only.addEventListener('change', quiet);

  // Zoom and pan.
  // The whole drawing fits the box unless its labels would be drawn
  // smaller than LABEL_MIN px: then it grows, and the box scrolls.
  var LABEL = 11, LABEL_MIN = 11, drawing = document.getElementById('drawing');
  var view = { x: 0, y: 0, w: W, h: H };
  function apply() { svg.setAttribute('viewBox', [view.x, view.y, view.w, view.h].join(' ')); }
  function fit() {
    view = { x: 0, y: 0, w: W, h: H };
    var bw = drawing.clientWidth || 800, bh = drawing.clientHeight || 600;
    var k = Math.max(Math.min(bw / W, bh / H), LABEL_MIN / LABEL);
    svg.style.width = Math.max(bw, Math.ceil(W * k)) + 'px';
    svg.style.height = Math.max(bh, Math.ceil(H * k)) + 'px';
    apply();
  }
  function zoom(f, cx, cy) {
    cx = cx === undefined ? view.x + view.w / 2 : cx;
    cy = cy === undefined ? view.y + view.h / 2 : cy;
    view = { x: cx - (cx - view.x) * f, y: cy - (cy - view.y) * f, w: view.w * f, h: view.h * f };
    apply();
  }
  function centre(p) { view.x = p.x - view.w / 2; view.y = p.y - view.h / 2; apply(); }
  document.getElementById('zoom-in').addEventListener('click', function () { zoom(0.8); });
  document.getElementById('zoom-out').addEventListener('click', function () { zoom(1.25); });
  document.getElementById('zoom-fit').addEventListener('click', fit);
  // The wheel scrolls the box; with Ctrl it zooms.
  svg.addEventListener('wheel', function (ev) {
    if (!ev.ctrlKey) { return; }
    var r = svg.getBoundingClientRect();
    zoom(ev.deltaY < 0 ? 0.85 : 1.18, view.x + (ev.clientX - r.left) / r.width * view.w,
      view.y + (ev.clientY - r.top) / r.height * view.h);
    ev.preventDefault();
  }, { passive: false });
  var drag = null;
  svg.addEventListener('pointerdown', function (ev) { drag = { x: ev.clientX, y: ev.clientY, v: { x: view.x, y: view.y } }; });
  window.addEventListener('pointerup', function () { drag = null; });
  svg.addEventListener('pointermove', function (ev) {
    if (!drag) { return; }
    var r = svg.getBoundingClientRect();
    view.x = drag.v.x - (ev.clientX - drag.x) / r.width * view.w;
    view.y = drag.v.y - (ev.clientY - drag.y) / r.height * view.h;
    apply();
  });

  // Search.
  var find = document.getElementById('find'), found = document.getElementById('found');
  var hits = [];
  function search() {
    var q = find.value.trim().toLowerCase();
    hits.forEach(function (e) { e.classList.remove('hit'); });
    hits = [];
    if (!q) { found.textContent = ''; return; }
    var seen = [];
    nodes.forEach(function (n, i) {
      if (n.name.toLowerCase().indexOf(q) < 0) { return; }
      var e = n.kind === 'hca' ? groupEls[groupOf[n.leaf === undefined ? -1 : n.leaf]] : nodeEls[i];
      if (e && seen.indexOf(e) < 0) { seen.push(e); e.classList.add('hit'); hits.push({ e: e, i: i }); }
    });
    hits = hits.map(function (x) { return x.e; });
    found.textContent = hits.length ? hits.length + ' found (Enter: go to the first)' : 'nothing found';
  }
  find.addEventListener('input', search);
  find.addEventListener('keydown', function (ev) {
    if (ev.key !== 'Enter' || !hits.length) { return; }
    var e = hits[0], r = e.querySelector('rect');
    centre({ x: Number(r.getAttribute('x')) + BW / 2, y: Number(r.getAttribute('y')) + BH / 2 });
    e.focus();
    e.qlShow();
  });

  // Colour by wait, when the wait counters were read.
  if (D.waits) {
    document.getElementById('by-label').removeAttribute('hidden');
    var wl = document.querySelector('.wait-legend');
    [1, 2, 3, 4].forEach(function (b) {
      var lo = edges[b - 1] + 1, hi = edges[b];
      var e = wl.querySelector('.w' + b);
      e.textContent = lo >= hi ? num(hi) : num(lo) + '–' + num(hi);
      if (hi < lo) { e.hidden = true; }
    });
    document.getElementById('wait-most').textContent = num(most);
    document.getElementById('by').addEventListener('change', function (ev) {
      svg.classList.toggle('by-wait', ev.target.value === 'wait');
      if (wl) { wl.hidden = ev.target.value !== 'wait'; }
    });
  }

  // The audit's time in the viewer's own time zone too.
  var at = document.getElementById('audit-time'), when = new Date(at.getAttribute('datetime'));
  if (!isNaN(when.getTime())) {
    var off = -when.getTimezoneOffset(), p2 = function (n) { return (n < 10 ? '0' : '') + n; };
    document.getElementById('local-time').textContent = when.getFullYear() + '-' + p2(when.getMonth() + 1) +
      '-' + p2(when.getDate()) + ' ' + p2(when.getHours()) + ':' + p2(when.getMinutes()) + ':' +
      p2(when.getSeconds()) + ' (your local time, UTC' + (off < 0 ? '−' : '+') + p2(Math.floor(Math.abs(off) / 60)) +
      ':' + p2(Math.abs(off) % 60) + ')';
  }

  var first = 0;
  levels.forEach(function (lv, k) { if (!lv.carried && levels[first].carried) { first = k; } });
  select(first);
  fit();
  // The worst failing cable of that level (drawn last), in the details at once.
  var failing = Array.prototype.filter.call(views[first] ? views[first].childNodes : [], function (e) {
    return PROBLEM[e.getAttribute('data-state')];
  });
  if (failing.length) { failing[failing.length - 1].qlShow(); }
  // The address may name a view: #level=NAME&failing&by=wait.
  location.hash.slice(1).split('&').forEach(function (kv) {
    var p = kv.split('='), v = decodeURIComponent(p[1] || '');
    if (p[0] === 'level') {
      levels.forEach(function (lv, k) { if (lv.name === v) { select(k); } });
    } else if (p[0] === 'failing') {
      only.checked = true;
      quiet();
    } else if (p[0] === 'by' && D.waits && (v === 'wait' || v === 'verdict')) {
      var by = document.getElementById('by');
      by.value = v;
      by.dispatchEvent(new Event('change'));
    }
  });
  // The size of a switch's label as drawn, in CSS pixels.
  var ctm = svg.getScreenCTM();
  if (ctm) { document.body.setAttribute('data-label-px', String(Math.round(ctm.a * LABEL * 10) / 10)); }
  document.body.setAttribute('data-drawn', String(nodes.length));
  document.body.setAttribute('data-drawn-ms', String(Math.round(window.performance.now() - started)));
}());
