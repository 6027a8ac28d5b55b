// The waiting room's service worker: it shows "your turn" when the
// notification-service pushes it (Web Push), also after the page was
// closed, and a click opens the queue's page, or brings an open one to the
// front. The message is {queueId, title, body, lang, expiresAt}, in the
// words and language the page subscribed with; the tag is the page's own
// (turn:<queue>), so the page's notification and the push's are one.
'use strict';

const QUEUE_ID = /^[a-z0-9][a-z0-9-]{0,63}$/;

self.addEventListener('install', () => self.skipWaiting());
self.addEventListener('activate', (event) => event.waitUntil(self.clients.claim()));

self.addEventListener('push', (event) => {
  let turn = {};
  try { turn = event.data ? event.data.json() : {}; } catch { /* not a turn */ }
  if (!QUEUE_ID.test(turn.queueId || '')) return;
  // No check of expiresAt against this device's clock, which may be off:
  // the push service keeps a message no longer than the pass lasts (TTL).
  event.waitUntil(self.registration.showNotification(String(turn.title || '✓'), {
    body: String(turn.body || ''),
    lang: String(turn.lang || ''),
    dir: 'auto',
    tag: `turn:${turn.queueId}`,
    renotify: true,
    requireInteraction: true,
    data: { path: `/q/${turn.queueId}` },
  }));
});

self.addEventListener('notificationclick', (event) => {
  event.notification.close();
  const path = event.notification.data?.path || '/';
  event.waitUntil((async () => {
    const open = await self.clients.matchAll({ type: 'window', includeUncontrolled: true });
    const page = open.find((c) => new URL(c.url).pathname === path);
    if (page) return page.focus();
    return self.clients.openWindow(path);
  })());
});
