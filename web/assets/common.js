'use strict';
// Shared helpers. Session text only ever reaches the page through
// textContent, or as HTML the server rendered with every string escaped.
var pi = {
  el: function (tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  },
  getJSON: function (url) {
    return fetch(url, {credentials: 'same-origin'}).then(function (r) {
      if (!r.ok) return r.text().then(function (t) { throw new Error(t || r.statusText); });
      return r.json();
    });
  },
  tokens: function (n) {
    if (!n) return '0';
    if (n >= 1e6) return (n / 1e6).toFixed(1) + 'M';
    if (n >= 1e4) return Math.round(n / 1e3) + 'k';
    return String(Math.round(n));
  },
  cost: function (n) { return n ? '$' + n.toFixed(n < 1 ? 3 : 2) : ''; },
  date: function (ms) {
    if (!ms) return '';
    var d = new Date(ms);
    return isNaN(d) ? '' : d.toISOString().slice(0, 16).replace('T', ' ');
  },
  sessionURL: function (id, entry) {
    return '/s/' + encodeURIComponent(id) + (entry ? '#e-' + encodeURIComponent(entry) : '');
  },
  // live follows /api/events with EventSource; the browser reconnects
  // with Last-Event-ID, and the server resumes from it. onReconnect (if
  // given) is called when the stream is back after a break.
  live: function (url, onEntry, dot, onReconnect) {
    var es = new EventSource(url), broke = false;
    es.addEventListener('ready', function () {
      dot.className = 'live on';
      if (broke && onReconnect) onReconnect();
      broke = false;
    });
    es.addEventListener('entry', function (m) { onEntry(JSON.parse(m.data), m.lastEventId); });
    es.addEventListener('delete', function (m) { onEntry(JSON.parse(m.data), m.lastEventId); });
    es.addEventListener('restore', function (m) { onEntry(JSON.parse(m.data), m.lastEventId); });
    es.addEventListener('erase', function (m) { onEntry(JSON.parse(m.data), m.lastEventId); });
    es.onerror = function () { dot.className = 'live off'; broke = true; };
    return es;
  }
};
