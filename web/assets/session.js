'use strict';
// A session: its tree, one branch rendered (HTML from the server, where
// every string of the session is escaped), the context the model sees,
// and new entries as they are written, on any machine.
(function () {
  // decode is decodeURIComponent that keeps what it cannot decode: a link
  // a teammate wrote (#e-%E0%A4) must not stop the page.
  var decode = function (s) { try { return decodeURIComponent(s); } catch (e) { return s; } };
  var sid = decode(location.pathname.replace(/^\/s\//, ''));
  // hashEntry is the entry the page's address names (#e-ID), or ''.
  var hashEntry = function () { return location.hash.indexOf('#e-') === 0 ? decode(location.hash.slice(3)) : ''; };
  var api = '/api/s/' + encodeURIComponent(sid);
  // Entry ids are any string a line holds ("constructor", "__proto__"):
  // kept in Maps and Sets, never as an object's keys.
  var rows = [], byId = new Map(), kids = new Map();
  var selected = '', tip = '', leaf = '', view = 'history', es = null;
  var info = {}; // the session's data as meta() shows it, kept up to date live
  var $ = function (id) { return document.getElementById(id); };

  function childrenOf(id) { return kids.get(id || '') || []; }

  // index adds row r to the tree's rows, at position at (the end when
  // not given), and to the maps.
  function index(r, at) {
    if (at === undefined) rows.push(r);
    else rows.splice(at, 0, r);
    byId.set(r.id, r);
    var p = r.p || '';
    if (!kids.has(p)) kids.set(p, []);
    kids.get(p).push(r.id);
  }

  // The tip below an entry: newest child first, as far as it goes.
  function tipOf(id) {
    var seen = new Set();
    while (childrenOf(id).length && !seen.has(id)) {
      seen.add(id);
      var k = childrenOf(id), best = k[0];
      k.forEach(function (c) { if ((byId.get(c).ts || 0) >= (byId.get(best).ts || 0)) best = c; });
      id = best;
    }
    return id;
  }

  function onPath(id) {
    var path = new Set(), guard = 0;
    while (id && byId.has(id) && !path.has(id) && guard++ < rows.length + 1) { path.add(id); id = byId.get(id).p; }
    return path;
  }

  // The tree panel holds a row per entry, 10k and more: only the rows in
  // view (and a margin) are in the DOM, placed at their offset, as the
  // sessions list does. TREE_ROW is .tree .node's height in style.css.
  var TREE_ROW = 18, onTip = new Set(), treeDrawn = {first: -1, last: -1}, focusId = '';

  function drawTree() {
    onTip = onPath(tip);
    $('tree').style.height = (rows.length * TREE_ROW) + 'px';
    $('tree').dataset.rows = rows.length;
    $('tree').dataset.rowHeight = TREE_ROW;
    treeRows(true);
  }

  function treeRows(force) {
    var side = $('tree').closest('.side'), tree = $('tree');
    var top = side.scrollTop - tree.offsetTop;
    var first = Math.max(0, Math.floor(top / TREE_ROW) - 20);
    var last = Math.min(rows.length, Math.max(first, Math.floor(top / TREE_ROW)) + Math.ceil(side.clientHeight / TREE_ROW) + 20);
    if (!force && first === treeDrawn.first && last === treeDrawn.last) return;
    treeDrawn = {first: first, last: last};
    var frag = document.createDocumentFragment();
    for (var i = first; i < last; i++) frag.appendChild(treeRow(rows[i], i));
    var had = tree.contains(document.activeElement);
    tree.replaceChildren(frag);
    // Rows are drawn anew as the panel scrolls: the focused one keeps
    // the focus, and one row at least can be reached with Tab.
    var f = focusId && tree.querySelector('li[data-id="' + CSS.escape(focusId) + '"]');
    if (f && had) f.focus({preventScroll: true});
    else if (!f && tree.firstElementChild) tree.firstElementChild.tabIndex = 0;
  }

  // focusRow moves the keyboard's focus to row i of the tree.
  function focusRow(i) {
    if (i < 0 || i >= rows.length) return;
    focusId = rows[i].id;
    revealTree(focusId);
    treeRows(true); // draws the row, and moves the focus to it
  }

  function treeRow(r, i) {
    var li = pi.el('li', 'node t-' + (r.t || 'other').replace(/[^A-Za-z0-9_-]/g, ''));
    li.dataset.id = r.id;
    li.setAttribute('role', 'treeitem');
    li.tabIndex = r.id === focusId ? 0 : -1;
    li.style.top = (i * TREE_ROW) + 'px';
    // 12 px a level for the first eight, then 2 px, at most 132 px: the
    // panel is about 300 px wide, and at 12 px a level (up to 30) rows
    // 25 branch points deep had no room left for their text (a probe on
    // 2026-12-06, a session that branched at every retry). The depth is
    // in the row's title.
    li.style.paddingLeft = (4 + 12 * Math.min(r.d, 8) + 2 * Math.min(Math.max(r.d - 8, 0), 16)) + 'px';
    if (r.d > 8) li.title = 'depth ' + r.d;
    // An id that is no JSON string (a number, an object: hand-made
    // files) comes as "": no entry is addressed by it, so it is never the
    // one selected or the leaf (every such row showed as selected).
    if (onTip.has(r.id)) li.classList.add('on-path');
    if (r.id && r.id === leaf) li.classList.add('leaf');
    if (r.id && r.id === selected) li.classList.add('selected');
    li.appendChild(pi.el('span', 'kind', r.t));
    if (r.l) li.appendChild(pi.el('span', 'label', r.l));
    li.appendChild(pi.el('span', 'text', r.x || ''));
    return li;
  }

  // revealTree scrolls the tree panel to entry id's row when it is out of view.
  function revealTree(id) {
    var i = rows.indexOf(byId.get(id));
    if (i < 0) return;
    var side = $('tree').closest('.side'), y = $('tree').offsetTop + i * TREE_ROW;
    if (y < side.scrollTop || y + TREE_ROW > side.scrollTop + side.clientHeight) {
      side.scrollTop = y - side.clientHeight / 3;
    }
  }

  function meta(d) {
    document.title = 'pisyncd · ' + (d.name || d.idShown || d.id);
    $('title').textContent = d.name || d.idShown || d.id;
    var m = $('meta');
    m.replaceChildren();
    [['id', d.idShown || d.id], ['project', d.cwd], ['machines', (d.nodes || []).join(', ')], ['entries', d.entries],
     ['tokens', pi.tokens(d.tokens)], ['cost', pi.cost(d.cost)], ['rules', d.rules],
     ['state', (d.state || []).join(' ')], ['forked from', d.parent], ['error', d.error]].forEach(function (kv) {
      if (kv[1] === undefined || kv[1] === '' || kv[1] === null) return;
      var r = pi.el('div', 'kv');
      r.appendChild(pi.el('span', 'k', kv[0]));
      r.appendChild(pi.el('span', 'v', kv[1]));
      m.appendChild(r);
    });
    $('resume').textContent = d.resume || d.resumeError || '';
    $('copy').hidden = !d.resume;
  }

  // usage draws the tokens and cost by model (from the tree's answer).
  function usage(list) {
    var u = $('usage');
    u.replaceChildren();
    if (list && list.length) {
      var t = pi.el('table', 'usage-table');
      var h = pi.el('tr');
      ['model', 'msgs', 'tokens', 'cost'].forEach(function (x) { h.appendChild(pi.el('th', '', x)); });
      t.appendChild(h);
      list.forEach(function (x) {
        var tr = pi.el('tr');
        tr.appendChild(pi.el('td', '', x.model));
        tr.appendChild(pi.el('td', 'num', x.messages));
        tr.appendChild(pi.el('td', 'num', pi.tokens(x.tokens)));
        tr.appendChild(pi.el('td', 'num', pi.cost(x.cost)));
        t.appendChild(tr);
      });
      u.appendChild(t);
    }
  }

  var win = {start: 0, end: 0, total: 0}, branchLeaf = '';

  function status() {
    if (tip === leaf) $('moved').hidden = true; // the reader is at pi's leaf again
    var n = $('entries').querySelectorAll('article.entry').length;
    $('status').textContent = win.total > win.end - win.start
      ? 'entries ' + (win.start + 1) + '–' + win.end + ' of ' + win.total + ' on this branch'
      : win.total + ' entries on this branch';
    // The history's buttons, not the model's view's (which has its own).
    $('earlier').hidden = win.start === 0 || view !== 'history';
    $('earlier').textContent = 'show ' + Math.min(200, win.start) + ' earlier entries';
    $('later').hidden = win.end >= win.total || view !== 'history';
    $('later').textContent = 'show later entries';
    return n;
  }

  // show puts a window of the branch ending at d.selected on the page.
  function show(d) {
    // d.html is the server's rendering: strings escaped, markdown without raw HTML.
    $('entries').innerHTML = d.html;
    branchLeaf = d.selected;
    win = {start: d.start, end: d.end, total: d.total};
    tip = branchLeaf;
    status();
    $('context-json').href = api + '/context?leaf=' + encodeURIComponent(tip);
    drawTree();
    if (view === 'context') loadContext();
  }

  function more(earlier) {
    var s = earlier ? Math.max(0, win.start - 200) : win.end;
    var e = earlier ? win.start : win.end + 200;
    return pi.getJSON(api + '/branch?leaf=' + encodeURIComponent(branchLeaf) + '&start=' + s + '&end=' + e).then(function (d) {
      var first = $('entries').firstElementChild;
      $('entries').insertAdjacentHTML(earlier ? 'afterbegin' : 'beforeend', d.html); // server-rendered, escaped
      if (earlier) { win.start = d.start; if (first) first.scrollIntoView(); } else { win.end = d.end; }
      win.total = d.total;
      status();
    });
  }

  function scrollTo(id) {
    var e = document.getElementById('e-' + id);
    if (e) { e.scrollIntoView({block: 'start'}); e.classList.add('target'); }
  }

  // remember keeps what the reader chose in the page's address, so that a
  // reload or a link shared keeps it: the entry as #e-ID (the form of each
  // entry's own anchor) and the model's view as ?view=context. Replaced,
  // not pushed: a click through the tree is not a trail of pages.
  function remember() {
    var u = new URL(location.href);
    if (view === 'context') u.searchParams.set('view', 'context');
    else u.searchParams.delete('view');
    if (selected) u.hash = '#e-' + encodeURIComponent(selected);
    if (u.href !== location.href) history.replaceState(history.state, '', u.href);
  }

  // select renders the branch through entry id (continued to its tip).
  function select(id) {
    selected = id;
    var t = tipOf(id);
    return pi.getJSON(api + '/branch?leaf=' + encodeURIComponent(t) + '&at=' + encodeURIComponent(id)).then(function (d) {
      show(d);
      scrollTo(id);
      revealTree(id);
      remember();
      document.body.dataset.selected = id;
    }).catch(function (e) { $('status').textContent = 'error: ' + e.message; });
  }

  // loadContext shows what the model sees at the tip: its last messages
  // (a window, as the history's), with earlier ones on request.
  // A load asked for while one is under way runs after it, and at most one
  // starts a second: a context is computed whole on the server (seconds
  // for a large session), and pi may write several entries a second.
  var ctx = {loading: false, again: false, start: 0, began: 0};

  function loadContext() {
    if (ctx.loading) { ctx.again = true; return; }
    ctx.loading = true;
    ctx.began = Date.now();
    if (!$('context').childElementCount) $('context').replaceChildren(pi.el('div', 'note', 'loading…'));
    pi.getJSON(api + '/context/view?leaf=' + encodeURIComponent(tip)).then(function (d) {
      var head = pi.el('div', 'note ctx-head', d.messages + ' messages from ' + d.entries + ' entries · rules ' + d.rules);
      $('context').innerHTML = d.html; // server-rendered, escaped
      $('context').prepend(head, earlierContext(d.start));
      $('context').dataset.messages = d.messages;
      $('context').dataset.shown = d.end - d.start;
    }).catch(function (e) { $('context').replaceChildren(pi.el('div', 'error', e.message)); })
      .finally(function () {
        ctx.loading = false;
        if (!ctx.again) return;
        ctx.again = false;
        setTimeout(function () { if (view === 'context') loadContext(); }, Math.max(0, 1000 - (Date.now() - ctx.began)));
      });
  }

  // earlierContext is the button that shows the 200 messages before
  // message start of the context (hidden at 0).
  function earlierContext(start) {
    ctx.start = start;
    var btn = pi.el('button', 'more', 'show ' + Math.min(200, start) + ' earlier messages');
    btn.type = 'button';
    btn.id = 'ctx-earlier';
    btn.hidden = start === 0;
    btn.addEventListener('click', function () {
      var leafAt = tip, s = Math.max(0, ctx.start - 200);
      pi.getJSON(api + '/context/view?leaf=' + encodeURIComponent(leafAt) + '&start=' + s + '&end=' + ctx.start).then(function (d) {
        if (leafAt !== tip) return; // the context moved on meanwhile: it was drawn anew
        btn.insertAdjacentHTML('afterend', d.html); // server-rendered, escaped
        btn.replaceWith(earlierContext(d.start));
        $('context').dataset.shown = +$('context').dataset.shown + (d.end - d.start);
      }).catch(function (e) { btn.textContent = 'error: ' + e.message; });
    });
    return btn;
  }

  function setView(v) {
    view = v;
    $('v-history').classList.toggle('on', v === 'history');
    $('v-context').classList.toggle('on', v === 'context');
    $('entries').hidden = v !== 'history';
    $('context').hidden = v !== 'context';
    status();
    remember();
    if (v === 'context') loadContext();
  }

  // place puts a new row where the server's tree has it: last in its
  // parent's subtree (children come by time), indented as the server
  // indents, below a node with more than one child.
  function place(r) {
    var parent = byId.get(r.p), siblings = childrenOf(r.p).length, at = rows.length;
    r.d = 0;
    if (parent) {
      var i = rows.indexOf(parent), inside = new Set([parent.id]);
      for (at = i + 1; at < rows.length && inside.has(rows[at].p || ''); at++) inside.add(rows[at].id);
      // An only child gets a sibling: its subtree is indented now.
      if (siblings === 1) for (var j = i + 1; j < at; j++) rows[j].d++;
      r.d = parent.d + (siblings ? 1 : 0);
    }
    index(r, at);
  }

  // relabel shows entry id's label (none when empty) in the tree and on
  // its entry.
  function relabel(id, label) {
    byId.get(id).l = label;
    var h = document.querySelector('article[id="e-' + CSS.escape(id) + '"] > header');
    if (!h) return;
    var span = h.querySelector('.label');
    if (!label) {
      if (span) span.remove();
      return;
    }
    if (!span) {
      span = pi.el('span', 'label');
      h.querySelector('.title').after(' ', span);
    }
    span.textContent = label;
  }

  // onEntry adds an entry that arrived live. The tree and the branch may
  // come from reads a moment apart (two requests): live entries follow the
  // older one, so an entry one of them holds already can come again, and
  // is only added where it is missing. Each one is pi's leaf as it comes
  // (pi's leaf is the entry appended last, whatever its type).
  function onEntry(e) {
    if (!e.entryId) return;
    var known = byId.has(e.entryId), wasLeaf = leaf;
    leaf = e.entryId;
    if (!known) {
      var r = e.row || {id: e.entryId, p: e.parentId, t: e.type};
      r.ts = r.ts || Date.now();
      place(r);
      info.entries = (info.entries || 0) + 1;
      if (r.t === 'label' && r.g && byId.has(r.g)) relabel(r.g, r.x || '');
      if (r.t === 'session_info') info.name = r.x || '';
      meta(info);
    }
    var following = e.parentId === tip && win.end === win.total && !document.getElementById('e-' + e.entryId);
    if (following && e.html) {
      var box = document.createElement('div');
      box.innerHTML = e.html; // server-rendered, escaped
      while (box.firstChild) $('entries').appendChild(box.firstChild);
      tip = branchLeaf = e.entryId;
      win.end++;
      win.total++;
      status();
      $('context-json').href = api + '/context?leaf=' + encodeURIComponent(tip);
      if (view === 'context') loadContext();
    } else if (!known && wasLeaf && tip === wasLeaf && e.parentId !== tip) {
      // The reader was at pi's leaf and pi went on on another branch (a
      // fork or /tree): the page stays where it is, and says so.
      $('moved').hidden = false;
    }
    drawTree();
    document.body.dataset.live = (+(document.body.dataset.live || 0) + 1) + '';
  }

  // pick shows the branch of a tree row, or says why a row whose id is
  // no string cannot be shown on its own (it showed the leaf's branch).
  function pick(li) {
    focusId = li.dataset.id;
    if (li.dataset.id) select(li.dataset.id);
    else $('status').textContent = 'this entry\u2019s id is not a string: pi keeps it, but it cannot be shown on its own here';
  }
  $('tree').addEventListener('click', function (ev) {
    var li = ev.target.closest('li.node');
    if (li) pick(li);
  });
  // The tree by keyboard: up and down move between rows, Home and End to
  // the first and last, Enter or Space shows the row's branch.
  $('tree').addEventListener('keydown', function (ev) {
    var li = ev.target.closest('li.node');
    if (!li) return;
    var i = rows.indexOf(byId.get(li.dataset.id)), to = {ArrowDown: i + 1, ArrowUp: i - 1, Home: 0, End: rows.length - 1}[ev.key];
    if (to !== undefined) { ev.preventDefault(); focusRow(to); return; }
    if (ev.key === 'Enter' || ev.key === ' ') { ev.preventDefault(); pick(li); }
  });
  $('tree').closest('.side').addEventListener('scroll', function () { treeRows(false); }, {passive: true});
  window.addEventListener('resize', function () { treeRows(true); });
  $('earlier').addEventListener('click', function () { more(true); });
  $('later').addEventListener('click', function () { more(false); });
  $('to-leaf').addEventListener('click', function () { select(leaf); });
  $('moved').addEventListener('click', function () { select(leaf); });
  $('v-history').addEventListener('click', function () { setView('history'); });
  $('v-context').addEventListener('click', function () { setView('context'); });
  // An entry's address pasted into the page's own tab, or an entry's
  // anchor clicked: the entry, on its branch when it is not on the page.
  window.addEventListener('hashchange', function () {
    var id = hashEntry();
    if (!id) return;
    if (document.getElementById('e-' + id)) scrollTo(id);
    else if (byId.has(id)) select(id);
  });
  $('copy').addEventListener('click', function () {
    var t = $('resume').textContent;
    if (navigator.clipboard) navigator.clipboard.writeText(t).then(function () { $('copy').textContent = 'copied'; });
  });

  // earliest is the older of two positions ("STREAM:SEQ,…"), stream by
  // stream.
  function earliest(a, b) {
    if (a === b) return a;
    var m = {};
    [a, b].forEach(function (p) {
      (p || '').split(',').forEach(function (part) {
        var kv = part.split(':');
        if (kv.length !== 2) return;
        var n = +kv[1];
        if (!(kv[0] in m) || n < m[kv[0]]) m[kv[0]] = n;
      });
    });
    return Object.keys(m).sort().map(function (k) { return k + ':' + m[k]; }).join(',');
  }

  // The branch is drawn as soon as its answer comes; the tree panel's (a
  // line of every entry: most of the bytes) is asked for at the same time
  // (both are preloaded by the page's Link header) and drawn after.
  var want = hashEntry();
  // The tree's answer is parsed only once the branch is drawn: parsing its
  // ~1 MiB first would hold the branch back.
  var treeResp = fetch(api + '/tree', {credentials: 'same-origin'});
  treeResp.catch(function () {}); // reported below, once the branch is drawn
  pi.getJSON(api + (want ? '?at=' + encodeURIComponent(want) : '')).then(function (d) {
    performance.mark('pisync-session-data');
    leaf = d.leaf;
    info = d;
    meta(d);
    show(d);
    document.body.dataset.drawn = '1';
    performance.mark('pisync-session-drawn'); // for the benchmarks
    if (new URLSearchParams(location.search).get('view') === 'context') setView('context');
    // The entry asked for, or else the branch's newest: a session is read
    // from where it stands (the page opened at the first of its last 200).
    if (document.getElementById('e-' + want)) scrollTo(want);
    else if (!want && $('entries').lastElementChild) $('entries').lastElementChild.scrollIntoView({block: 'end'});
    return treeResp.then(function (r) {
      if (!r.ok) return r.text().then(function (t) { throw new Error(t || r.statusText); });
      return r.json();
    }).then(function (t) {
      performance.mark('pisync-tree-data');
      t.tree.forEach(function (r) { index(r); });
      usage(t.usage);
      drawTree();
      document.body.dataset.ready = '1';
      performance.mark('pisync-tree-drawn');
      var go = Promise.resolve();
      if (want && byId.has(want) && !document.getElementById('e-' + want)) {
        go = select(want);
      } else {
        revealTree(want || tip);
      }
      return go.then(function () {
        es = pi.live('/api/events?session=' + encodeURIComponent(sid) + '&render=1&raw=0&after=' + encodeURIComponent(earliest(d.pos, t.pos)), onEntry, $('live'));
      });
    }, function (e) {
      // The branch stays, and follows what is written.
      $('tree').replaceChildren(pi.el('li', 'error', 'tree: ' + e.message));
      es = pi.live('/api/events?session=' + encodeURIComponent(sid) + '&render=1&raw=0&after=' + encodeURIComponent(d.pos), onEntry, $('live'));
    });
  }).catch(function (e) {
    $('entries').replaceChildren(pi.el('div', 'error', e.message));
  });
})();
