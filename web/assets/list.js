'use strict';
// The sessions list: one compact JSON answer, filtered and sorted here,
// and only the rows in view are in the DOM (10k sessions stay instant).
// The first paint does not wait for the whole list: the page comes with
// the newest sessions in it (#list-first, a JSON data block the server
// fills), which are drawn at once while the rest is on its way (the
// default order, newest first, is the server's). A page without them (a
// worker still starting) asks for the newest HEAD first.
(function () {
  performance.mark('pisync-list-script'); // for the benchmarks
  var ROW = 30; // px, as in style.css .row
  var HEAD = 100; // rows enough to fill a tall screen
  var all = [], shown = [], sortKey = 'u', sortDir = -1, total = 0, complete = false;
  var list = document.getElementById('list');
  var inner = document.getElementById('list-inner');
  var f = {
    machine: document.getElementById('f-machine'),
    project: document.getElementById('f-project'),
    from: document.getElementById('f-from'),
    to: document.getElementById('f-to'),
    state: document.getElementById('f-state'),
    text: document.getElementById('f-text')
  };

  // take draws an answer: the whole list (options filled, the page ready)
  // or the newest rows while the rest is on its way.
  function take(d, whole) {
    document.getElementById('node').textContent = 'this machine: ' + d.node;
    if (!d.search) document.getElementById('q').placeholder = 'search is off (PISYNC_SEARCH=on)';
    all = d.sessions;
    total = d.total;
    filling = !!d.filling; // first messages still on their way: shown as …
    complete = whole || all.length >= total;
    if (complete) options();
    apply();
    if (complete && !document.body.dataset.ready) {
      document.body.dataset.ready = '1';
      performance.mark('pisync-list-complete'); // for the benchmarks
    }
  }

  // The daemon reads the first messages back after its start: while it
  // says so, the list is asked for again (once a second).
  var refill = null, filling = false;
  function load() {
    return pi.getJSON('/api/sessions').then(function (d) {
      performance.mark('pisync-list-parsed');
      take(d, true);
      if (filling && !refill) refill = setTimeout(function () { refill = null; load(); }, 1000);
    }).catch(function (e) {
      document.getElementById('count').textContent = 'error: ' + e.message;
    });
  }

  // The newest rows first; dropped if the whole list came before them.
  function loadHead() {
    return pi.getJSON('/api/sessions?limit=' + HEAD).then(function (d) {
      performance.mark('pisync-list-head-parsed'); // the fallback's answer
      if (!complete) take(d, false);
    }).catch(function () {}); // the whole list says what went wrong
  }

  function fill(sel, values) {
    var cur = sel.value;
    while (sel.options.length > 1) sel.remove(1);
    values.forEach(function (v) { sel.add(new Option(v, v)); });
    sel.value = values.indexOf(cur) >= 0 ? cur : '';
  }

  function options() {
    var m = {}, p = {};
    all.forEach(function (s) {
      (s.m || []).forEach(function (n) { m[n] = 1; });
      if (s.c) p[s.c] = 1;
    });
    fill(f.machine, Object.keys(m).sort());
    fill(f.project, Object.keys(p).sort());
  }

  // Text filter: name, first message, project, id, lower-cased once per row.
  function hay(s) {
    if (s._h === undefined) s._h = ((s.n || '') + ' ' + (s.f || '') + ' ' + (s.c || '') + ' ' + s.id).toLowerCase();
    return s._h;
  }

  // unusual: a state that asks for a look; forked is how a session began,
  // not a problem.
  function unusual(s) {
    return (s.s || []).some(function (k) { return k !== 'forked'; });
  }

  function apply() {
    var mach = f.machine.value, proj = f.project.value, st = f.state.value, text = f.text.value.toLowerCase();
    var from = f.from.value ? Date.parse(f.from.value) : 0;
    var to = f.to.value ? Date.parse(f.to.value) + 86400000 : Infinity;
    shown = all.filter(function (s) {
      if (mach && (s.m || []).indexOf(mach) < 0) return false;
      if (proj && s.c !== proj) return false;
      if (s.u < from || s.u >= to) return false;
      if (st === 'plain' ? unusual(s) : st && (s.s || []).indexOf(st) < 0) return false;
      if (text && hay(s).indexOf(text) < 0) return false;
      return true;
    });
    var k = sortKey, d = sortDir;
    shown.sort(function (a, b) {
      var x = a[k], y = b[k];
      if (k === 'm') { x = (x || []).join(','); y = (y || []).join(','); }
      if (k === 'n') { x = a.n || a.is || a.id; y = b.n || b.is || b.id; }
      if (k === 's') { x = (x || []).join(','); y = (y || []).join(','); }
      if (x === undefined) x = '';
      if (y === undefined) y = '';
      return x < y ? -d : x > y ? d : 0;
    });
    document.getElementById('count').textContent = complete ? shown.length + ' of ' + all.length + ' sessions' :
      'the newest ' + shown.length + ' of ' + total + ' sessions; loading the rest…';
    inner.style.height = (shown.length * ROW) + 'px';
    draw(true);
    if (!document.body.dataset.drawn) {
      document.body.dataset.drawn = '1';
      performance.mark('pisync-list-drawn'); // the first paint, for the benchmarks
    }
  }

  var drawn = {first: -1, last: -1};
  function draw(force) {
    var first = Math.max(0, Math.floor(list.scrollTop / ROW) - 10);
    var last = Math.min(shown.length, first + Math.ceil(list.clientHeight / ROW) + 20);
    if (!force && first === drawn.first && last === drawn.last) return;
    drawn = {first: first, last: last};
    var frag = document.createDocumentFragment();
    for (var i = first; i < last; i++) frag.appendChild(row(shown[i], i));
    inner.replaceChildren(frag);
  }

  function row(s, i) {
    var a = pi.el('a', 'row');
    a.href = pi.sessionURL(s.id);
    a.dataset.id = s.id;
    a.style.top = (i * ROW) + 'px';
    a.appendChild(pi.el('span', 'name', s.n || s.is || s.id));
    a.appendChild(pi.el('span', s.f ? 'first' : 'first none', s.f || (filling ? '…' : '(no messages)')));
    a.appendChild(pi.el('span', 'machine', (s.m || []).join(', ')));
    a.appendChild(pi.el('span', 'project', s.c || ''));
    a.appendChild(pi.el('span', 'updated', pi.date(s.u)));
    a.appendChild(pi.el('span', 'num', s.e));
    a.appendChild(pi.el('span', 'num', pi.tokens(s.t)));
    a.appendChild(pi.el('span', 'num', pi.cost(s.$)));
    var st = pi.el('span', 'state');
    (s.s || []).forEach(function (k) { st.appendChild(pi.el('span', 'badge b-' + k, k)); });
    a.appendChild(st);
    if (unusual(s)) a.classList.add('unusual');
    return a;
  }

  list.addEventListener('scroll', function () { draw(false); }, {passive: true});
  window.addEventListener('resize', function () { draw(true); });
  [f.machine, f.project, f.state, f.from, f.to].forEach(function (e) { e.addEventListener('change', apply); });
  f.text.addEventListener('input', apply);
  function sortBy(e) {
    var k = e.target.dataset && e.target.dataset.sort;
    if (!k) return;
    sortDir = k === sortKey ? -sortDir : (k === 'u' || k === 'e' || k === 't' || k === '$' ? -1 : 1);
    sortKey = k;
    apply();
  }
  document.getElementById('list-head').addEventListener('click', sortBy);
  // The headers are buttons to the keyboard too (Tab, then Enter or Space).
  document.getElementById('list-head').addEventListener('keydown', function (e) {
    if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); sortBy(e); }
  });

  // snippet shows a hit's text with its matches marked; every part is
  // text (textContent), the offsets are UTF-16 units as JavaScript's.
  function snippet(text, marks) {
    var span = pi.el('span', 'snippet'), at = 0;
    marks.forEach(function (m) {
      var a = Math.max(at, Math.min(m[0], text.length)), b = Math.min(Math.max(m[1], a), text.length);
      if (a > at) span.appendChild(document.createTextNode(text.slice(at, a)));
      if (b > a) span.appendChild(pi.el('mark', '', text.slice(a, b)));
      at = Math.max(at, b);
    });
    if (at < text.length) span.appendChild(document.createTextNode(text.slice(at)));
    return span;
  }

  // Search: hits from the search handler, as links to their entries.
  document.getElementById('search').addEventListener('submit', function (e) {
    e.preventDefault();
    var q = document.getElementById('q').value.trim();
    var out = document.getElementById('search-results');
    out.hidden = false;
    out.replaceChildren(pi.el('div', 'note', 'searching…'));
    if (!q) { out.hidden = true; return; }
    fetch('/api/search?q=' + encodeURIComponent(q)).then(function (r) {
      // The search API answers {"error": why}; it showed as raw JSON.
      if (!r.ok) return r.text().then(function (t) {
        var why = t;
        try { why = JSON.parse(t).error || t; } catch (_) {}
        throw new Error(why || (r.status === 503 ? 'search not available' : 'search failed (' + r.status + ')'));
      });
      return r.json();
    }).then(function (d) {
      var hits = Array.isArray(d) ? d : (d && d.hits) || [];
      var total = (d && d.total) || hits.length;
      out.replaceChildren(pi.el('div', 'note', (total === 1 ? '1 hit' : total + ' hits') +
        (total > hits.length ? ' (best ' + hits.length + ' shown)' : '') +
        (d && d.approximate ? ' (phrases matched as their words in any order, excluded phrases not excluded: in order took too long)' : '') +
        (d && d.unindexed > 0 ? ' (the index has yet to add ' + (d.unindexed === 1 ? '1 line' : d.unindexed + ' lines') + ': hits among them are missing)' : '')));
      var byId = {};
      (all || []).forEach(function (s) { byId[s.id] = s; });
      hits.forEach(function (h) {
        var a = pi.el('a', 'hit');
        a.href = pi.sessionURL(h.sessionId, h.entryId);
        // Which session, as the list names it (its name, else its first
        // message), and where; the time as the list shows times.
        var s = byId[h.sessionId], where = [];
        var label = Array.from(s ? (s.n || s.f || s.is || s.id) : h.sessionId); // by code point
        where.push(label.length > 60 ? label.slice(0, 59).join('') + '…' : label.join(''));
        if (s && s.c) where.push(s.c);
        where.push(h.node || '', h.role || h.type || '', pi.date(Date.parse(h.timestamp || '')) || h.timestamp || '');
        a.appendChild(pi.el('span', 'note', where.join(' · ')));
        a.appendChild(snippet(h.snippet || '', h.highlights || []));
        out.appendChild(a);
      });
    }).catch(function (err) {
      out.replaceChildren(pi.el('div', 'note search-off', err.message));
    });
  });

  // refresh asks again for the sessions written since the last answer
  // alone, and puts them in the list: the whole list at every change was
  // megabytes a second, for the daemon and the page, while any session
  // was written.
  function refresh(ids) {
    if (!complete || ids.length > 100) return load();
    var q = ids.map(function (id) { return 'id=' + encodeURIComponent(id); }).join('&');
    return pi.getJSON('/api/sessions?' + q).then(function (d) {
      var got = new Map(d.sessions.map(function (r) { return [r.id, r]; })), asked = new Set(ids), had = new Set();
      all = all.filter(function (r) { return !asked.has(r.id) || got.has(r.id); }).map(function (r) {
        had.add(r.id);
        return got.get(r.id) || r;
      });
      d.sessions.forEach(function (r) { if (!had.has(r.id)) all.push(r); });
      if (all.length !== d.total) return load(); // some other change: the whole list
      total = d.total;
      filling = !!d.filling;
      options();
      apply();
    }).catch(function () { return load(); });
  }

  // Live: an entry on any machine refreshes its session's row, at most once
  // a second for all the sessions written meanwhile.
  var changed = null;
  var inline = JSON.parse(document.getElementById('list-first').textContent);
  if (inline) take(inline, false);
  else loadHead();
  load().then(function () {
    pi.live('/api/events?raw=0', function (e) {
      if (changed) {
        changed.add(e.session);
        return;
      }
      changed = new Set([e.session]);
      setTimeout(function () {
        var ids = Array.from(changed);
        changed = null;
        refresh(ids);
      }, 1000);
    }, document.getElementById('live'), load); // back after a restart: the list again
  });
})();
