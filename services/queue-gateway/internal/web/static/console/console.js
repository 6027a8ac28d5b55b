// The operators' console: every queue live, one queue in detail with its
// knobs, safe controls (a diff and a confirmation; If-Match, so a change
// made meanwhile by someone else is refused, not overwritten), the audit
// trail and the sale report. It talks to this gateway's admin API and to
// the order-service's (audit, report) with the operator's admin token,
// which stays in this tab (sessionStorage). No framework, no third party.
'use strict';

const TOKEN_KEY = 'waitingroom.console.token';
const POLL_MS = 2000;
const $ = (id) => document.getElementById(id);

const state = {
  config: null, // /config.json: orderServiceUrl, devMode
  knobs: [], // /static/console/knobs.json
  token: sessionStorage.getItem(TOKEN_KEY) || '',
  samples: new Map(), // queue -> [{at, issued}], the last ~70 s of issuedTotal
  timer: 0,
  view: '',
  detail: null, // {id, view, etag}
  pending: null, // the change the dialog asks about
  auditNext: '',
};

// el builds an element: attributes (text for textContent), then children
// (strings become text nodes). Nothing is ever parsed as HTML.
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'text') e.textContent = v;
    else if (k === 'class') e.className = v;
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

function say(text) {
  const s = $('say');
  s.textContent = '';
  setTimeout(() => { s.textContent = text; }, 50);
}

const fmt = new Intl.NumberFormat('en', { maximumFractionDigits: 2 });
function num(n) { return n === undefined || n === null ? '–' : fmt.format(n); }
function duration(seconds) {
  if (!isFinite(seconds)) return '–';
  if (seconds < 1) return 'under a second';
  if (seconds < 90) return `${Math.round(seconds)} s`;
  if (seconds < 5400) return `${Math.round(seconds / 60)} min`;
  return `${fmt.format(seconds / 3600)} h`;
}
// wait is a report's wait figure: none without anyone admitted.
function wait(t, ms) { return t.admitted ? duration(ms / 1000) : '–'; }
function time(iso) { return iso ? new Date(iso).toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC') : '–'; }

// The token's claims, for showing who is signed in (the services verify it).
function claims(token) {
  try {
    const b = token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
    return JSON.parse(atob(b + '==='.slice((b.length + 3) % 4)));
  } catch (_) {
    return {};
  }
}

class HTTPError extends Error {
  constructor(status, problem) {
    super((problem && (problem.detail || problem.title)) || `HTTP ${status}`);
    this.status = status;
    this.problem = problem || {};
  }
}

// api calls the gateway (base '') or the order-service with the token.
async function api(base, path, options = {}) {
  const headers = Object.assign({ Authorization: `Bearer ${state.token}` }, options.headers || {});
  if (options.body !== undefined) headers['Content-Type'] = 'application/json';
  const res = await fetch(base + path, {
    method: options.method || 'GET', headers, cache: 'no-store',
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
  });
  if (res.status === 401 || res.status === 403) {
    let p = {};
    try { p = await res.json(); } catch (_) { /* no body */ }
    signOut(res.status === 403 ? 'This token is not an admin\'s: the console needs role admin.' : 'The token was refused (expired or not valid). Sign in again.');
    throw new HTTPError(res.status, p);
  }
  if (!res.ok) {
    let p = {};
    try { p = await res.json(); } catch (_) { /* no body */ }
    throw new HTTPError(res.status, p);
  }
  if (options.raw) return res;
  return { body: res.status === 204 ? null : await res.json(), etag: res.headers.get('ETag') };
}
const gateway = (path, o) => api('', path, o);
const orders = (path, o) => api(state.config.orderServiceUrl, path, o);

// ---- Signing in -----------------------------------------------------------

function signOut(message) {
  state.token = '';
  sessionStorage.removeItem(TOKEN_KEY);
  if (message) {
    $('signin-error').textContent = message;
    $('signin-error').hidden = false;
  }
  location.hash = '#/signin';
}

function signedIn(token) {
  state.token = token;
  sessionStorage.setItem(TOKEN_KEY, token);
  $('signin-error').hidden = true;
  location.hash = '#/';
}

// ---- Views ----------------------------------------------------------------

const views = ['signin', 'overview', 'detail', 'audit', 'report'];

function show(view, title) {
  clearTimeout(state.timer);
  for (const v of views) $(v).hidden = v !== view;
  $('nav').hidden = view === 'signin';
  $('who').hidden = view === 'signin';
  $('subject').textContent = claims(state.token).sub || '';
  for (const a of document.querySelectorAll('#nav a')) {
    const here = a.getAttribute('href') === `#/${view === 'overview' ? '' : view}`;
    if (here) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
  }
  document.title = `${title} · Waiting room console`;
  if (state.view !== view + title) {
    state.view = view + title;
    $('main').focus();
  }
}

async function route() {
  const hash = location.hash || '#/';
  if (!state.token) {
    show('signin', 'Sign in');
    return;
  }
  const [, what, arg] = hash.match(/^#\/([a-z]*)\/?(.*)$/) || [];
  switch (what) {
    case 'signin': show('signin', 'Sign in'); return;
    case 'q': return openQueue(decodeURIComponent(arg));
    case 'audit': show('audit', 'Audit trail'); return loadAudit(true);
    case 'report': return openReport(decodeURIComponent(arg || ''));
    default: show('overview', 'Queues'); return pollOverview();
  }
}

// ---- Overview -------------------------------------------------------------

// orderPath is the order path's health in words: p95 and failures.
function orderPath(v) {
  const p = v.orderPath;
  if (!p) return 'no report';
  const failed = p.attempts - p.created;
  return `p95 ${num(p.p95Ms)} ms; ${num(failed)} of ${num(p.attempts)} failed` + (p.unavailable ? `, ${num(p.unavailable)} unavailable` : '') +
    (p.outboxBacklog > 1000 ? `; ${num(p.outboxBacklog)} events backlogged` : '');
}

function rateOf(v) {
  return v.effectiveRatePerSec || v.measuredRatePerSec || v.admissionRatePerSec;
}

// admittedLastMinute is the growth of issuedTotal over the last minute of
// samples (or over what there is, said so).
function admittedLastMinute(v, now) {
  const s = state.samples.get(v.queueId) || [];
  s.push({ at: now, issued: v.issuedTotal });
  while (s.length > 1 && now - s[0].at > 61000) s.shift();
  state.samples.set(v.queueId, s);
  const first = s[0];
  const span = (now - first.at) / 1000;
  const n = Math.max(0, v.issuedTotal - first.issued);
  return span >= 59 ? num(n) : `${num(n)} (in ${Math.round(span)} s)`;
}

async function pollOverview() {
  state.detail = null;
  if (state.view !== 'overviewQueues') return;
  try {
    const { body } = await gateway('/admin/v1/overview');
    const now = Date.now();
    const rows = body.queues.map((v) => {
      const present = v.waiting - ((v.presence && v.presence.away) || 0);
      const held = v.admissionHeld ? `held: ${v.admissionHeld}` : (v.state === 'OPEN' ? 'admitting' : '–');
      const adaptive = v.admissionMode === 'ADAPTIVE' ? ` (${v.rateReason || 'starting'})` : '';
      return el('tr', { 'data-queue': v.queueId },
        el('th', { scope: 'row' }, el('a', { href: `#/q/${encodeURIComponent(v.queueId)}`, text: v.queueId })),
        el('td', { text: v.state, class: `state-${v.state.toLowerCase()}` }),
        el('td', { text: v.admissionMode + adaptive }),
        el('td', { text: num(v.waiting), 'data-figure': 'waiting' }),
        el('td', { text: num(present), 'data-figure': 'present' }),
        el('td', { text: admittedLastMinute(v, now), 'data-figure': 'admitted' }),
        el('td', { text: `${num(v.admissionRatePerSec)} / ${num(v.effectiveRatePerSec || v.measuredRatePerSec)}` }),
        el('td', { text: v.waiting ? duration(v.waiting / rateOf(v)) : '–' }),
        el('td', { text: held }),
        el('td', { text: orderPath(v), 'data-figure': 'order-path' }),
        el('td', { text: v.failMode || '–' }),
        el('td', { text: v.startsAt && v.draw && v.draw.state === 'SCHEDULED' ? time(v.startsAt) : '–' }));
    });
    $('queues').tBodies[0].replaceChildren(...rows);
    $('overview-status').textContent = `${body.queues.length} queue${body.queues.length === 1 ? '' : 's'}` +
      (body.truncated ? ' (the first 500 by id)' : '') + `; updated ${new Date(now).toLocaleTimeString()}`;
  } catch (e) {
    if (e.status !== 401 && e.status !== 403) $('overview-status').textContent = `Not updated: ${e.message}. Trying again.`;
  }
  state.timer = setTimeout(pollOverview, POLL_MS);
}

// ---- One queue ------------------------------------------------------------

async function openQueue(id) {
  show('detail', id);
  $('detail-title').textContent = `Queue ${id}`;
  state.detail = { id, view: null, etag: '' };
  renderKnobs(null);
  await refreshQueue(true);
  loadChart(id);
  loadQueueAudit(id);
}

async function refreshQueue(first) {
  const d = state.detail;
  if (!d || state.view !== `detail${d.id}`) return;
  try {
    const { body, etag } = await gateway(`/admin/v1/queues/${encodeURIComponent(d.id)}`);
    const changed = d.etag !== etag;
    d.view = body;
    d.etag = etag;
    renderFigures(body);
    if (first || changed) renderKnobs(body);
    $('detail-status').textContent = `Version ${etag}; updated ${new Date().toLocaleTimeString()}`;
  } catch (e) {
    if (e.status === 404) {
      $('detail-status').textContent = 'No such queue.';
      return;
    }
    if (e.status !== 401 && e.status !== 403) $('detail-status').textContent = `Not updated: ${e.message}. Trying again.`;
  }
  state.timer = setTimeout(() => refreshQueue(false), POLL_MS);
}

function renderFigures(v) {
  const away = (v.presence && v.presence.away) || 0;
  const figures = [
    ['State', v.state], ['Mode', v.admissionMode + (v.rateReason ? ` (${v.rateReason})` : '')],
    ['Waiting', num(v.waiting)], ['Present', num(v.waiting - away)], ['Holding a token or ordering', num(v.active)],
    ['Admitted in all', num(v.issuedTotal)],
    ['Rate configured', `${num(v.admissionRatePerSec)}/s`],
    ['Rate measured', `${num(v.effectiveRatePerSec || v.measuredRatePerSec)}/s`],
    ['Wait at the back', v.waiting ? duration(v.waiting / rateOf(v)) : '–'],
    ['Line capacity', num(v.capacity)],
    ['Admission', v.admissionHeld ? `held: ${v.admissionHeld}` : (v.state === 'OPEN' ? 'admitting' : 'stopped')],
    ['Order path, last second', orderPath(v)],
    ['Fail mode', v.failMode],
  ];
  if (v.draw) {
    figures.push(['Draw', `${v.draw.state}; seed SHA-256 ${v.draw.seedSha256}; pre-queued ${num(v.draw.preQueued)}, placed ${num(v.draw.placed)}`]);
  }
  if (v.startsAt) figures.push(['Starts at', time(v.startsAt)]);
  $('figures').replaceChildren(...figures.map(([k, val]) => el('div', {}, el('dt', { text: k }), el('dd', { text: val, 'data-figure': k }))));
  $('pause').disabled = v.state !== 'OPEN';
  $('resume').disabled = v.state !== 'PAUSED';
  $('close').disabled = v.state === 'CLOSED';
}

// toInput is a knob's value as its field shows it; fromInput the reverse.
function toInput(k, value) {
  if (value === undefined || value === null) return '';
  if (k.kind === 'time') return value ? String(value).replace(/(:\d\d)(\.\d+)?Z$/, '$1').replace(/Z$/, '') : '';
  return String(value);
}
function fromInput(k, text) {
  if (k.kind === 'number') return text === '' ? null : Number(text);
  if (k.kind === 'integer') return text === '' ? null : parseInt(text, 10);
  if (k.kind === 'time') return text === '' ? null : new Date(`${text}Z`).toISOString().replace('.000Z', 'Z');
  if (k.kind === 'boolean') return text === 'true';
  return text;
}

function renderKnobs(v) {
  const box = $('knob-fields');
  if (!v) {
    box.replaceChildren();
    return;
  }
  const fields = state.knobs.filter((k) => k.name in v || k.kind === 'time').map((k) => {
    const id = `knob-${k.name}`;
    const help = el('span', { id: `${id}-help`, class: 'help', text: k.doc.replace(/\s+/g, ' ') });
    let input;
    if (k.enum) {
      input = el('select', { id, name: k.name, 'aria-describedby': help.id }, ...k.enum.map((o) => el('option', { value: o, text: o })));
    } else if (k.kind === 'boolean') {
      input = el('select', { id, name: k.name, 'aria-describedby': help.id }, el('option', { value: 'false', text: 'false' }), el('option', { value: 'true', text: 'true' }));
    } else if (k.kind === 'time') {
      input = el('input', { id, name: k.name, type: 'datetime-local', step: 1, 'aria-describedby': help.id });
    } else if (k.kind === 'number' || k.kind === 'integer') {
      input = el('input', { id, name: k.name, type: 'number', min: k.min, max: k.max, step: k.kind === 'integer' ? 1 : 'any', 'aria-describedby': help.id });
    } else {
      input = el('input', { id, name: k.name, 'aria-describedby': help.id, autocomplete: 'off' });
    }
    input.value = toInput(k, v[k.name]);
    // As the browser shows it (a time without its zero seconds): what a
    // change is compared with.
    input.dataset.initial = input.value;
    const range = k.min !== undefined && k.max !== undefined ? ` (${k.min} to ${k.max})` : '';
    return el('div', { class: 'knob' }, el('label', { for: id, text: k.name + range }), input, help);
  });
  box.replaceChildren(...fields);
}

// The change the form asks for: the knobs whose field differs.
function knobChanges() {
  const change = {};
  for (const k of state.knobs) {
    const input = $(`knob-${k.name}`);
    if (!input) continue;
    if (input.value !== input.dataset.initial) change[k.name] = fromInput(k, input.value);
  }
  return change;
}

// warnings says what a change does that cannot be taken back quietly.
function warnings(v, change) {
  const out = [];
  if (change.state === 'PAUSED') out.push(`Admission stops: the ${num(v.waiting)} people waiting are admitted by nobody until it resumes.`);
  if (change.state === 'CLOSED') out.push(`Closing drops the ${num(v.waiting)} people waiting; the queue takes nobody new. This cannot be undone.`);
  if (change.admissionRatePerSec !== undefined && change.admissionRatePerSec <= v.admissionRatePerSec / 10) {
    out.push(`The rate drops to ${num(change.admissionRatePerSec)}/s from ${num(v.admissionRatePerSec)}/s: the wait at the back grows to ${duration(v.waiting / change.admissionRatePerSec)}.`);
  }
  return out.join(' ');
}

// confirmChange shows the diff and the warning and runs apply on Apply.
function confirmChange(title, rows, warning, apply) {
  const dlg = $('confirm');
  $('confirm-title').textContent = title;
  $('confirm-warning').textContent = warning || 'Nothing else changes.';
  $('confirm-warning').classList.toggle('danger', Boolean(warning));
  $('confirm-diff').tBodies[0].replaceChildren(...rows.map(([k, a, b]) => el('tr', {}, el('th', { scope: 'row', text: k }), el('td', { text: a }), el('td', { text: b }))));
  state.pending = apply;
  dlg.returnValue = '';
  dlg.showModal();
  $('confirm-cancel').focus();
}

async function applyPending() {
  const apply = state.pending;
  state.pending = null;
  if (!apply) return;
  try {
    await apply();
  } catch (e) {
    if (e.status === 412 && !state.detail) {
      $('overview-status').textContent = 'Not created: a queue of that id exists already.';
      say($('overview-status').textContent);
      return;
    }
    if (e.status === 412) {
      const msg = 'Not applied: someone changed this queue since you read it. The page now shows their version; review your change again.';
      $('detail-status').textContent = msg;
      say(msg);
      state.detail.etag = '';
      clearTimeout(state.timer);
      return refreshQueue(true);
    }
    if (e.status !== 401 && e.status !== 403) {
      const msg = `Not applied: ${e.message}`;
      ($('detail').hidden ? $('overview-status') : $('detail-status')).textContent = msg;
      say(msg);
    }
  }
}

function reviewKnobs(change) {
  const d = state.detail;
  const names = Object.keys(change);
  if (names.length === 0) {
    say('Nothing to change: every knob is as it is.');
    $('detail-status').textContent = 'Nothing to change: every knob is as it is.';
    return;
  }
  const rows = names.map((k) => [k, JSON.stringify(d.view[k] ?? null), JSON.stringify(change[k])]);
  const etag = d.etag;
  confirmChange(`Change queue ${d.id}`, rows, warnings(d.view, change), async () => {
    if (change.state === 'CLOSED') {
      await gateway(`/admin/v1/queues/${encodeURIComponent(d.id)}`, { method: 'DELETE' });
    } else {
      await gateway(`/admin/v1/queues/${encodeURIComponent(d.id)}`, { method: 'PUT', body: change, headers: { 'If-Match': etag } });
    }
    const msg = `Applied to ${d.id}: ${names.join(', ')}.`;
    $('detail-status').textContent = msg;
    say(msg);
    clearTimeout(state.timer);
    d.etag = '';
    await refreshQueue(true);
    loadQueueAudit(d.id);
  });
}

// ---- Charts ---------------------------------------------------------------

// chart draws series of one value a minute as lines in an SVG, with a
// table of the same numbers for screen readers and keyboards.
function chart(box, minutes, series, label) {
  const w = 720, h = 180, pad = 30;
  const max = Math.max(1, ...series.flatMap((s) => minutes.map((m) => m[s.key] || 0)));
  const x = (i) => pad + (minutes.length <= 1 ? 0 : (i * (w - 2 * pad)) / (minutes.length - 1));
  const y = (n) => h - pad - ((n || 0) * (h - 2 * pad)) / max;
  const ns = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(ns, 'svg');
  svg.setAttribute('viewBox', `0 0 ${w} ${h}`);
  svg.setAttribute('role', 'img');
  svg.setAttribute('aria-label', `${label}: ${series.map((s) => `${s.name}, ${num(minutes.reduce((a, m) => a + (m[s.key] || 0), 0))} in all`).join('; ')}; peak ${num(max)} a minute`);
  const axis = document.createElementNS(ns, 'path');
  axis.setAttribute('d', `M${pad} ${pad} V${h - pad} H${w - pad}`);
  axis.setAttribute('class', 'axis');
  svg.append(axis);
  const top = document.createElementNS(ns, 'text');
  top.setAttribute('x', 2);
  top.setAttribute('y', pad - 8);
  top.textContent = num(max);
  svg.append(top);
  for (const s of series) {
    const line = document.createElementNS(ns, 'polyline');
    line.setAttribute('points', minutes.map((m, i) => `${x(i).toFixed(1)},${y(m[s.key]).toFixed(1)}`).join(' '));
    line.setAttribute('class', `series ${s.key}`);
    svg.append(line);
  }
  const legend = el('ul', { class: 'legend' }, ...series.map((s) => el('li', { class: s.key, text: s.name })));
  const table = el('table', {}, el('caption', { text: `${label}, a row a minute` }),
    el('thead', {}, el('tr', {}, el('th', { scope: 'col', text: 'Minute (UTC)' }), ...series.map((s) => el('th', { scope: 'col', text: s.name })))),
    el('tbody', {}, ...minutes.map((m) => el('tr', {}, el('th', { scope: 'row', text: time(m.minute) }), ...series.map((s) => el('td', { text: num(m[s.key]) }))))));
  box.replaceChildren(svg, legend, el('details', {}, el('summary', { text: 'The numbers' }), el('div', { class: 'scroll', tabindex: 0, role: 'region', 'aria-label': `${label}: the numbers` }, table)));
}

const flowSeries = [
  { key: 'arrivals', name: 'Arrivals' }, { key: 'admitted', name: 'Admitted' },
  { key: 'ordersCreated', name: 'Orders' }, { key: 'ordersFailed', name: 'Orders failed' },
];

async function loadChart(id) {
  const to = new Date(Math.ceil(Date.now() / 60000) * 60000);
  const from = new Date(to.getTime() - 3600000);
  try {
    const { body } = await orders(`/admin/v1/queues/${encodeURIComponent(id)}/report?from=${from.toISOString()}&to=${to.toISOString()}`);
    chart($('chart'), body.minutes, flowSeries.concat([{ key: 'waitP95Ms', name: 'Wait p95 (ms)' }]), `Queue ${id}, the last hour`);
    const problems = [];
    const t = body.totals;
    if (t.ordersFailed > 0) problems.push(`${num(t.ordersFailed)} orders failed in the last hour (${num(t.ordersCreated)} made).`);
    if (t.expiredUnused > 0) problems.push(`${num(t.expiredUnused)} tokens expired unused: people admitted who did not order.`);
    if (t.abandoned > 0) problems.push(`${num(t.abandoned)} people removed for being away.`);
    if (t.left > t.admitted / 5 && t.left > 0) problems.push(`${num(t.left)} people left the line (${num(t.admitted)} admitted): the wait may be too long.`);
    const v = state.detail && state.detail.view;
    if (v && v.admissionHeld) problems.push(`Admission is held: ${v.admissionHeld}.`);
    $('problems').replaceChildren(...(problems.length ? problems : ['None in the last hour.']).map((p) => el('li', { text: p })));
  } catch (e) {
    $('chart').replaceChildren(el('p', { text: `No history: ${e.message}` }));
  }
}

// ---- Audit trail ------------------------------------------------------------

function changeSummary(c) {
  const before = c.before || {};
  const after = c.after || {};
  const keys = Object.keys(after).filter((k) => JSON.stringify(before[k]) !== JSON.stringify(after[k]) && k !== 'version' && k !== 'updatedAt');
  return keys.map((k) => `${k}: ${JSON.stringify(before[k] ?? null)} → ${JSON.stringify(after[k])}`).join('; ') || '–';
}

function auditRow(c, withQueue) {
  const cells = [el('td', { text: time(c.occurredAt) })];
  if (withQueue) cells.push(el('td', {}, el('a', { href: `#/q/${encodeURIComponent(c.queueId)}`, text: c.queueId })));
  cells.push(el('td', { text: c.actor, 'data-actor': c.actor }));
  if (withQueue) cells.push(el('td', { text: c.clientAddress }));
  cells.push(el('td', { text: c.action }), el('td', { text: c.outcome + (c.refusal ? ` (${c.refusal})` : '') }), el('td', { text: changeSummary(c) }));
  return el('tr', { 'data-event': c.eventId }, ...cells);
}

async function loadQueueAudit(id) {
  try {
    const { body } = await orders(`/admin/v1/audit?queueId=${encodeURIComponent(id)}&limit=20`);
    $('detail-audit').tBodies[0].replaceChildren(...body.changes.map((c) => auditRow(c, false)));
  } catch (e) {
    $('detail-audit').tBodies[0].replaceChildren(el('tr', {}, el('td', { colspan: 5, text: `Not available: ${e.message}` })));
  }
}

async function loadAudit(fresh) {
  const q = $('audit-queue').value.trim();
  if (fresh) {
    state.auditNext = '';
    $('audit-table').tBodies[0].replaceChildren();
  }
  const params = new URLSearchParams({ limit: '50' });
  if (q) params.set('queueId', q);
  if (state.auditNext) params.set('after', state.auditNext);
  try {
    const { body } = await orders(`/admin/v1/audit?${params}`);
    $('audit-table').tBodies[0].append(...body.changes.map((c) => auditRow(c, true)));
    state.auditNext = body.next;
    $('audit-more').hidden = !body.next;
    $('audit-status').textContent = `${$('audit-table').tBodies[0].rows.length} changes shown${body.next ? '; there are older ones' : ''}.`;
  } catch (e) {
    $('audit-status').textContent = `Not available: ${e.message}`;
  }
}

// ---- Report -------------------------------------------------------------------

function localValue(d) { return d.toISOString().slice(0, 16); }

function openReport(id) {
  show('report', 'Sale report');
  if (id) $('report-queue').value = id;
  if (!$('report-to').value) {
    const to = new Date(Math.ceil(Date.now() / 60000) * 60000);
    $('report-to').value = localValue(to);
    $('report-from').value = localValue(new Date(to.getTime() - 3600000));
  }
  if ($('report-queue').value) loadReport();
}

function reportQuery(format) {
  const p = new URLSearchParams({
    from: new Date(`${$('report-from').value}Z`).toISOString(),
    to: new Date(`${$('report-to').value}Z`).toISOString(),
  });
  if (format) p.set('format', format);
  return `/admin/v1/queues/${encodeURIComponent($('report-queue').value.trim())}/report?${p}`;
}

async function loadReport() {
  $('report-status').textContent = 'Loading…';
  try {
    const { body } = await orders(reportQuery());
    const t = body.totals;
    const totals = [['Arrivals', num(t.arrivals)], ['Admitted', num(t.admitted)], ['Orders', num(t.ordersCreated)],
      ['Orders failed', num(t.ordersFailed)], ['Conversion (orders per admitted)', `${fmt.format(t.conversion * 100)} %`],
      ['Tokens expired unused', num(t.expiredUnused)], ['Left the line', num(t.left)], ['Removed for being away', num(t.abandoned)],
      ['Wait p50', wait(t, t.waitP50Ms)], ['Wait p95', wait(t, t.waitP95Ms)], ['Longest wait', wait(t, t.waitMaxMs)]];
    $('report-totals').replaceChildren(...totals.map(([k, v]) => el('div', {}, el('dt', { text: k }), el('dd', { text: v, 'data-total': k }))));
    const peak = (p, unit) => (p ? `${num(p.value)}${unit} at ${time(p.minute)}` : '–');
    const peaks = [['Arrivals in a minute', peak(body.peaks.arrivals, '')], ['Admitted in a minute', peak(body.peaks.admitted, '')],
      ['Orders in a minute', peak(body.peaks.ordersCreated, '')], ['Longest wait', peak(body.peaks.waitMaxMs, ' ms')]];
    $('report-peaks').replaceChildren(...peaks.map(([k, v]) => el('div', {}, el('dt', { text: k }), el('dd', { text: v }))));
    chart($('report-chart'), body.minutes, flowSeries, `Queue ${body.queueId}, ${time(body.from)} to ${time(body.to)}`);
    $('report-body').hidden = false;
    $('report-status').textContent = `${body.minutes.length} minutes of ${body.queueId}.`;
  } catch (e) {
    $('report-body').hidden = true;
    $('report-status').textContent = `No report: ${e.message}`;
  }
}

async function downloadCSV() {
  try {
    const res = await orders(reportQuery('csv'), { raw: true });
    const blob = await res.blob();
    const url = URL.createObjectURL(blob);
    const a = el('a', { href: url, download: `${$('report-queue').value.trim()}-report.csv` });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  } catch (e) {
    $('report-status').textContent = `No CSV: ${e.message}`;
  }
}

// ---- Wiring ---------------------------------------------------------------

async function start() {
  const [config, knobs] = await Promise.all([
    fetch('/config.json', { cache: 'no-store' }).then((r) => r.json()),
    fetch(document.querySelector('meta[name=knobs]').content).then((r) => r.json()),
  ]);
  state.config = config;
  state.knobs = knobs;
  $('dev-form').hidden = !config.devMode;
  $('signin-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const t = $('token').value.trim();
    $('token').value = '';
    signedIn(t);
  });
  $('dev-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    const res = await fetch('/api/v1/dev/token', {
      method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ userId: $('dev-subject').value.trim(), role: 'admin' }),
    });
    if (res.ok) signedIn((await res.json()).token);
  });
  $('signout').addEventListener('click', () => signOut(''));
  $('knobs').addEventListener('submit', (e) => { e.preventDefault(); reviewKnobs(knobChanges()); });
  $('pause').addEventListener('click', () => reviewKnobs({ state: 'PAUSED' }));
  $('resume').addEventListener('click', () => reviewKnobs({ state: 'OPEN' }));
  $('close').addEventListener('click', () => reviewKnobs({ state: 'CLOSED' }));
  $('confirm').addEventListener('close', () => {
    if ($('confirm').returnValue === 'apply') applyPending();
    else state.pending = null;
  });
  $('create-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const id = $('create-id').value.trim();
    const rate = Number($('create-rate').value);
    confirmChange(`Create queue ${id}`, [['queue', '(none)', id], ['admissionRatePerSec', '(none)', String(rate)]],
      'A new queue takes entries at once (state OPEN).', async () => {
        await gateway(`/admin/v1/queues/${encodeURIComponent(id)}`, { method: 'PUT', body: { admissionRatePerSec: rate }, headers: { 'If-None-Match': '*' } });
        location.hash = `#/q/${encodeURIComponent(id)}`;
      });
  });
  $('audit-form').addEventListener('submit', (e) => { e.preventDefault(); loadAudit(true); });
  $('audit-more').addEventListener('click', () => loadAudit(false));
  $('report-form').addEventListener('submit', (e) => {
    e.preventDefault();
    loadReport();
  });
  $('report-csv').addEventListener('click', downloadCSV);
  window.addEventListener('hashchange', route);
  route();
}

start();
