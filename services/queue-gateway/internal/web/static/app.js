// The waiting-room page: take a place in line, follow it (the notification
// stream, else polling the gateway), and order with the entry token (the
// "pass") when the turn comes. Plain browser JavaScript, no build step.
'use strict';

const $ = (id) => document.getElementById(id);
const QUEUE_ID = /^[a-z0-9][a-z0-9-]{0,63}$/;
const USER_ID = /^[A-Za-z0-9_.:@|-]{1,128}$/;
const NETWORK_RETRY_MS = 2000; // after a failed request that gave no hint
const STREAM_SILENCE_MS = 30000; // a stream this quiet may have missed an event: ask once
const ORDER_NETWORK_RETRIES = 3;
const ICONS = { info: 'ℹ', ok: '✓', wait: '◷', warn: '⚠', error: '✗' };

// The page's state. phase: idle (not in line), prequeued (waiting for a
// scheduled sale to start), waiting, admitted (holding a pass), ordering (an
// order request is out), checking (asking the gateway where we stand after
// a failed order or a lapsed pass), bypass (the waiting room is down and the
// sale lets people order with a pass the gateway signed meanwhile), expired,
// done. bypass stays true while an order placed with such a pass is out.
const S = {
  cfg: null, queue: '', jwt: '', phase: 'idle', firstPosition: 0, retryMs: 1000, skew: 0,
  pass: null, products: [], retryNote: '', es: null, pollTimer: 0, silenceTimer: 0, clock: 0,
  offer: null, check: null, start: null, bypass: false,
};
// Gateway requests are numbered: an older answer never overrides a newer one.
let asked = 0, answered = 0;

// ---- the person's language ----

// The page's words come from one translation file a language
// (/static/i18n/<code>.json, listed with their names in /config.json): the
// person's choice (kept in localStorage), else the first of the browser's
// languages the page speaks, else English. Numbers, durations, prices and
// times go through Intl in that language. A message is a string with
// {name} slots, or, where a count decides the words, an object of Intl
// plural categories ("one", "other", ...).
const L = { code: 'en', dir: 'ltr', msgs: {}, shown: new Map(), said: null };

// t is message key in the page's language, its {slots} filled from vars,
// numbers in the language's digits (vars.count picks the plural form); a
// key the language lacks falls back to English.
function t(key, vars = {}) {
  let m = L.msgs[key] ?? L.en?.[key] ?? '';
  if (typeof m === 'object') m = m[intl('PluralRules').select(vars.count ?? 0)] ?? m.other;
  return m.replace(/\{(\w+)\}/g, (all, name) => {
    if (!(name in vars)) return all;
    return typeof vars[name] === 'number' ? num(vars[name]) : String(vars[name]);
  });
}

// put shows message key in element id and remembers it, so a change of
// language says it again in the new one.
function put(id, key, vars) {
  L.shown.set(id, [key, vars]);
  $(id).textContent = t(key, vars);
}

// localize fills an element marked data-i18n with its message; children
// marked data-slot keep their place (and content) at their {slot}.
function localize(el) {
  const slots = new Map([...el.querySelectorAll('[data-slot]')].map((c) => [c.dataset.slot, c]));
  const msg = t(el.dataset.i18n);
  if (!slots.size) { el.textContent = msg; return; }
  const parts = msg.split(/\{(\w+)\}/);
  el.replaceChildren(...parts.map((part, i) => (i % 2 ? slots.get(part) || part : document.createTextNode(part))));
}

// intl is an Intl formatter of the page's language, made once per
// language and options: the countdowns format four times a second.
const formatters = new Map(); // emptied by setLanguage
function intl(kind, opts = {}) {
  const key = `${kind} ${JSON.stringify(opts)}`;
  if (!formatters.has(key)) formatters.set(key, new Intl[kind](L.code, opts));
  return formatters.get(key);
}
const nf = (opts) => intl('NumberFormat', opts);
const num = (n) => nf().format(n);
const percent = (pct) => nf({ style: 'percent' }).format(pct / 100);
const unit = (n, u) => nf({ style: 'unit', unit: u, unitDisplay: 'short' }).format(n);
const unitRange = (a, b, u) => nf({ style: 'unit', unit: u, unitDisplay: 'short' }).formatRange(a, b);
// parts says a duration in hours, minutes and seconds as the language does.
function parts(d, style) {
  if (Intl.DurationFormat) return intl('DurationFormat', { style }).format(d);
  return [['days', 'day'], ['hours', 'hour'], ['minutes', 'minute'], ['seconds', 'second']]
    .filter(([k]) => d[k]).map(([k, u]) => unit(d[k], u)).join(' ') || unit(0, 'second');
}

// chooseLanguage is the stored choice, else the browser's first language
// the page has (exactly, then by its base: de-AT is de), else English.
function chooseLanguage(langs) {
  const have = new Set(langs.map((l) => l.code));
  if (have.has(localStorage.lang)) return localStorage.lang;
  for (const want of navigator.languages || [navigator.language || 'en']) {
    const w = want.toLowerCase();
    if (have.has(w)) return w;
    if (have.has(w.split('-')[0])) return w.split('-')[0];
  }
  return 'en';
}

// setLanguage loads code's messages and says the page again in them. The
// status line is said again only if it had been said in another language.
async function setLanguage(code) {
  const lang = S.cfg.languages.find((l) => l.code === code) || S.cfg.languages.find((l) => l.code === 'en');
  // Loaded aside and switched to in one step: a poll answered while the
  // shop's wording loads says the page in the old language, never the new
  // words under the old lang and dir.
  let msgs;
  for (;;) {
    try {
      const r = await api(lang.url);
      if (r.status === 200) { msgs = r.body; break; }
    } catch { /* retried */ }
    await sleep(NETWORK_RETRY_MS);
  }
  if (lang.code === 'en') L.en = msgs;
  // The shop's own wording of this sale, over the page's (none, or the
  // gateway unreachable: the page's).
  if (QUEUE_ID.test(S.queue)) {
    const own = await api(`${gw('texts')}/${lang.code}`).catch(() => ({ status: 0 }));
    if (own.status === 200) msgs = { ...msgs, ...own.body };
  }
  Object.assign(L, { msgs, code: lang.code, dir: lang.dir });
  formatters.clear();
  document.documentElement.lang = lang.code;
  document.documentElement.dir = lang.dir;
  document.querySelectorAll('[data-i18n]').forEach(localize);
  for (const [id, [key, vars]] of L.shown) $(id).textContent = t(key, vars);
  if (L.said) sayAgain();
  if (S.products.length) showProducts();
  if (S.progress !== undefined) $('progress-text').textContent = percent(S.progress);
  showFigures();
  showStart();
  $('lang').value = lang.code;
  if (S.jwt) pushReworded();
}

// languageSwitcher lists the languages by their own names; a choice is kept.
function languageSwitcher() {
  const sel = $('lang');
  sel.replaceChildren(...S.cfg.languages.map((l) => {
    const o = new Option(l.name, l.code);
    o.lang = l.code;
    o.dir = l.dir;
    return o;
  }));
  sel.addEventListener('change', () => {
    localStorage.lang = sel.value;
    setLanguage(sel.value);
  });
  show('lang-switch', true);
}

// ---- helpers ----

// show shows or hides the elements of a space-separated list of ids.
function show(ids, on) { for (const id of ids.split(' ')) $(id).hidden = !on; }
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const parse = (s) => { try { return JSON.parse(s); } catch { return {}; } };
const seconds = (ms) => unit(Math.max(1, Math.ceil(ms / 1000)), 'second');
const gw = (what) => `/api/v1/queues/${encodeURIComponent(S.queue)}/${what}`;
const bearer = () => ({ Authorization: `Bearer ${S.jwt}` });

// say writes message key to the status line, and through announce to a
// screen reader; the same text is not written twice. Its vars may hold
// [key, vars] pairs, messages of their own (said in the same language).
function say(kind, key, vars = {}) {
  L.said = [kind, key, vars];
  sayAgain();
}

function sayAgain() {
  const [kind, key, vars] = L.said;
  const filled = Object.fromEntries(Object.entries(vars).map(([k, v]) => [k, Array.isArray(v) ? t(...v) : v]));
  const text = t(key, filled);
  if ($('status-text').textContent === text && $('status').dataset.kind === kind) return;
  $('status').dataset.kind = kind;
  $('status-icon').textContent = ICONS[kind];
  $('status-text').textContent = text;
  announce(key, text);
  rescueFocus();
}

// announce is what a screen reader hears of the status line: each news
// once, politely, but the place in line at most every PLACE_SAY_MS (it
// may change every second), and the turn at once, as an alert.
const PLACE_SAY_MS = 30000;
const PLACE_KEYS = new Set(['line.waitingSay', 'line.pausedSay']);
function announce(key, text) {
  if (PLACE_KEYS.has(key)) {
    if (L.placeKey === key && Date.now() - L.placeSaidAt < PLACE_SAY_MS) return;
    Object.assign(L, { placeKey: key, placeSaidAt: Date.now() });
  } else {
    L.placeKey = '';
  }
  $(key === 'turn.say' ? 'say-now' : 'say').textContent = text;
}

// rescueFocus: when the control that had the keyboard focus is hidden by
// a change of state (Enter once pressed, the order form once sent), the
// focus goes to the heading of the part of the page that is shown now,
// instead of being lost at the top of the document.
let lastFocus = null;
document.addEventListener('focusin', (e) => { lastFocus = e.target; });
function rescueFocus() {
  if (document.activeElement !== document.body && document.activeElement?.checkVisibility()) return;
  if (!lastFocus || lastFocus.checkVisibility()) return;
  const heading = ['turn-h', 'result-h', 'line-h', 'switch-h', 'identity-h'].map($).find((h) => h.checkVisibility());
  heading?.focus();
}

function randomHex(bytes) {
  return Array.from(crypto.getRandomValues(new Uint8Array(bytes)), (b) => b.toString(16).padStart(2, '0')).join('');
}

// api returns {status, body, retryMs, date} and throws only when the network
// failed. Errors are problem+json bodies: callers switch on body.type.
async function api(url, opts = {}) {
  const res = await fetch(url, { cache: 'no-store', ...opts });
  const body = /json/.test(res.headers.get('Content-Type') || '') ? await res.json().catch(() => ({})) : {};
  const header = Number(res.headers.get('Retry-After'));
  const date = Date.parse(res.headers.get('Date') || '');
  return { status: res.status, body, retryMs: body.retryAfterMs || (header > 0 ? header * 1000 : 0), date };
}

// The gateway's clock sets the pass's times; a browser clock more than 2 s
// off (the Date header has 1 s steps) is corrected by the difference.
function noteClock(r) {
  const d = r.date - Date.now();
  if (!Number.isNaN(d)) S.skew = Math.abs(d) > 2000 ? d : 0;
}
const now = () => Date.now() + S.skew;

// span says s seconds in its largest units: 42 s, 5 min, 1 h 20 min.
function span(s) {
  if (s < 60) return unit(s, 'second');
  const m = Math.round(s / 60);
  return m < 60 ? unit(m, 'minute') : parts({ hours: Math.floor(m / 60), minutes: m % 60 }, 'short');
}

function humanWait(s) {
  return s <= 0 ? t('wait.anyMoment') : t('wait.about', { time: span(s) });
}

// waitRange says the estimate as the range it is ("about 4-6 min"), in the
// unit of its high end; one figure where the range rounds to one.
function waitRange(low, eta, high) {
  if (!(high > low)) return humanWait(eta);
  if (high <= 0) return t('wait.anyMoment');
  if (high < 60) return t('wait.about', { time: low === high ? unit(high, 'second') : unitRange(low, high, 'second') });
  const lo = Math.max(Math.floor(low / 60), 0);
  const hi = Math.max(Math.ceil(high / 60), 1);
  if (hi >= 60) return t('wait.about', { time: t('wait.between', { low: span(low), high: span(high) }) });
  return t('wait.about', { time: lo === hi ? unit(hi, 'minute') : unitRange(lo, hi, 'minute') });
}
const duration = (s) => (s < 60 ? unit(s, 'second') : parts({ minutes: Math.floor(s / 60), seconds: s % 60 }, 'short'));

// timeLeft says whole seconds as a countdown shows them (0:42, 12:05,
// 1:02:03), in the language's digits.
function timeLeft(s) {
  const d = { days: Math.floor(s / 86400), hours: Math.floor(s / 3600) % 24, minutes: Math.floor(s / 60) % 60, seconds: s % 60 };
  if (Intl.DurationFormat) return intl('DurationFormat', { style: 'digital', hoursDisplay: d.days || d.hours ? 'always' : 'auto' }).format(d);
  const two = (n) => nf({ minimumIntegerDigits: 2 }).format(n);
  const ms = `${d.days || d.hours ? two(d.minutes) : num(d.minutes)}:${two(d.seconds)}`;
  return d.days || d.hours ? `${d.days ? `${parts({ days: d.days }, 'short')} ` : ''}${num(d.hours)}:${ms}` : ms;
}

// ---- identity ----

// A shop that signs its users in links to the page with their JWT in the
// fragment (#token=...), which no server sees. Anyone can make such a link,
// so the page never adopts one unasked (login CSRF: a stranger's link would
// have you wait and buy under their account): the token leaves the address
// bar at once and stays in memory only, unsent, until the person chooses.
function linkToken() {
  const m = location.hash.match(/[#&]token=([^&]+)/);
  if (!m) return '';
  history.replaceState(null, '', location.pathname + location.search);
  try { return decodeURIComponent(m[1]); } catch { return ''; }
}

// subject is a JWT's sub claim, read for display only: the page cannot check
// the signature, and the gateway judges the token when it is used.
function subject(jwt) {
  try {
    const b64 = jwt.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
    const sub = JSON.parse(new TextDecoder().decode(Uint8Array.from(atob(b64), (c) => c.charCodeAt(0)))).sub;
    return typeof sub === 'string' ? sub.slice(0, 128) : '';
  } catch { return ''; }
}

// offerLink asks whether to sign in as the link's user; running says the
// page is already following the line under the stored identity. It returns
// false (and changes nothing) for a token it cannot read.
function offerLink(jwt, running) {
  const who = subject(jwt);
  if (!who) {
    say('warn', 'link.unreadable');
    return false;
  }
  const current = localStorage.token ? subject(localStorage.token) || t('link.someoneElse') : '';
  $('link-user').textContent = who;
  $('current-user').textContent = current;
  show('current-note', current !== '');
  put('use-link', current === who ? 'link.useNew' : 'link.continueAs', { user: who });
  put('keep-identity', current ? 'link.stay' : 'link.ignore', { user: current });
  S.offer = { jwt, running };
  show('identity', false);
  show('switch', true);
  $('switch-h').focus();
  say('warn', 'link.asks', { user: who });
  return true;
}

// useLink adopts the offered token, the one way a link's identity is taken.
function useLink() {
  const { jwt, running } = S.offer;
  S.offer = null;
  localStorage.token = jwt;
  if (running) return location.reload(); // a clean start under the new identity
  show('switch', false);
  signedIn();
}

function keepIdentity() {
  const { running } = S.offer;
  S.offer = null;
  show('switch', false);
  if (running) return say('info', 'link.ignored');
  if (localStorage.token) signedIn(); else askIdentity();
}

// A link followed while the page is open changes only the fragment: no new load.
function linkFollowed() {
  const jwt = linkToken();
  if (jwt && jwt !== localStorage.token) offerLink(jwt, S.jwt !== '');
}

function askIdentity() {
  show('identity', true);
  show('line', false);
  if (!S.cfg.devMode) {
    show('signin-required', true);
    return say('warn', 'identity.signinRequiredSay');
  }
  show('dev-login', true);
  if (!$('name').value) $('name').value = `guest-${randomHex(2)}`;
  say('info', 'identity.choose');
}

async function mintToken(e) {
  e.preventDefault();
  const userId = $('name').value.trim();
  if (!USER_ID.test(userId)) return say('error', 'identity.badName');
  let r;
  try {
    r = await api('/api/v1/dev/token', {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ userId }),
    });
  } catch { return say('error', 'net.unreachable'); }
  if (r.status !== 200) return say('error', 'identity.failed', { reason: r.body.type || String(r.status) });
  localStorage.token = r.body.token;
  signedIn();
}

function signedIn() {
  S.jwt = localStorage.token;
  show('identity', false);
  show('line', true);
  poll(); // a reload resumes: the user may be in line already, or hold a pass
}

// A refused JWT (expired, signed with another key) is forgotten.
function signedOut() {
  stopAll();
  delete localStorage.token;
  Object.assign(S, { jwt: '', phase: 'idle' });
  askIdentity();
  say('warn', 'identity.expired');
}

// ---- the line ----

// ---- the queue ticket ----

// The gateway hands a person in line a ticket (the signed number of their
// place). Polls and the stream send it back, so while the place is far from
// the front they are answered from the replicas' memory, not from Redis.
// It is kept per queue for this tab's session; a new enter replaces it.
const ticketKey = () => `ticket:${S.queue}`;
function keepTicket(ticket) {
  const old = sessionStorage.getItem(ticketKey());
  sessionStorage.setItem(ticketKey(), ticket);
  // Re-signed with a new key (a rotation): the browser would reconnect the
  // stream with the URL it opened, the old ticket, refused once the old key
  // is dropped. Open it again with this one.
  if (old && old !== ticket && S.es) openStream();
}
function dropTicket() { sessionStorage.removeItem(ticketKey()); }
function withTicket(headers) {
  const held = sessionStorage.getItem(ticketKey());
  return held ? { ...headers, 'X-Queue-Ticket': held } : headers;
}

async function enter() {
  stopAll();
  Object.assign(S, { phase: 'idle', firstPosition: 0, pass: null });
  sessionStorage.removeItem(`first:${S.queue}`);
  dropTicket(); // a new place, a new ticket
  show('enter enter-again turn figures prequeue', false);
  show('line', true);
  say('wait', 'enter.taking');
  const my = ++asked;
  let r;
  try {
    r = await api(gw('enter'), { method: 'POST', headers: bearer() });
    if (r.body.type === 'challenge-required') r = await enterWithChallenge();
  } catch {
    return retryEnter(NETWORK_RETRY_MS, 'enter.unreachable');
  }
  if (!r) return; // stopped while the browser check ran
  answered = Math.max(answered, my);
  noteClock(r);
  if (r.status === 200) return onStanding(r.body, true);
  switch (r.body.type) {
    case 'queue-full':
      say('warn', 'enter.full', { wait: seconds(r.retryMs) });
      return offerEnter(r.retryMs); // the button comes back when the hint has passed
    case 'rate-limited':
    case 'backend-unavailable': return retryEnter(r.retryMs || NETWORK_RETRY_MS, 'enter.busy');
    case 'unauthorized': return signedOut();
    case 'queue-not-found': return say('error', 'enter.noSale');
    case 'queue-closed': return say('error', 'enter.closed');
    case 'challenge-required': // still, with a solution sent
    case 'challenge-failed':
      say('error', 'check.refused');
      return offerEnter(0);
    case 'check-unfinished':
      say('error', 'check.unfinished');
      return offerEnter(0);
    default:
      say('error', 'enter.failed', { reason: r.body.type || String(r.status) });
      return offerEnter(0);
  }
}

// ---- the browser check (a proof-of-work challenge at enter) ----

const WORKER_URL = document.currentScript.dataset.worker;
const MAX_CHALLENGES = 3; // per click: a lapsed challenge is replaced, up to this many
const CHECK_SAY_MS = 5000; // how often a screen reader hears the progress
const CHECK_MARGIN_MS = 1000; // kept for the enter request before a challenge lapses

// enterWithChallenge enters on a queue that asks for proof of work: fetch a
// challenge, solve it in the worker, enter with the solution. A solution the
// gateway refuses (it lapsed, or the difficulty went up meanwhile) gets one
// fresh challenge. It returns the answer that decides, or undefined when
// stopped; the network failing throws.
async function enterWithChallenge() {
  say('wait', 'check.asked');
  let refused = false;
  try {
    for (let n = 0; n < MAX_CHALLENGES; n++) {
      const c = await api(gw('challenge'), { method: 'POST', headers: bearer() });
      // The operator switched the check off since: enter as usual.
      if (c.body.type === 'challenge-not-required') return api(gw('enter'), { method: 'POST', headers: bearer() });
      if (c.status !== 201) return c;
      const solved = await solve(c.body);
      if (solved.stopped) return undefined;
      if (solved.lapsed) continue; // slower than the challenge lives: a fresh one
      if (solved.broken) return { status: 0, body: { type: 'check-unfinished' } };
      const r = await api(gw('enter'), {
        method: 'POST', headers: { ...bearer(), 'X-Enter-Challenge': `${c.body.challenge}:${solved.nonce}` },
      });
      if (r.body.type !== 'challenge-failed' || refused) return r;
      refused = true;
    }
    return { status: 0, body: { type: 'check-unfinished' } };
  } finally {
    show('check', false);
  }
}

// solve runs the worker on challenge c until it finds the nonce, the
// challenge is about to lapse, or stopAll stops it. The note tells how much
// of the expected work (2^bits hashes) is done.
function solve(c) {
  const bits = Number(c.difficultyBits);
  const lifeMs = Number(c.expiresInMs) > 0 ? Number(c.expiresInMs) : Date.parse(c.expiresAt) - now();
  return new Promise((resolve) => {
    const worker = new Worker(WORKER_URL);
    const finish = (outcome) => {
      clearTimeout(timer);
      worker.terminate();
      S.check = null;
      resolve(outcome);
    };
    const timer = setTimeout(() => finish({ lapsed: true }), Math.max(0, lifeMs - CHECK_MARGIN_MS));
    S.check = { stop: () => finish({ stopped: true }), said: 0 };
    checkNote(0, bits);
    worker.onmessage = (e) => {
      if (typeof e.data.nonce === 'string') return finish({ nonce: e.data.nonce });
      if (e.data.error) return finish({ broken: true });
      checkNote(e.data.hashes, bits);
    };
    worker.onerror = () => finish({ broken: true });
    worker.postMessage({ challenge: String(c.challenge), bits });
  });
}

// checkNote shows the work done so far; past 100 % the browser was unlucky,
// not stuck. The live copy speaks only every CHECK_SAY_MS.
function checkNote(hashes, bits) {
  const pct = Math.floor((100 * hashes) / 2 ** bits);
  const text = t('check.progress', { percent: percent(pct) });
  $('check-note').textContent = text;
  show('check', true);
  const c = S.check;
  if (c && Date.now() - c.said >= CHECK_SAY_MS) {
    c.said = Date.now();
    $('check-live').textContent = text;
  }
}

function retryEnter(ms, why) {
  say('wait', 'enter.retrying', { why: [why], wait: seconds(ms) });
  S.pollTimer = setTimeout(enter, ms);
}

function offerEnter(afterMs) {
  show('enter', true);
  $('enter').disabled = afterMs > 0;
  if (afterMs > 0) S.pollTimer = setTimeout(() => { $('enter').disabled = false; }, afterMs);
}

// onStanding applies a standing from the gateway (enter, position) or from the
// stream, which never carries the token secret.
function onStanding(s, fromGateway) {
  if (S.phase === 'done' || S.phase === 'ordering') return;
  if (fromGateway && s.ticket) keepTicket(s.ticket);
  if (s.retryAfterMs > 0) S.retryMs = s.retryAfterMs;
  const back = S.phase === 'bypass' && s.state !== 'BYPASS';
  if (back) leaveBypass(); // the line is back: follow it
  switch (s.state) {
    case 'BYPASS': return bypassed(s, fromGateway);
    case 'PRE_QUEUE': return preQueued(s);
    case 'WAITING': return waiting(s);
    case 'ADMITTED':
      if (s.token) return admitted(s);
      if (s.orderInProgress) { // an order holds the pass: its outcome decides
        if (S.phase !== 'checking') say('wait', 'turn.processing');
        S.phase = 'checking';
        return keepPolling(S.retryMs);
      }
      return fromGateway ? undefined : poll(); // fetch the secret from the gateway
    case 'EXPIRED': return expired();
    case 'ABANDONED': return abandoned();
    case 'ORDERED': return done('ok', 'order.alreadyOrdered');
    case 'NOT_IN_QUEUE': return notInLine(back);
  }
}

function waiting(s) {
  if (S.phase !== 'idle' && S.phase !== 'prequeued' && S.phase !== 'waiting') return; // a late answer from before the turn
  stopCountdown(); // a pre-queued person's place is drawn
  show('prequeue', false);
  const key = `first:${S.queue}`; // the progress bar's 0 %, kept across reloads
  S.firstPosition = Math.max(S.firstPosition, Number(sessionStorage.getItem(key)) || 0, s.position);
  sessionStorage.setItem(key, S.firstPosition);
  show('enter enter-again', false);
  show('figures', true);
  offerAlerts();
  S.standing = s;
  showFigures();
  const paused = s.queueState === 'PAUSED';
  setProgress(1 - s.position / S.firstPosition);
  say(paused ? 'warn' : 'wait', paused ? 'line.pausedSay' : 'line.waitingSay', { position: s.position });
  if (S.phase === 'idle') {
    S.phase = 'waiting';
    follow();
  } else if (S.phase === 'prequeued') {
    // This answer is fresh: only the stream is new (its open catches up).
    S.phase = 'waiting';
    openStream();
  }
}

// showFigures shows the last standing's figures in the page's language.
function showFigures() {
  const s = S.standing;
  if (!s) return;
  $('position').textContent = num(s.position);
  $('ahead').textContent = num(s.ahead);
  $('eta').textContent = waitRange(s.etaLowSeconds, s.etaSeconds, s.etaHighSeconds);
  $('queue-state').textContent = s.queueState === 'PAUSED' ? `❚❚ ${t('line.paused')}` : `▶ ${t('line.moving')}`;
}

// ---- before a scheduled sale starts ----

const STARTS_SAY_MS = 60000; // how often a screen reader hears the countdown

// preQueued shows a standing taken before the sale's start: the time left,
// how many wait for the start, and that the start draws their places. The
// page counts down from the gateway's startsInMs on the monotonic clock, so
// a device clock that is wrong, or changed meanwhile, moves nothing. No
// stream until the place is drawn: the next poll is the gateway's
// retryAfterMs, which it spreads over a window after the start, so nobody
// asks at T-0.
function preQueued(s) {
  if (S.phase !== 'idle' && S.phase !== 'prequeued') return; // a late answer from before the draw
  S.phase = 'prequeued';
  show('enter enter-again figures', false);
  show('prequeue', true);
  offerAlerts();
  S.standing = s;
  showStart();
  if (S.start) clearInterval(S.start.timer);
  S.start = { at: performance.now() + (s.startsInMs || 0), timer: setInterval(countdown, 250), said: S.start ? S.start.said : -Infinity };
  countdown();
  keepPolling(s.retryAfterMs);
}

// showStart shows when the sale starts, in the page's language.
function showStart() {
  const s = S.standing;
  if (!s || s.state !== 'PRE_QUEUE') return;
  $('pre-queued').textContent = num(s.preQueued || 0);
  const far = s.startsInMs > 20 * 3600 * 1000; // tomorrow or later: say the day too
  const at = new Date(s.startsAt);
  $('starts-at').textContent = Number.isNaN(at.getTime()) ? '–'
    : at.toLocaleString(L.code, far ? { dateStyle: 'medium', timeStyle: 'short' } : { timeStyle: 'short' });
}

// countdown shows the time left to the start; at 0, until the gateway
// tells the drawn place, that the places are being drawn. The live copy
// speaks only every STARTS_SAY_MS.
function countdown() {
  const c = S.start;
  const left = Math.ceil((c.at - performance.now()) / 1000);
  if (left <= 0) {
    clearInterval(c.timer);
    put('starts-in', 'start.drawing');
    return say('wait', 'start.startedSay');
  }
  L.shown.delete('starts-in'); // a countdown again (a new start time): no longer drawing
  $('starts-in').textContent = t('start.in', { time: timeLeft(left) });
  say('wait', 'start.waitingSay');
  if (performance.now() - c.said >= STARTS_SAY_MS) {
    c.said = performance.now();
    $('starts-live').textContent = t('start.inSay', { wait: humanWait(left) });
  }
}

function stopCountdown() {
  if (S.start) clearInterval(S.start.timer);
  S.start = null;
}

function setProgress(f) {
  const pct = Math.round(Math.min(1, Math.max(0, f)) * 100);
  $('progress').value = pct;
  S.progress = pct;
  $('progress-text').textContent = percent(pct);
}

// notInLine offers the Enter button; back says the page was bypassed until now.
function notInLine(back) {
  const was = back ? 'bypass' : S.phase;
  stopAll();
  S.phase = 'idle';
  show('line', true);
  show('figures turn enter-again prequeue', false);
  offerEnter(0);
  say('info', was === 'bypass' ? 'line.back' : was === 'idle' ? 'line.notYet' : 'line.noLonger');
}

// ---- the waiting room bypassed ----

// bypassed opens the order form to someone the gateway answered BYPASS: its
// store is down and this sale lets people order meanwhile with the pass the
// gateway signed for them (the shop checks it without the store and holds
// the orders to the line's pace). A stream's BYPASS carries no secret: the
// page asks the gateway for the pass. The page keeps asking at the
// gateway's retryAfterMs; when the answer is anything else, the line is
// back and the page follows it (onStanding).
function bypassed(s, fromGateway) {
  if (S.phase === 'bypass' && S.pass) return; // still bypassed: the next poll is already due
  if (!s.token) return fromGateway ? undefined : poll(); // the pass is the gateway's to give
  stopAll();
  Object.assign(S, { phase: 'bypass', bypass: true, retryNote: '' });
  S.pass = { token: s.token, activateAt: Date.parse(s.activateAt), expiresAt: Date.parse(s.expiresAt) };
  show('line result countdown expiry', false);
  show('turn bypass-note order-form', true);
  put('turn-h', 'turn.orderNow');
  say('info', 'bypass.say');
  loadProducts();
  keepPolling(S.retryMs);
}

// leaveBypass closes the form opened by bypassed, before the page follows
// what the gateway says now.
function leaveBypass() {
  stopAll();
  Object.assign(S, { phase: 'idle', bypass: false, pass: null });
  show('turn bypass-note', false);
}

// ---- following the line: the stream, else polling ----

function follow() {
  openStream();
  poll(); // once right away: the turn may have come before the stream opened
}

function openStream() {
  closeStream();
  if (!window.EventSource || !S.cfg.notificationServiceUrl) return;
  // EventSource cannot send headers: the JWT and the ticket go in the query.
  const held = sessionStorage.getItem(ticketKey());
  const ticket = held ? `&ticket=${encodeURIComponent(held)}` : '';
  const es = new EventSource(`${S.cfg.notificationServiceUrl}${gw('events')}?access_token=${encodeURIComponent(S.jwt)}${ticket}`);
  S.es = es;
  // A (re)connected stream takes over from polling; one poll catches up on
  // whatever happened while it was away.
  es.addEventListener('open', () => { heard(); poll(); });
  es.addEventListener('position', (e) => { heard(); onStanding(parse(e.data), false); });
  es.addEventListener('admitted', () => { heard(); poll(); }); // no secret in it: ask the gateway
  // Refused or unreachable: poll at the gateway's pace meanwhile. The browser
  // reconnects by itself (the server's retry: hint) unless it was refused.
  es.addEventListener('error', () => { if (!S.pollTimer) keepPolling(S.retryMs); });
}

function closeStream() {
  if (S.es) S.es.close();
  S.es = null;
  clearTimeout(S.silenceTimer);
}
const streamLive = () => S.es !== null && S.es.readyState === EventSource.OPEN;

// heard re-arms the silence watchdog: a quiet stream gets one poll.
function heard() {
  clearTimeout(S.silenceTimer);
  S.silenceTimer = setTimeout(() => { heard(); poll(); }, STREAM_SILENCE_MS);
}

async function poll() {
  clearTimeout(S.pollTimer);
  S.pollTimer = 0;
  const my = ++asked;
  let r;
  try { r = await api(gw('position'), { headers: withTicket(bearer()) }); } catch { return keepPolling(NETWORK_RETRY_MS); }
  if (my < answered) return;
  answered = my;
  noteClock(r);
  if (r.status === 200) {
    onStanding(r.body, true);
    return keepPolling(r.body.retryAfterMs);
  }
  if (r.status === 401) return signedOut();
  if (r.body.type === 'ticket-invalid') { dropTicket(); return poll(); } // another account's, or a rotated-out key: ask without
  if (r.body.type === 'queue-not-found') { stopAll(); return say('error', 'enter.noSale'); }
  say('warn', 'line.notAnswering');
  keepPolling(r.retryMs || NETWORK_RETRY_MS);
}

// keepPolling schedules the next poll while the page needs news and no live
// stream brings it. ms is the gateway's retryAfterMs: already jittered, used as is.
function keepPolling(ms) {
  if (!['prequeued', 'waiting', 'checking', 'bypass'].includes(S.phase) || streamLive()) return;
  clearTimeout(S.pollTimer);
  S.pollTimer = setTimeout(poll, ms || NETWORK_RETRY_MS);
}

function stopAll() {
  if (S.check) S.check.stop();
  closeStream();
  clearTimeout(S.pollTimer);
  S.pollTimer = 0;
  clearInterval(S.clock);
  stopCountdown();
}

// ---- the turn ----

function admitted(s) {
  const first = S.phase === 'idle' || S.phase === 'prequeued' || S.phase === 'waiting';
  const note = first ? ['ok', 'turn.say'] : S.retryNote ? ['warn', S.retryNote] : null;
  stopAll();
  Object.assign(S, { phase: 'admitted', retryNote: '' });
  S.pass = { token: s.token, activateAt: Date.parse(s.activateAt), expiresAt: Date.parse(s.expiresAt) };
  setProgress(1);
  show('line result bypass-note', false);
  show('turn expiry', true);
  put('turn-h', 'turn.heading');
  if (note) { // the turn, or the pass back after a failed order (the stock has moved since)
    say(...note);
    loadProducts();
  }
  if (first) turnElsewhere();
  S.clock = setInterval(tick, 250);
  tick();
}

// tick drives both countdowns from the gateway's times.
function tick() {
  const p = S.pass;
  if (!p) return;
  const at = now();
  const toStart = Math.ceil((p.activateAt - at) / 1000);
  const toEnd = Math.ceil((p.expiresAt - at) / 1000);
  show('countdown', toStart > 0);
  show('order-form', toStart <= 0);
  if (toStart > 0) $('countdown').textContent = t('turn.startsIn', { wait: unit(toStart, 'second') });
  $('expiry').textContent = `◷ ${toEnd > 0 ? t('turn.expiresIn', { time: duration(toEnd) }) : t('turn.expired')}`;
  if (toEnd <= 0 && S.phase === 'admitted') {
    // Our clock says the pass lapsed; the gateway has the last word.
    clearInterval(S.clock);
    S.phase = 'checking';
    keepPolling(300);
  }
}

// formNote says what keeps the form empty, next to it: the status line
// keeps the news about the pass.
function formNote(key) {
  S.formNote = key;
  $('form-note').textContent = key ? `⚠ ${t(key)}` : '';
  show('form-note', key !== '');
}

async function loadProducts() {
  for (;;) {
    let r = { status: 0, body: {} };
    try { r = await api(`${S.cfg.orderServiceUrl}/api/v1/products?queueId=${encodeURIComponent(S.queue)}`); } catch { /* retried */ }
    if (!S.pass && !S.bypass) return;
    if (r.status === 200) { S.products = r.body.products || []; break; }
    formNote('order.productsRetry');
    await sleep(NETWORK_RETRY_MS);
  }
  formNote(S.products.length ? '' : 'order.nothing');
  showProducts();
}

// showProducts fills the product list in the page's language.
function showProducts() {
  if (S.formNote) formNote(S.formNote);
  const sel = $('product');
  const keep = sel.value;
  const price = nf({ style: 'currency', currency: 'USD' });
  sel.replaceChildren(...S.products.map((p) => {
    const stock = p.stock > 0 ? t('order.left', { count: p.stock }) : t('order.soldOutOption');
    const o = new Option(t('order.option', { name: p.name, price: price.format(p.priceCents / 100), stock }), p.productId);
    o.disabled = p.stock <= 0;
    return o;
  }));
  const still = S.products.findIndex((p) => p.productId === keep && p.stock > 0);
  sel.selectedIndex = still >= 0 ? still : Math.max(0, S.products.findIndex((p) => p.stock > 0));
  fillQuantity();
}

// fillQuantity offers 1..min(stock, 10) of the chosen product.
function fillQuantity() {
  const p = S.products.find((x) => x.productId === $('product').value);
  const max = p ? Math.min(p.stock, 10) : 0;
  const sel = $('quantity');
  const keep = Number(sel.value) || 1;
  sel.replaceChildren(...Array.from({ length: max }, (_, i) => new Option(String(i + 1), String(i + 1))));
  sel.value = String(Math.min(keep, max));
  $('order').disabled = max === 0 || (S.phase !== 'admitted' && S.phase !== 'bypass');
}

// ---- ordering ----

async function placeOrder(e) {
  e.preventDefault();
  if (S.phase !== 'admitted' && S.phase !== 'bypass') return;
  S.phase = 'ordering';
  $('order').disabled = true;
  say('wait', 'order.placing');
  // One key per click: every retry of this click reuses it, so it orders at most once.
  const key = randomHex(16);
  const body = JSON.stringify({ queueId: S.queue, productId: $('product').value, quantity: Number($('quantity').value) });
  // Bypassed, the pass is the one the gateway signed while its store is down.
  const pass = { 'X-Entry-Token': S.pass.token };
  const headers = { ...bearer(), ...pass, 'Idempotency-Key': key, 'Content-Type': 'application/json' };
  for (let failures = 0; ;) {
    let r;
    try { r = await api(`${S.cfg.orderServiceUrl}/api/v1/orders`, { method: 'POST', body, headers }); } catch {
      if (++failures > ORDER_NETWORK_RETRIES) return orderAgain('order.unreachable');
      await sleep(1000);
      continue;
    }
    // Too early (425), too busy (429) or still running: the same request, later.
    if (r.status !== 425 && r.status !== 429 && r.body.type !== 'idempotency-in-progress') return orderAnswered(r);
    say('wait', r.status === 425 ? 'order.early' : 'order.busy', { wait: seconds(r.retryMs) });
    await sleep(r.retryMs || 1000);
  }
}

function orderAnswered(r) {
  if (r.status === 201) {
    $('order-id').textContent = r.body.orderId;
    show('result', true);
    return done('ok', 'order.confirmedSay', { id: r.body.orderId });
  }
  if (S.bypass) return bypassOrderFailed(r);
  switch (r.body.type) {
    case 'sold-out': return done('error', 'order.soldOut');
    case 'order-limit-reached': return done('error', 'order.limit');
    case 'token-already-used': return done('ok', 'order.alreadyUsed');
    case 'backend-unavailable':
    case 'product-not-found': // the pass comes back (the dispatcher restores it): wait for it
      return check('order.givingBack', 'order.givenBack');
    case 'invalid-entry-token':
      return check('order.passRefused', 'order.passBack');
    case 'unauthorized': return signedOut();
    default: return orderAgain('order.failed', { reason: r.body.type || String(r.status) });
  }
}

// bypassOrderFailed answers a failed order placed with a bypass pass: no
// pass comes back (nothing was taken from the store), so the form opens
// again, unless the shop checks passes in the store again (the line is
// back) and the gateway says where we stand.
function bypassOrderFailed(r) {
  switch (r.body.type) {
    case 'sold-out': return done('error', 'order.soldOut');
    case 'order-limit-reached': return done('error', 'order.limit');
    case 'token-already-used': return done('ok', 'order.alreadyUsed');
    case 'unauthorized': return signedOut();
    case 'invalid-entry-token':
      leaveBypass();
      say('warn', 'bypass.back');
      return poll();
    default: return orderAgain('order.failed', { reason: r.body.type || String(r.status) });
  }
}

// check asks the gateway until it says where we stand; note is said if the pass is back.
function check(key, note) {
  Object.assign(S, { phase: 'checking', retryNote: note });
  say('warn', key);
  poll();
}

// orderAgain re-enables the form after a failure that left the pass untouched.
function orderAgain(key, vars) {
  S.phase = S.bypass ? 'bypass' : 'admitted';
  fillQuantity();
  say('error', key, vars);
  keepPolling(S.retryMs); // bypassed: whether the line is back
}

function done(kind, key, vars) {
  stopAll();
  Object.assign(S, { phase: 'done', pass: null, bypass: false });
  show('line turn', false);
  say(kind, key, vars);
}

function expired() {
  stopAll();
  Object.assign(S, { phase: 'expired', pass: null });
  show('turn figures enter prequeue alerts', false);
  show('line enter-again', true);
  say('warn', 'end.expired');
}

function abandoned() {
  stopAll();
  Object.assign(S, { phase: 'expired', pass: null });
  show('turn figures enter prequeue alerts', false);
  show('line enter-again', true);
  say('warn', 'end.abandoned');
}

// ---- "your turn" in another tab ----

// While the person waits, the page offers two ways to hear of the turn
// when it is not in view: a chime (Web Audio, no file; the choice kept in
// localStorage.sound) and a system notification, which the browser is
// asked for only on a click. At the turn a page out of view also puts
// the turn in its title, until it is seen.
let audio = null;

function offerAlerts() {
  show('alerts', true);
  $('alert-sound').checked = localStorage.sound === 'on';
  const can = 'Notification' in window;
  show('alert-notify', can && Notification.permission === 'default');
  notifyNote();
  offerPush();
}

function notifyNote() {
  const p = 'Notification' in window ? Notification.permission : 'default';
  if (p !== 'default') put('alert-note', p === 'granted' ? 'alert.notifyOn' : 'alert.notifyBlocked');
  show('alert-note', p !== 'default');
}

function soundChosen() {
  const on = $('alert-sound').checked;
  localStorage.sound = on ? 'on' : 'off';
  if (on) chime(); // a browser lets a page make sound once a click started it: the sample does
}

async function askToNotify() {
  await Notification.requestPermission();
  show('alert-notify', Notification.permission === 'default');
  notifyNote();
}

// primeSound readies the page's audio while a click is being handled
// (Enter the line): a browser lets a page sound later only if it started
// its audio in answer to the person, and a reload starts it afresh.
function primeSound() {
  if (localStorage.sound !== 'on') return;
  try {
    audio = audio || new AudioContext();
    audio.resume();
  } catch { /* no sound here */ }
}

// chime plays two short soft tones.
function chime() {
  try {
    audio = audio || new AudioContext();
    audio.resume();
    const at = audio.currentTime;
    [660, 880].forEach((hz, i) => {
      const o = audio.createOscillator();
      const g = audio.createGain();
      const t0 = at + i * 0.18;
      o.frequency.value = hz;
      g.gain.setValueAtTime(0.0001, t0);
      g.gain.exponentialRampToValueAtTime(0.2, t0 + 0.02);
      g.gain.exponentialRampToValueAtTime(0.0001, t0 + 0.3);
      o.connect(g).connect(audio.destination);
      o.start(t0);
      o.stop(t0 + 0.32);
    });
  } catch { /* no sound here: the page still says it */ }
}

// ---- "your turn" with the page closed (Web Push) ----

// Where the notification-service pushes (PUSH_VAPID_* set) and the browser
// can take pushes, the page offers a third way: a service worker
// (/static/sw.js) shows the turn even after the tab closed. Ticking it asks
// for the notification permission, subscribes the browser with the
// service's key and hands the subscription to the service, with the words
// of the notification in the page's language (sent again when the person
// switches language). The subscription's id is kept per queue, so a
// reload shows it ticked and unticking forgets it.
const pushKey = () => `push:${S.queue}`;

async function offerPush() {
  if (!('serviceWorker' in navigator && 'PushManager' in window && 'Notification' in window) || !S.cfg.notificationServiceUrl) return;
  if (S.pushKey === undefined) {
    S.pushKey = null;
    const r = await api(`${S.cfg.notificationServiceUrl}/api/v1/push/key`).catch(() => ({ status: 0 }));
    if (r.status === 200 && typeof r.body.publicKey === 'string') S.pushKey = r.body.publicKey;
  }
  if (!S.pushKey) return;
  show('alert-push-row', true);
  $('alert-push').checked = Boolean(localStorage[pushKey()]) && Notification.permission === 'granted';
}

async function pushChosen() {
  const on = $('alert-push').checked;
  $('alert-push').disabled = true;
  try {
    if (on) await pushOn(); else await pushOff();
  } finally {
    $('alert-push').disabled = false;
    $('alert-push').focus();
  }
}

async function pushOn() {
  let ok = false;
  try {
    if ((await Notification.requestPermission()) === 'granted') {
      const reg = await navigator.serviceWorker.register('/static/sw.js');
      const sub = (await reg.pushManager.getSubscription())
        || (await reg.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: fromBase64url(S.pushKey) }));
      ok = await pushSave(sub);
    }
  } catch { /* no push service for this browser, or it refused */ }
  $('alert-push').checked = ok;
  put('alert-push-note', ok ? 'alert.pushOn' : 'alert.pushFailed');
  show('alert-push-note', true);
  show('alert-notify', Notification.permission === 'default');
  notifyNote();
}

// pushSave hands the subscription to the notification-service, with the
// words of the notification in the page's current language.
async function pushSave(sub) {
  const r = await api(`${S.cfg.notificationServiceUrl}${gw('push')}`, {
    method: 'PUT',
    headers: { ...bearer(), 'Content-Type': 'application/json' },
    body: JSON.stringify({ subscription: sub.toJSON(), title: t('turn.heading'), body: t('turn.say'), lang: L.code }),
  }).catch(() => ({ status: 0 }));
  if (r.status !== 200) return false;
  localStorage[pushKey()] = r.body.id;
  return true;
}

async function pushOff() {
  const id = localStorage[pushKey()];
  delete localStorage[pushKey()];
  show('alert-push-note', false);
  if (!id) return;
  await api(`${S.cfg.notificationServiceUrl}${gw('push')}/${encodeURIComponent(id)}`, { method: 'DELETE', headers: bearer() })
    .catch(() => ({ status: 0 }));
}

// pushReworded sends the words again in a newly chosen language.
async function pushReworded() {
  if (!localStorage[pushKey()] || !S.pushKey || !navigator.serviceWorker) return;
  const reg = await navigator.serviceWorker.getRegistration('/static/').catch(() => undefined);
  const sub = await reg?.pushManager.getSubscription().catch(() => null);
  if (sub) await pushSave(sub);
}

function fromBase64url(s) {
  const b = atob(s.replace(/-/g, '+').replace(/_/g, '/'));
  return Uint8Array.from(b, (c) => c.charCodeAt(0));
}

function turnElsewhere() {
  if (localStorage.sound === 'on') chime();
  if (!document.hidden) return;
  document.title = `✓ ${t('turn.heading')} – ${t('page.title')}`;
  if ('Notification' in window && Notification.permission === 'granted') {
    try {
      const n = new Notification(t('turn.heading'), { body: t('turn.say'), tag: `turn:${S.queue}`, lang: L.code, dir: L.dir });
      n.onclick = () => { window.focus(); n.close(); };
    } catch { /* a browser that shows notifications only from a service worker: the title and the chime still tell */ }
  }
}

function seenAgain() {
  if (!document.hidden) localize(document.querySelector('title'));
}

// ---- start ----

async function main() {
  for (;;) { // nothing works without the settings: keep asking
    try {
      const r = await api('/config.json');
      if (r.status === 200) { S.cfg = r.body; break; }
    } catch { /* retried */ }
    // No settings, so no list of languages: English, if it loads.
    if (!L.en) L.en = await api('/static/i18n/en.json').then((e) => (e.status === 200 ? e.body : undefined), () => undefined);
    if (L.en) say('warn', 'page.settingsRetry');
    await sleep(NETWORK_RETRY_MS);
  }
  const m = location.pathname.match(/^\/q\/([^/]+)\/?$/);
  S.queue = m ? decodeURIComponent(m[1]) : new URLSearchParams(location.search).get('queue') || S.cfg.defaultQueue;
  $('queue-name').textContent = S.queue;
  languageSwitcher();
  await setLanguage(chooseLanguage(S.cfg.languages));
  if (!QUEUE_ID.test(S.queue)) return say('error', 'page.noSale');
  $('dev-login').addEventListener('submit', mintToken);
  $('enter').addEventListener('click', enter);
  $('enter-again').addEventListener('click', enter);
  $('product').addEventListener('change', fillQuantity);
  $('order-form').addEventListener('submit', placeOrder);
  $('use-link').addEventListener('click', useLink);
  $('keep-identity').addEventListener('click', keepIdentity);
  $('alert-sound').addEventListener('change', soundChosen);
  $('enter').addEventListener('click', primeSound);
  document.addEventListener('keydown', primeSound, { once: true });
  document.addEventListener('pointerdown', primeSound, { once: true });
  $('alert-notify').addEventListener('click', askToNotify);
  $('alert-push').addEventListener('change', pushChosen);
  document.addEventListener('visibilitychange', seenAgain);
  window.addEventListener('hashchange', linkFollowed);
  const jwt = linkToken();
  if (jwt && jwt !== localStorage.token && offerLink(jwt, false)) return;
  if (localStorage.token) signedIn(); else askIdentity();
}

main();
