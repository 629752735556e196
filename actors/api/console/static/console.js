// The Narad console: one page, three views (#/cluster, #/moves, #/topics
// and #/topic/NAME), each drawn once and then refreshed by polling the
// node's /v1 API every second while it is shown. Every call carries the
// user's credentials (HTTP Basic, kept for the tab's life in
// sessionStorage) and the X-Narad-Console header, so that a wrong password
// answers 401 without the browser's own login dialog. GET /v1/whoami says
// who the user is: actions appear only for an admin, the peek only for a
// user who may consume the topic, so nothing shown is refused. Data is
// put on the page as text, never as HTML.
'use strict';

const POLL_MS = 1000;
// PAGE bounds the rows of any table: a cluster of 30,000 partitions is
// shown a page at a time, never all at once.
const PAGE = 50;
// ETA_SAMPLES is the window of summaries the rates are taken over, as
// `narad cluster moves --watch` keeps it.
const ETA_SAMPLES = 12;

const state = {
  auth: sessionStorage.getItem('narad-auth'),
  me: null,
  view: null,
  timer: null,
  busy: false,
  samples: [],
};

// ---- helpers ----

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (k === 'class') e.className = v;
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function $(id) { return document.getElementById(id); }

function basic(user, password) {
  const bytes = new TextEncoder().encode(user + ':' + password);
  let s = '';
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s);
}

// api calls the node's API and returns {status, ok, data}; data is the
// decoded JSON body, or null for none.
async function api(method, path, body) {
  const headers = { 'X-Narad-Console': '1' };
  if (state.auth) headers.Authorization = 'Basic ' + state.auth;
  const init = { method, headers, cache: 'no-store' };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const r = await fetch(path, init);
  const text = await r.text();
  let data = null;
  if (text) {
    try { data = JSON.parse(text); } catch { data = text; }
  }
  return { status: r.status, ok: r.ok, data };
}

function errorText(r) {
  if (r.data && typeof r.data === 'object' && r.data.error) return r.status + ': ' + r.data.error;
  if (typeof r.data === 'string' && r.data) return r.status + ': ' + r.data;
  return 'HTTP ' + r.status;
}

// get is a GET that throws the API's error text.
async function get(path) {
  const r = await api('GET', path);
  if (r.status === 401) { showLogin('Your session ended: log in again.'); throw new Error('logged out'); }
  if (!r.ok) throw new Error(path + ': ' + errorText(r));
  return r.data;
}

function mib(bytes) {
  return (bytes / (1024 * 1024)).toFixed(1) + ' MiB';
}

function size(bytes) {
  if (bytes === undefined || bytes === null) return '–';
  if (bytes < 1024) return bytes + ' B';
  if (bytes < 1024 * 1024) return (bytes / 1024).toFixed(1) + ' KiB';
  if (bytes < 1024 * 1024 * 1024) return mib(bytes);
  return (bytes / (1024 * 1024 * 1024)).toFixed(2) + ' GiB';
}

function duration(seconds) {
  seconds = Math.round(seconds);
  const h = Math.floor(seconds / 3600), m = Math.floor(seconds % 3600 / 60), s = seconds % 60;
  return (h ? h + 'h' : '') + (h || m ? m + 'm' : '') + s + 's';
}

function isAdmin() { return !!(state.me && state.me.admin); }

// allowed is the API's grant check (actors/api Allowed) for the page's
// own use: it hides what the API would refuse, and decides nothing.
function allowed(action, topic) {
  if (!state.me) return false;
  if (state.me.admin) return true;
  for (const g of state.me.grants || []) {
    if (g.action !== action) continue;
    for (const p of g.patterns || []) {
      if (p.endsWith('*') ? topic.startsWith(p.slice(0, -1)) : p === topic) return true;
    }
  }
  return false;
}

// pager is a table's page controls: page i of rows.length rows.
function pager(id, total, page, go) {
  const pages = Math.max(1, Math.ceil(total / PAGE));
  return el('div', { class: 'pager', id },
    el('button', { type: 'button', disabled: page <= 0, onclick: () => go(page - 1) }, '‹ Prev'),
    ` page ${page + 1} of ${pages} (${total} rows) `,
    el('button', { type: 'button', disabled: page >= pages - 1, onclick: () => go(page + 1) }, 'Next ›'));
}

function table(headers, rows, attrs) {
  return el('table', attrs || {},
    el('thead', {}, el('tr', {}, headers.map((h) => el('th', {}, h)))),
    el('tbody', {}, rows));
}

function replace(id, node) {
  const old = $(id);
  if (old) old.replaceWith(node);
}

// confirmAction asks before an action: title, a body of nodes, and the
// OK button's label. It resolves true on OK.
function confirmAction(title, body, ok) {
  const d = $('confirm');
  $('confirm-title').textContent = title;
  $('confirm-body').replaceChildren(...body);
  $('confirm-ok').textContent = ok;
  $('confirm-ok').hidden = !ok;
  return new Promise((resolve) => {
    d.addEventListener('close', () => resolve(d.returnValue === 'ok'), { once: true });
    d.returnValue = '';
    d.showModal();
  });
}

// tell shows an action's answer until the next one.
function tell(text, bad) {
  const n = $('answer');
  if (!n) return;
  n.textContent = text;
  n.className = bad ? 'answer error' : 'answer';
}

// ---- login ----

function showLogin(why) {
  state.me = null;
  stopPolling();
  $('login').hidden = false;
  $('nav').hidden = true;
  $('logout').hidden = true;
  $('who').textContent = '';
  $('main').replaceChildren();
  $('login-error').textContent = why || '';
}

async function whoami() {
  const r = await api('GET', '/v1/whoami');
  if (r.ok) return r.data;
  if (r.status === 401) return null;
  throw new Error(errorText(r));
}

async function start() {
  $('login-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    state.auth = basic($('login-user').value, $('login-password').value);
    let me;
    try { me = await whoami(); } catch (e) { $('login-error').textContent = e.message; return; }
    if (!me) { state.auth = null; $('login-error').textContent = 'Wrong user or password.'; return; }
    sessionStorage.setItem('narad-auth', state.auth);
    $('login-password').value = '';
    loggedIn(me);
  });
  $('logout').addEventListener('click', () => {
    state.auth = null;
    sessionStorage.removeItem('narad-auth');
    showLogin('');
  });
  window.addEventListener('hashchange', route);
  let me = null;
  try { me = await whoami(); } catch (e) { $('problem').textContent = e.message; }
  if (me) loggedIn(me); else showLogin('');
}

function loggedIn(me) {
  state.me = me;
  $('login').hidden = true;
  $('nav').hidden = false;
  // With security off every caller is root: there is no one to log out.
  $('logout').hidden = !state.auth;
  $('who').textContent = (me.username || 'root (security off)') + (me.admin ? ' · admin' : ' · viewer');
  $('who').dataset.role = me.admin ? 'admin' : 'viewer';
  route();
}

// ---- routing and polling ----

const views = {};

function route() {
  if (!state.me) return;
  const hash = location.hash || '#/cluster';
  let name = hash.slice(2), arg = '';
  const slash = name.indexOf('/');
  if (slash >= 0) { arg = decodeURIComponent(name.slice(slash + 1)); name = name.slice(0, slash); }
  const view = views[name] || views.cluster;
  for (const a of document.querySelectorAll('#nav a')) {
    a.classList.toggle('active', a.dataset.view === (name === 'topic' ? 'topics' : name));
  }
  stopPolling();
  state.view = view;
  $('main').replaceChildren(view.draw(arg));
  tick();
}

function stopPolling() {
  clearTimeout(state.timer);
  state.timer = null;
  state.view = null;
}

// tick refreshes the view shown, then schedules the next; a view left
// while its refresh ran is not redrawn.
async function tick() {
  const view = state.view;
  if (!view) return;
  clearTimeout(state.timer);
  try {
    await view.refresh();
    if (state.view !== view) return;
    $('updated').textContent = 'updated ' + new Date().toLocaleTimeString();
    $('problem').textContent = '';
  } catch (e) {
    if (state.view !== view) return;
    $('problem').textContent = e.message;
  }
  state.timer = setTimeout(tick, POLL_MS);
}

// ---- cluster ----

views.cluster = {
  draw() {
    return el('section', { id: 'cluster-view' },
      el('h2', {}, 'Cluster'),
      el('p', { id: 'answer', class: 'answer' }),
      el('div', { id: 'leaders' }),
      el('h3', {}, 'Members'),
      el('div', { id: 'members' }),
      el('div', { id: 'set-aside' }));
  },
  async refresh() {
    const [members, moves, leaders] = await Promise.all([
      get('/v1/cluster/members'), get('/v1/cluster/moves'), get('/v1/cluster/leaders')]);
    const incoming = {};
    for (const m of moves.moves) incoming[m.to] = (incoming[m.to] || 0) + 1;
    const meta = leaders.shards.find((s) => s.kind === 'metadata');
    replace('leaders', el('div', { id: 'leaders' },
      el('p', {}, 'Metadata leader: ', el('strong', { id: 'metadata-leader' }, (meta && meta.leader) || 'none known')),
      table(['Shard', 'Kind', 'Leader', 'Term'], leaders.shards.map((s) =>
        el('tr', {}, el('td', {}, s.shard), el('td', {}, s.kind), el('td', {}, s.leader || 'none known'), el('td', {}, s.term || '–'))),
      { class: 'compact' })));
    const heads = ['Member', 'Address', 'Role', 'Status', 'State', 'Owned', 'Moves out', 'Moves in', 'Set aside'];
    if (isAdmin()) heads.push('Actions');
    replace('members', el('div', { id: 'members' }, table(heads, members.members.map((m) => {
      const stateText = [m.draining && 'draining', m.leaving && 'leaving'].filter(Boolean).join(', ') || '–';
      return el('tr', { 'data-member': m.id },
        el('td', {}, m.id), el('td', {}, m.addr), el('td', {}, m.role || '–'),
        el('td', { class: 'status-' + m.status }, m.status), el('td', {}, stateText),
        el('td', { class: 'num' }, m.owned_partitions), el('td', { class: 'num' }, m.outbound_moves),
        el('td', { class: 'num' }, incoming[m.id] || 0), el('td', { class: 'num' }, size(m.quarantined_bytes)),
        isAdmin() && el('td', {}, m.draining
          ? el('button', { type: 'button', class: 'action', onclick: () => cancelDecommission(m.id) }, 'Cancel decommission')
          : el('button', { type: 'button', class: 'action danger', 'data-action': 'decommission', onclick: () => decommission(m.id) }, 'Decommission…')));
    }), { id: 'members-table' })));
    // The copies set aside cost a request to every member: asked only
    // while some member reports holding any.
    const held = members.members.some((m) => m.quarantined_bytes > 0);
    replace('set-aside', held ? setAsideTable(await get('/v1/cluster/quarantine')) : el('div', { id: 'set-aside' }));
  },
};

// setAsideTable lists the first page of copies the members set aside;
// an admin may release one.
function setAsideTable(list) {
  const rows = [];
  for (const n of list.nodes) for (const c of n.copies) rows.push({ node: n.node, ...c });
  const heads = ['Node', 'Path', 'Kind', 'Topic', 'Partition', 'Size', 'Age'];
  if (isAdmin()) heads.push('Actions');
  const errors = Object.entries(list.errors || {});
  return el('div', { id: 'set-aside' },
    el('h3', {}, 'Copies set aside'),
    el('p', {}, 'A copy a node set aside instead of deleting it may hold the only copy of some records: release one only once you know it does not.'),
    errors.length ? el('p', { class: 'error' }, 'No listing from ' + errors.map(([id, why]) => id + ' (' + why + ')').join(', ')) : null,
    table(heads, rows.slice(0, PAGE).map((c) => el('tr', {},
      el('td', {}, c.node), el('td', {}, c.path), el('td', {}, c.kind), el('td', {}, c.topic || '–'),
      el('td', { class: 'num' }, c.partition < 0 ? 'all' : c.partition), el('td', { class: 'num' }, size(c.bytes)),
      el('td', {}, duration(c.age_ms / 1000)),
      isAdmin() && el('td', {}, el('button', { type: 'button', class: 'action danger', onclick: () => releaseCopy(c.node, c.path) }, 'Release…')))),
    { id: 'set-aside-table' }),
    rows.length > PAGE ? el('p', {}, `${rows.length - PAGE} more: narad cluster quarantine lists them all.`) : null);
}

// releaseCopy runs the release's dry run first and shows what it would
// remove; only then does it offer the release.
async function releaseCopy(node, path) {
  const dry = await api('POST', '/v1/cluster/quarantine/release', { node, path, dry_run: true });
  if (!dry.ok) {
    await confirmAction('Release a copy on ' + node, [el('p', { class: 'error' }, 'Dry run: ' + errorText(dry))], '');
    return;
  }
  const d = dry.data;
  if (!await confirmAction('Release a copy on ' + node,
    [el('p', {}, `Dry run: this removes ${d.kind} ${d.path} on ${d.node}, ${size(d.bytes)}. It cannot be undone.`)], 'Release')) return;
  const r = await api('POST', '/v1/cluster/quarantine/release', { node, path, dry_run: false });
  tell(r.ok ? `Released ${path} on ${node} (${size(r.data.bytes)}).` : `Release of ${path} on ${node}: ${errorText(r)}`, !r.ok);
  tick();
}

// decommission runs the dry run first and shows its verdict; only an ok
// verdict offers the decommission itself.
async function decommission(id) {
  const path = '/v1/cluster/members/' + encodeURIComponent(id) + '/decommission';
  const dry = await api('POST', path + '?dry_run=1');
  if (!dry.ok) {
    await confirmAction('Decommission ' + id, [el('p', { id: 'verdict', class: 'error' }, 'Dry run: ' + errorText(dry))], '');
    return;
  }
  const v = dry.data;
  const ok = v.verdict === 'ok';
  const body = [
    el('p', { id: 'verdict', 'data-verdict': v.verdict },
      `Dry run verdict: ${v.verdict}. ${id} owns ${v.owned_partitions} partitions` + (ok ? '; they will be moved to the other members, then it leaves.' : '.')),
    v.reason && el('p', { class: 'error' }, v.reason),
  ].filter(Boolean);
  if (!await confirmAction('Decommission ' + id, body, ok ? 'Decommission ' + id : '')) {
    tell(`Decommission of ${id}: dry run ${v.verdict}` + (v.reason ? ' (' + v.reason + ')' : '') + '; nothing done.', !ok);
    return;
  }
  const r = await api('POST', path);
  tell(r.ok ? `${id} is draining: its partitions move away.` : `Decommission of ${id}: ${errorText(r)}`, !r.ok);
  tick();
}

async function cancelDecommission(id) {
  if (!await confirmAction('Cancel the decommission of ' + id, [el('p', {}, id + ' stops draining and may be given partitions again.')], 'Cancel decommission')) return;
  const r = await api('DELETE', '/v1/cluster/members/' + encodeURIComponent(id) + '/decommission');
  tell(r.ok ? `${id} no longer drains.` : `Cancel decommission of ${id}: ${errorText(r)}`, !r.ok);
  tick();
}

// ---- moves ----

// The rates are taken as `narad cluster moves --watch` takes them
// (cmd/narad/cluster_cli.go): MiB/s between the last two summaries, the
// ETA from the moves done over the window; a counter that fell (a node
// restarted) starts the window again.
function addSample(s) {
  const w = state.samples, cur = { at: performance.now() / 1000, done: s.done, bytes: s.bytes_copied };
  const last = w[w.length - 1];
  if (last && (cur.done < last.done || cur.bytes < last.bytes)) w.length = 0;
  w.push(cur);
  if (w.length > ETA_SAMPLES) w.splice(0, w.length - ETA_SAMPLES);
}

function bytesPerSecond() {
  const w = state.samples;
  if (w.length < 2) return null;
  const a = w[w.length - 2], b = w[w.length - 1];
  return b.at > a.at ? (b.bytes - a.bytes) / (b.at - a.at) : null;
}

function secondsLeft(remaining) {
  if (remaining === 0) return 0;
  const w = state.samples;
  if (w.length < 2) return null;
  const dt = w[w.length - 1].at - w[0].at, done = w[w.length - 1].done - w[0].done;
  return dt > 0 && done > 0 ? dt / done * remaining : null;
}

views.moves = {
  page: 0,
  draw() {
    state.samples = [];
    this.page = 0;
    return el('section', { id: 'moves-view' },
      el('h2', {}, 'Moves'),
      el('p', { id: 'answer', class: 'answer' }),
      el('div', { id: 'summary' }),
      el('h3', {}, 'Partitions per node'),
      el('div', { id: 'flow' }),
      el('h3', {}, 'In flight'),
      el('div', { id: 'moves' }));
  },
  async refresh() {
    const [list, members] = await Promise.all([get('/v1/cluster/moves?summary=1'), get('/v1/cluster/members')]);
    this.last = { list, members };
    this.render();
  },
  render() {
    const { list, members } = this.last;
    const s = list.summary || { done: 0, in_flight: list.moves.length, held: 0, frozen: 0, bytes_copied: 0, nodes: 0 };
    addSample(s);
    const bps = bytesPerSecond(), eta = secondsLeft(s.in_flight);
    const card = (id, label, value) => el('div', { class: 'card', id }, el('span', { class: 'label' }, label), el('span', { class: 'value' }, value));
    replace('summary', el('div', { id: 'summary', class: 'cards' },
      card('moves-in-flight', 'In flight', s.in_flight),
      card('moves-done', 'Done', s.done),
      card('moves-held', 'Held', s.held),
      card('moves-frozen', 'Frozen', s.frozen),
      card('moves-rate', 'MiB/s', bps === null ? '–' : (bps / (1024 * 1024)).toFixed(1)),
      card('moves-eta', 'ETA', eta === null ? '–' : duration(eta)),
      s.missing && s.missing.length ? el('p', { class: 'error' }, 'No answer from ' + s.missing.join(', ') + ': their share is left out.') : null));
    replace('flow', flowPicture(members.members, list.moves));
    const rows = list.moves.slice(this.page * PAGE, (this.page + 1) * PAGE);
    const heads = ['Topic', 'Partition', 'From', 'To', 'Blocked'];
    if (isAdmin()) heads.push('Actions');
    replace('moves', el('div', { id: 'moves' },
      list.moves.length === 0 ? el('p', { id: 'no-moves' }, 'Nothing moves.') : null,
      table(heads, rows.map((m) => el('tr', {},
        el('td', {}, m.topic), el('td', { class: 'num' }, m.partition),
        el('td', {}, m.from + (m.from_status && m.from_status !== 'alive' ? ' (' + m.from_status + ')' : '')),
        el('td', {}, m.to + (m.to_status && m.to_status !== 'alive' ? ' (' + m.to_status + ')' : '')),
        el('td', { class: m.blocked ? 'error' : '' }, (m.blocked || []).join(', ') || '–'),
        isAdmin() && el('td', {}, el('button', { type: 'button', class: 'action danger', onclick: () => abortMove(m) }, 'Abort…')))),
      { id: 'moves-table' }),
      pager('moves-pager', list.moves.length, this.page, (p) => { this.page = p; this.render(); })));
  },
};

// flowPicture draws each member as a bar of the partitions it owns, with
// the partitions leaving it (−) and arriving on it (+), and an arrow for
// each pair of nodes a move runs between, as thick as its count.
function flowPicture(members, moves) {
  const ns = 'http://www.w3.org/2000/svg';
  const svg = (tag, attrs, text) => {
    const e = document.createElementNS(ns, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
    if (text !== undefined) e.textContent = text;
    return e;
  };
  const ids = members.map((m) => m.id);
  for (const m of moves) for (const id of [m.from, m.to]) if (!ids.includes(id)) ids.push(id);
  const owned = Object.fromEntries(members.map((m) => [m.id, m.owned_partitions]));
  const out = {}, inn = {}, pairs = {};
  for (const m of moves) {
    out[m.from] = (out[m.from] || 0) + 1;
    inn[m.to] = (inn[m.to] || 0) + 1;
    const k = m.from + '\u0000' + m.to;
    pairs[k] = (pairs[k] || 0) + 1;
  }
  const most = Math.max(1, ...ids.map((id) => owned[id] || 0));
  const colW = 120, barH = 140, top = 110, w = Math.max(ids.length, 1) * colW, h = top + barH + 60;
  const root = svg('svg', { id: 'flow-svg', viewBox: `0 0 ${w} ${h}`, width: w, height: h, role: 'img' });
  root.append(svg('defs', {}));
  const marker = svg('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 6, markerHeight: 6, orient: 'auto-start-reverse' });
  marker.append(svg('path', { d: 'M0,0 L10,5 L0,10 z', class: 'arrow-head' }));
  root.firstChild.append(marker);
  const x = (id) => ids.indexOf(id) * colW + colW / 2;
  for (const [k, n] of Object.entries(pairs)) {
    const [from, to] = k.split('\u0000');
    // A cubic whose two control points share a height c peaks at
    // (y0 + 3c) / 4: the count sits just above it, inside the picture.
    const x1 = x(from), x2 = x(to), y0 = top - 18, c = Math.max(y0 - 40 - Math.abs(x2 - x1) / 5, 0);
    root.append(svg('path', { d: `M${x1},${y0} C${x1},${c} ${x2},${c} ${x2},${y0}`,
      class: 'flow-arrow', 'stroke-width': Math.min(2 + n / 2, 14), 'marker-end': 'url(#arrow)', 'data-from': from, 'data-to': to }));
    root.append(svg('text', { x: (x1 + x2) / 2, y: (y0 + 3 * c) / 4 - 6, class: 'flow-count', 'text-anchor': 'middle' }, n));
  }
  for (const id of ids) {
    const n = owned[id] || 0, bh = Math.round(n / most * barH), cx = x(id);
    const g = svg('g', { class: 'node', 'data-node': id });
    g.append(svg('rect', { x: cx - 30, y: top + barH - bh, width: 60, height: bh, class: 'bar' + (out[id] ? ' leaving' : '') + (inn[id] ? ' arriving' : '') }));
    g.append(svg('text', { x: cx, y: top + barH - bh - 4, 'text-anchor': 'middle', class: 'owned' }, n));
    g.append(svg('text', { x: cx, y: top + barH + 18, 'text-anchor': 'middle', class: 'node-id' }, id));
    g.append(svg('text', { x: cx, y: top + barH + 36, 'text-anchor': 'middle', class: 'inout' },
      `−${out[id] || 0} / +${inn[id] || 0}`));
    root.append(g);
  }
  const legend = el('p', { class: 'legend' }, 'Bars: partitions owned. −out / +in: partitions leaving and arriving. Arrows: moves between two nodes.');
  return el('div', { id: 'flow' }, root, legend);
}

async function abortMove(m) {
  const name = `${m.topic}/${m.partition}`;
  if (!await confirmAction('Abort the move of ' + name, [el('p', {}, `${name} stays on ${m.from} and is not moved to ${m.to}; the planner may plan it again.`)], 'Abort move')) return;
  const r = await api('POST', `/v1/cluster/moves/${encodeURIComponent(m.topic)}/${m.partition}/abort?target=${encodeURIComponent(m.to)}`);
  const d = r.data || {};
  tell(r.ok ? `Move of ${name} aborted (${d.result}).` : `Abort of ${name}: ${d.result || ''} ${d.error || errorText(r)}`, !r.ok);
  tick();
}

// ---- topics ----

views.topics = {
  tokens: [''],
  page: 0,
  draw() {
    this.tokens = [''];
    this.page = 0;
    return el('section', { id: 'topics-view' },
      el('h2', {}, 'Topics'),
      el('div', { id: 'topics' }));
  },
  async refresh() {
    const token = this.tokens[this.page];
    const page = await get(`/v1/topics?limit=${PAGE}&page_token=${encodeURIComponent(token)}`);
    this.tokens[this.page + 1] = page.next_page_token;
    const go = (p) => { this.page = p; tick(); };
    replace('topics', el('div', { id: 'topics' },
      page.topics.length === 0 ? el('p', {}, 'No topics.') : null,
      table(['Topic', 'Partitions', 'Role', 'Owner', 'Retention', 'Children / parent'], page.topics.map((t) => el('tr', {},
        el('td', {}, el('a', { href: '#/topic/' + encodeURIComponent(t.name) }, t.name)),
        el('td', { class: 'num' }, t.partitions), el('td', {}, t.role || '–'), el('td', {}, t.owner || '–'),
        el('td', {}, t.retention_ms ? duration(t.retention_ms / 1000) : 'forever'),
        el('td', {}, t.parent ? 'child of ' + t.parent : (t.children || []).join(', ') || '–'))), { id: 'topics-table' }),
      el('div', { class: 'pager', id: 'topics-pager' },
        el('button', { type: 'button', disabled: this.page === 0, onclick: () => go(this.page - 1) }, '‹ Prev'),
        ` page ${this.page + 1} `,
        el('button', { type: 'button', disabled: !page.next_page_token, onclick: () => go(this.page + 1) }, 'Next ›'))));
  },
};

views.topic = {
  name: '',
  page: 0,
  draw(name) {
    this.name = name;
    this.page = 0;
    const t = encodeURIComponent(name);
    return el('section', { id: 'topic-view' },
      el('h2', {}, 'Topic ', el('span', { id: 'topic-name' }, name)),
      el('p', {}, el('a', { href: '#/topics' }, '‹ all topics')),
      el('div', { id: 'topic-info' }),
      el('h3', {}, 'Partitions'),
      el('div', { id: 'partitions' }),
      el('div', { id: 'children' }),
      allowed('consume', name) ? el('section', { id: 'peek' },
        el('h3', {}, 'Peek at a record'),
        el('p', {}, 'Reads one record by partition and offset, as a replay: nothing is leased or acknowledged.'),
        el('form', { id: 'peek-form', onsubmit: (ev) => { ev.preventDefault(); peek(t); } },
          el('label', {}, 'Partition ', el('input', { id: 'peek-partition', type: 'number', min: 0, value: 0, required: true })),
          el('label', {}, 'Offset ', el('input', { id: 'peek-offset', type: 'number', min: 0, value: 0, required: true })),
          el('button', { id: 'peek-submit', type: 'submit' }, 'Peek')),
        el('pre', { id: 'peek-result' })) : null);
  },
  async refresh() {
    const t = encodeURIComponent(this.name);
    const info = await get('/v1/topics/' + t);
    const children = info.role === 'parent' ? await get(`/v1/topics/${t}/children`) : null;
    this.last = { info, children };
    this.render();
  },
  render() {
    const { info, children } = this.last;
    replace('topic-info', el('dl', { id: 'topic-info', class: 'facts' },
      el('dt', {}, 'Partitions'), el('dd', {}, info.partitions),
      el('dt', {}, 'Role'), el('dd', {}, info.role || '–'),
      el('dt', {}, 'Owner'), el('dd', {}, info.owner || '–'),
      el('dt', {}, 'Retention'), el('dd', {}, info.retention_ms ? duration(info.retention_ms / 1000) : 'forever'),
      el('dt', {}, 'Visibility timeout'), el('dd', {}, duration(info.visibility_timeout_ms / 1000)),
      el('dt', {}, 'Max in flight per partition'), el('dd', {}, info.max_in_flight_per_partition),
      info.parent ? [el('dt', {}, 'Parent'), el('dd', {}, info.parent + ' (delay ' + (info.fanout_delay_ms || 0) + ' ms)')] : null));
    const stats = info.partition_stats;
    const rows = stats.slice(this.page * PAGE, (this.page + 1) * PAGE);
    replace('partitions', el('div', { id: 'partitions' },
      stats.length < info.partitions ? el('p', {}, `${info.partitions - stats.length} partitions did not answer (owner starting or unreachable).`) : null,
      table(['Partition', 'Owner', 'High watermark', 'Next offset', 'Oldest offset', 'Size', 'Segments', 'Leases out'], rows.map((p) => el('tr', {},
        el('td', { class: 'num' }, p.index), el('td', {}, p.owner_node || '–'), el('td', { class: 'num' }, p.high_watermark),
        el('td', { class: 'num' }, p.next_offset), el('td', { class: 'num' }, p.oldest_offset),
        el('td', { class: 'num' }, size(p.size_bytes)), el('td', { class: 'num' }, p.segments),
        el('td', { class: 'num lease' }, p.in_flight_leases || 0))), { id: 'partitions-table' }),
      pager('partitions-pager', stats.length, this.page, (p) => { this.page = p; this.render(); })));
    replace('children', el('div', { id: 'children' }, children ? [
      el('h3', {}, 'Fan-out children'),
      table(['Child', 'Delay', 'Lag (records)'], children.children.map((c) => el('tr', {},
        el('td', {}, el('a', { href: '#/topic/' + encodeURIComponent(c.name) }, c.name)), el('td', {}, c.delay_ms + ' ms'),
        el('td', { class: 'num' }, c.lag_messages + (c.lag_complete ? '' : ' (partial)'))))),
    ] : null));
  },
};

async function peek(t) {
  const p = $('peek-partition').value, o = $('peek-offset').value;
  const out = $('peek-result');
  out.textContent = '…';
  const r = await api('GET', `/v1/topics/${t}/consume?partition=${encodeURIComponent(p)}&offset=${encodeURIComponent(o)}`);
  if (r.status === 204) { out.textContent = `No record at partition ${p}, offset ${o}: it is at or past the high watermark.`; return; }
  if (!r.ok) { out.textContent = errorText(r); return; }
  out.textContent = JSON.stringify(r.data, null, 2);
}

start();
