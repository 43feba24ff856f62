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
  //
  // A browser keeps at most six connections to a host, and each page's
  // stream holds one for as long as it is open: a seventh tab of the view
  // never loaded (a probe on 2026-12-06). So a hidden tab closes its
  // stream, and opens it again where it left off (after=, the last event
  // id) once shown. A stream the server refused (too many open, or the
  // daemon restarting: EventSource then gives up for good) is opened
  // again after a wait that doubles up to 30 s, the reason in the dot's
  // title.
  live: function (url, onEntry, dot, onReconnect) {
    var es = null, broke = false, last = '', retry = null, wait = 1000;
    function state(on, why) {
      dot.className = on ? 'live on' : 'live off';
      dot.title = why;
    }
    function from() {
      if (!last) return url;
      var u = url.replace(/([?&])after=[^&]*&?/, '$1').replace(/[?&]$/, '');
      return u + (u.indexOf('?') < 0 ? '?' : '&') + 'after=' + encodeURIComponent(last);
    }
    function take(m) {
      if (m.lastEventId) last = m.lastEventId;
      onEntry(JSON.parse(m.data), m.lastEventId);
    }
    function open() {
      retry = null;
      es = new EventSource(from());
      es.addEventListener('ready', function () {
        state(true, 'live updates');
        wait = 1000;
        if (broke && onReconnect) onReconnect();
        broke = false;
      });
      ['entry', 'delete', 'restore', 'erase'].forEach(function (k) { es.addEventListener(k, take); });
      es.onerror = function () {
        broke = true;
        if (es.readyState !== EventSource.CLOSED) {
          state(false, 'live updates: reconnecting');
          return; // the browser tries again itself
        }
        es = null;
        state(false, 'live updates refused by the daemon (too many open, or restarting): trying again in ' + Math.round(wait / 1000) + ' s');
        retry = setTimeout(open, wait);
        wait = Math.min(wait * 2, 30000);
      };
    }
    document.addEventListener('visibilitychange', function () {
      if (document.hidden) {
        if (es) es.close();
        es = null;
        broke = true; // a page that asked from now (the list) reads what it missed
        clearTimeout(retry);
        retry = null;
        state(false, 'live updates paused while this tab is hidden');
      } else if (!es && !retry) {
        open();
      }
    });
    if (document.hidden) state(false, 'live updates paused while this tab is hidden');
    else open();
  }
};
