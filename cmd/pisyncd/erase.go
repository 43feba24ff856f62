package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/config"
	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/internal/cli"
	"github.com/pisyncd/pisyncd/keyring"
	"github.com/pisyncd/pisyncd/projection"
	"github.com/pisyncd/pisyncd/replicate"
	"github.com/pisyncd/pisyncd/seal"
	"github.com/pisyncd/pisyncd/search"
)

// eraseResult is what `pisyncd erase` reports.
type eraseResult struct {
	Session string `json:"session"`
	// Files and Copies were unlinked, relative to the sessions dir: the
	// session's files, and its copies in the trash (or left by a crash).
	Files  []string `json:"files"`
	Copies []string `json:"copies"`
	// LinkTargets are the files that links among Files pointed at: the
	// link is unlinked, its target, maybe outside the sessions dir, is
	// not (erase removes nothing it did not find there), and the user is
	// told so.
	LinkTargets []string `json:"linkTargets,omitempty"`
	// HardLinked are files among Files with names elsewhere (hard links)
	// that hold the same lines still.
	HardLinked []HardLink `json:"hardLinked,omitempty"`
	// Messages erased: this node's lines (PI_LOCAL), every node's (PI_ALL).
	Messages eventlog.Erased `json:"messagesErased"`
	// EventSeq is the erase event's PI_LOCAL sequence: the forwarder takes
	// it to the hub, and every machine of the team erases its copy.
	EventSeq uint64 `json:"eraseEventSeq"`
	// ViewsDropped: the projection has dropped the session (without a
	// running daemon, the erase drops its views and search entries
	// itself).
	ViewsDropped bool `json:"viewsDropped"`
	Offline      bool `json:"offline,omitempty"`
	// Hub: the daemon that erased replicates through a hub, so the event
	// goes there. Its settings, not the command's: a shell without
	// PISYNC_HUB_URLS was told nothing of the hub or of hub erase.
	Hub bool `json:"hub,omitempty"`
	// CopyOnly: this machine published no line of the session (it held a
	// copy): the other machines refuse its erase event (admission: only a
	// node that wrote a session may delete or erase it), and so does
	// hub erase.
	CopyOnly bool `json:"copyOnly,omitempty"`
	// HubToken is the session's token on the hub when its lines are
	// sealed (end-to-end encryption): what hub erase is given.
	HubToken string `json:"hubToken,omitempty"`
	// Forks are the sessions here forked, cloned or branched from this
	// one (their header's parentSession names its file): pi copies the
	// parent's lines into them, which erase leaves.
	Forks []string `json:"forks,omitempty"`
}

// errNothingToErase: no file and no line of the session on this machine.
var errNothingToErase = errors.New("nothing of this session on this machine")

// eraseSession erases a session from this machine and announces it. The
// order keeps anything from writing the lines back: the replicator is held
// off the session first (it would write other machines' lines into a new
// file), then the files go, the tailer told first (it would publish the
// disappearance as a deletion, or, once the stream no longer holds the
// lines, read the file again and publish them anew), then the lines are
// erased from the streams, and last the erase event is published. With a
// running daemon (tailer, replicator, projection set) the projection drops
// the session when it reads the event; without, the same happens when the
// daemon starts.
func (d *Daemon) eraseSession(ctx context.Context, sid string) (*eraseResult, error) {
	return d.eraseSessionFrom(ctx, sid, "")
}

// eraseSessionFrom is eraseSession; resumed, when not "", names the file of
// an erase that a stop cut short (pendingErase), carried out again from
// the start, before the tailer runs.
func (d *Daemon) eraseSessionFrom(ctx context.Context, sid, resumed string) (*eraseResult, error) {
	d.eraseMu.Lock()
	defer d.eraseMu.Unlock()
	res := &eraseResult{Session: sid, Offline: d.tailer == nil}
	js := d.log.JetStream()
	root := d.cfg.SessionsDir

	file, found, err := d.eraseTarget(ctx, sid)
	if err != nil {
		return nil, err
	}
	if resumed != "" {
		// What is left (maybe only the event to publish), from before.
		found, file = true, cmp.Or(file, resumed)
	}
	if !found {
		if _, last, err := d.log.Last(ctx, sid); err == nil && last != nil && last.Op == eventlog.OpErase {
			// A second erase, one that waited for the first, say.
			return nil, fmt.Errorf("erase %s: %w: it was erased here already (its erase event is the last of it)", sid, errNothingToErase)
		}
		return nil, fmt.Errorf("erase %s: %w", sid, errNothingToErase)
	}
	// Recorded before anything goes: an erase cut short (the daemon
	// killed, the command interrupted) with the files gone and the lines
	// not would otherwise look like a deletion at the next start, and go
	// to every machine's trash, secret and all.
	pending, err := recordPendingErase(ctx, js, sid, file)
	if err != nil {
		return nil, err
	}
	if d.repl != nil {
		if err := d.repl.Hold(ctx, sid); err != nil {
			return nil, err
		}
	} else if len(d.cfg.HubURLs) > 0 {
		state, err := eventlog.OpenState(ctx, js)
		if err != nil {
			return nil, err
		}
		all, err := eventlog.OpenAll(ctx, js)
		if err != nil {
			return nil, err
		}
		if _, err := replicate.RecordHold(ctx, state, all, sid); err != nil {
			return nil, err
		}
	}
	live, copies, err := replicate.SessionFiles(root, sid)
	if err != nil {
		return nil, err
	}
	if d.tailer != nil {
		for _, p := range d.tailer.FilesFor(sid) {
			if !slices.Contains(live, p) {
				live = append(live, p)
			}
		}
	}
	for _, p := range live {
		st, err := os.Lstat(p)
		if err == nil && st.Mode()&fs.ModeSymlink != 0 {
			if target, err := filepath.EvalSymlinks(p); err == nil {
				res.LinkTargets = append(res.LinkTargets, target)
			}
		}
		if n := otherNames(p, st, live); n > 0 {
			rel, _ := filepath.Rel(root, p)
			res.HardLinked = append(res.HardLinked, HardLink{File: rel, Others: n})
		}
	}
	if d.tailer != nil && resumed == "" {
		if err := d.tailer.Remove(ctx, live); err != nil {
			return nil, err
		}
	} else {
		for _, p := range live {
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("erase %s: %w", sid, err)
			}
		}
	}
	for _, p := range copies {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("erase %s: %w", sid, err)
		}
	}
	res.Files, res.Copies = relPaths(root, live), relPaths(root, copies)
	all, err := openAllIfAny(ctx, js)
	if err != nil {
		return nil, err
	}
	var pos eventlog.AllPosition
	if all != nil {
		if pos, err = all.LastPosition(ctx); err != nil {
			return nil, err
		}
	}
	// A long session takes minutes (about 100 lines a second on a slow
	// disk), which the log tells as it goes.
	progress := everyFew(func(n int, took time.Duration) {
		d.logger.Info("erasing a session: its stored lines overwritten so far", "session", sid, "messages", n, "for", took.Round(time.Second))
	})
	if res.Messages, err = eventlog.EraseSessionEach(ctx, js, d.cfg.NodeID, sid, eventlog.EraseBounds{}, progress); err != nil {
		return nil, err
	}
	if d.crypt != nil {
		d.crypt.Forget(sid) // the session's data keys, in this process's memory
	}
	ev := eventlog.EraseLine(file, time.Now())
	if res.EventSeq, err = d.log.PublishErase(ctx, sid, ev); err != nil {
		return nil, err
	}
	if all != nil {
		if err := all.KeepPosition(ctx, pos, d.cfg.NodeID, sid, ev); err != nil {
			return nil, err
		}
	}
	if err := pending.Delete(ctx, pendingEraseKey(sid)); err != nil {
		return nil, fmt.Errorf("erase %s: %w", sid, err)
	}
	d.erased.Add(1)
	res.Hub = len(d.cfg.HubURLs) > 0
	d.logger.Info("session erased here", "session", sid, "files", len(live), "copies", len(copies),
		"lines_local", res.Messages.Local, "lines_all", res.Messages.All, "event_seq", res.EventSeq)
	if d.proj == nil {
		// No daemon runs: its views and its search index would hold the
		// session's text until it starts, which may be never (a machine
		// retired, the daemon uninstalled).
		if err := projection.PurgeSession(ctx, js, sid); err != nil {
			return nil, fmt.Errorf("erase %s: %w", sid, err)
		}
		if err := eraseFromIndex(ctx, filepath.Join(d.cfg.StateDir, "search"), sid); err != nil {
			return nil, fmt.Errorf("erase %s: %w", sid, err)
		}
		res.ViewsDropped = true
	}
	if d.proj != nil && resumed == "" {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		res.ViewsDropped = d.proj.WaitHandled(wctx, eventlog.LocalStream, res.EventSeq) == nil
		res.Forks = d.forksOf(wctx, sid)
		cancel()
	}
	return res, nil
}

// eraseFromIndex erases sid from the search index in dir, if there is one,
// as the daemon's search worker does for an erase event.
func eraseFromIndex(ctx context.Context, dir, sid string) error {
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	ix, err := search.Open(dir)
	if err != nil {
		return err
	}
	_, err = ix.EraseSession(ctx, sid)
	return errors.Join(err, ix.Close())
}

// forksOf lists the sessions in the catalog whose parent is sid's file
// (pi names it sid in its file name): best effort, none when the catalog
// cannot be read in time.
func (d *Daemon) forksOf(ctx context.Context, sid string) []string {
	cat, err := d.proj.Catalog(ctx)
	if err != nil {
		return nil
	}
	var forks []string
	for _, e := range cat {
		base := filepath.Base(strings.ReplaceAll(e.ParentSession, `\`, "/"))
		if e.SessionID != sid && strings.HasSuffix(strings.TrimSuffix(base, ".jsonl"), sid) {
			forks = append(forks, e.SessionID)
		}
	}
	slices.Sort(forks)
	return forks
}

// openAllIfAny opens PI_ALL when this machine has one (a hub is, or was,
// configured).
func openAllIfAny(ctx context.Context, js jetstream.JetStream) (*eventlog.All, error) {
	if _, err := js.Stream(ctx, eventlog.AllStream); errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("erase: %w", err)
	}
	return eventlog.OpenAll(ctx, js)
}

// eraseTarget reports whether this machine holds anything of the session
// (a file, a copy, a line), and a file of it, relative to the sessions
// root, for the erase event to name (other machines' admission wants one):
// a file here, else the one its lines name.
func (d *Daemon) eraseTarget(ctx context.Context, sid string) (file string, found bool, err error) {
	live, copies, err := replicate.SessionFiles(d.cfg.SessionsDir, sid)
	if err != nil {
		return "", false, err
	}
	found = len(live)+len(copies) > 0
	if len(live) > 0 {
		file = relPaths(d.cfg.SessionsDir, live)[0]
	}
	if _, last, err := d.log.Last(ctx, sid); err != nil {
		return "", false, err
	} else if last != nil && (last.Op == "" || last.Op == eventlog.OpDelete || last.Op == eventlog.OpRestore) {
		found = true
		if file == "" {
			file = last.File
		}
	}
	if all, err := d.log.JetStream().Stream(ctx, eventlog.AllStream); err == nil {
		m, err := firstLine(ctx, all, eventlog.SessionFilter(sid))
		if err != nil {
			return "", false, fmt.Errorf("erase %s: %w", sid, err)
		}
		if m != nil {
			found = true
			if file == "" {
				file = m.Header.Get(eventlog.HdrFile)
			}
		}
	} else if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return "", false, fmt.Errorf("erase %s: %w", sid, err)
	}
	if file == "" {
		file = eventlog.EncodeSID(sid) + ".jsonl"
	}
	return file, found, nil
}

// firstLine is the first message on filter that is not an erase event
// (those stay after an erase), nil when there is none.
func firstLine(ctx context.Context, s jetstream.Stream, filter string) (*jetstream.RawStreamMsg, error) {
	for seq := uint64(1); ; {
		m, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(filter))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		if m.Header.Get(eventlog.HdrOp) != eventlog.OpErase {
			return m, nil
		}
		seq = m.Sequence + 1
	}
}

func relPaths(root string, paths []string) []string {
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		rel, err := filepath.Rel(root, p)
		if err != nil {
			rel = p
		}
		out = append(out, filepath.ToSlash(rel))
	}
	return out
}

func (d *Daemon) serveErase(w http.ResponseWriter, r *http.Request) {
	sid := r.URL.Query().Get("session")
	if sid == "" {
		http.Error(w, "erase: no session", http.StatusBadRequest)
		return
	}
	// A client that gives up must not leave an erase half done.
	res, err := d.eraseSession(context.WithoutCancel(r.Context()), sid)
	if errors.Is(err, errNothingToErase) {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	writeJSON(w, res)
}

func eraseCommand(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("erase", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseArgs(fs, reorder(args), "pisyncd erase SESSION-ID [--json]", 1); err != nil {
		return err
	}
	if fs.Arg(0) == "" {
		return &usageError{Msg: "erase: empty SESSION-ID", Usage: "pisyncd erase SESSION-ID [--json]"}
	}
	sid := fs.Arg(0)
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	ctx, stop := signalContext(io.Discard)
	defer stop()
	res, err := eraseViaDaemon(ctx, cfg, sid)
	if errors.Is(err, errNotRunning) {
		// No daemon: the same, on the store (its lock keeps a daemon out
		// meanwhile). The event leaves for the hub when the daemon starts.
		// No store: nothing of the session left this machine, and opening
		// one would make a state dir where the daemon never ran.
		if !storeExists(cfg) {
			return fmt.Errorf("erase: no session %q: %w (its files, if any, were never published: delete them as any file)", sid, errNoStore)
		}
		var d *Daemon
		if d, err = openStoreAs(ctx, cfg, slog.New(slog.DiscardHandler), "pisyncd erase"); err != nil {
			return err
		}
		res, err = d.eraseSession(ctx, sid)
		err = errors.Join(err, d.Close())
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) {
		// Cut short (interrupted, the daemon gone): what it began is
		// recorded and carried out again (resumeErases), unless it was cut
		// before the record, which this side cannot tell.
		return fmt.Errorf("%w; the erase may be cut short: run pisyncd erase %s again (the daemon carries out at its next start an erase it had begun, but one stopped before it began is not; `pisyncd ls` still lists the session then)", err, sid)
	}
	if err != nil {
		return err
	}
	hub := res.Hub || len(cfg.HubURLs) > 0
	res.CopyOnly = hub && res.Messages.Local == 0
	if r, err := keyring.Load(keyring.Path(cfg.StateDir, cfg.KeyFile)); err == nil && hub {
		// Sealed lines are on the hub under the session's keyed-hash
		// token, which the hub operator cannot compute.
		res.HubToken = seal.Token(r, sid)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	fmt.Fprintf(stdout, "erased session %s on this machine: %d file(s), %d copy(ies), %d line(s) of this node and %d of every node's copy\n",
		sid, len(res.Files), len(res.Copies), res.Messages.Local, res.Messages.All)
	// File names and forks' ids are anyone's text (a fork's id is its
	// header's): nothing in them drives the terminal.
	safe := cli.TerminalSafe
	for _, f := range append(res.Files, res.Copies...) {
		fmt.Fprintf(stdout, "  unlinked %s\n", safe(f))
	}
	for _, f := range res.LinkTargets {
		fmt.Fprintf(stdout, "  a link to %s was unlinked; the file itself stays: delete it too if it holds what must go\n", safe(f))
	}
	for _, h := range res.HardLinked {
		fmt.Fprintf(stdout, "  %s has %d other name(s) (hard links) that still hold its lines: find them with find / -xdev -samefile FILE before it goes, and delete them too if they hold what must go\n", safe(h.File), h.Others)
	}
	for _, f := range res.Forks {
		fmt.Fprintf(stdout, "  session %s was forked from it, and pi copied its lines there: erase it too if it holds what must go (pisyncd erase %s)\n", safe(f), safe(f))
	}
	if res.Offline {
		fmt.Fprintln(stdout, "the daemon is not running: its views and its search index dropped the session now; the erase event leaves for the hub when it starts")
	}
	switch {
	case res.CopyOnly:
		fmt.Fprintf(stdout, "this machine wrote no line of the session, it held a copy: the other machines refuse its erase event, as the hub's erase does (only a machine that wrote a session may delete or erase it everywhere).\n")
		fmt.Fprintf(stdout, "to erase it everywhere, run `pisyncd erase %s` on a machine that wrote it (`pisyncd ls` there shows it), then hub erase as it says\n", sid)
	case hub:
		fmt.Fprintf(stdout, "the erase event (seq %d) goes to the hub: every machine of the team erases its copy.\n", res.EventSeq)
		fmt.Fprintf(stdout, "once `pisyncd status` on each shows it, erase the hub's copy: pisyncd hub erase %s\n", sid)
		if res.HubToken != "" {
			fmt.Fprintf(stdout, "its sealed lines are under its token on the hub: pisyncd hub erase %s\n", res.HubToken)
		}
	}
	return nil
}

// eraseViaDaemon asks the running daemon to erase sid.
func eraseViaDaemon(ctx context.Context, cfg *config.Config, sid string) (*eraseResult, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://pisyncd/erase?session="+url.QueryEscape(sid), nil)
	if err != nil {
		return nil, err
	}
	resp, err := controlClient(cfg.StateDir).Do(req)
	if err != nil && ctx.Err() != nil {
		// The daemon erases on for a request it has taken (what it
		// began is recorded, and carried out at its next start too).
		return nil, fmt.Errorf("erase: interrupted here; the daemon goes on with the erase if it had begun it: `pisyncd ls` stops listing %s once it is done, and its log says so (if it still lists it later, run pisyncd erase %s again)", sid, sid)
	}
	if err != nil {
		return nil, noAnswer(ctx, cfg, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, &daemonError{status: resp.StatusCode, msg: strings.TrimSpace(string(b))}
	}
	var res eraseResult
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		return nil, fmt.Errorf("erase: %w", err)
	}
	return &res, nil
}

// pendingErasePrefix names, in the state bucket, the erases begun here and
// not yet done: the session and its file, until the erase event is
// published.
const pendingErasePrefix = "erase.pending."

func pendingEraseKey(sid string) string { return replicate.SessionKey(pendingErasePrefix, sid) }

type pendingErase struct {
	SID  string `json:"sid"`
	File string `json:"file"`
}

// recordPendingErase records that the erase of sid (file: what its event
// names) has begun, and returns the bucket it is in.
func recordPendingErase(ctx context.Context, js jetstream.JetStream, sid, file string) (jetstream.KeyValue, error) {
	kv, err := eventlog.OpenState(ctx, js)
	if err != nil {
		return nil, fmt.Errorf("erase %s: %w", sid, err)
	}
	b, _ := json.Marshal(pendingErase{SID: sid, File: file})
	if _, err := kv.Put(ctx, pendingEraseKey(sid), b); err != nil {
		return nil, fmt.Errorf("erase %s: %w", sid, err)
	}
	return kv, nil
}

// resumeErases carries out again the erases a stop cut short, before the
// tailer runs: it would otherwise publish the files gone as deleted.
func (d *Daemon) resumeErases(ctx context.Context) error {
	kv, err := d.log.JetStream().KeyValue(ctx, eventlog.StateBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil // nothing was ever erased here
	}
	if err != nil {
		return fmt.Errorf("erase: resume: %w", err)
	}
	keys, err := kv.ListKeysFiltered(ctx, pendingErasePrefix+"*")
	if err != nil {
		return fmt.Errorf("erase: resume: %w", err)
	}
	var todo []pendingErase
	for k := range keys.Keys() {
		e, err := kv.Get(ctx, k)
		if err != nil {
			continue // gone meanwhile
		}
		var p pendingErase
		if json.Unmarshal(e.Value(), &p) == nil && eventlog.CheckSID(p.SID) == nil {
			todo = append(todo, p)
		}
	}
	for _, p := range todo {
		if _, last, err := d.log.Last(ctx, p.SID); err == nil && last != nil && last.Op == eventlog.OpErase {
			// Cut short after its event was published: done but for the
			// record. Another event would erase what came after the first
			// on the other machines.
			if err := kv.Delete(ctx, pendingEraseKey(p.SID)); err != nil {
				return fmt.Errorf("erase: resume: %w", err)
			}
			continue
		}
		d.logger.Warn("an erase was cut short (the daemon or the erase command stopped): carrying it out again", "session", p.SID)
		if _, err := d.eraseSessionFrom(ctx, p.SID, cmp.Or(p.File, "unknown.jsonl")); err != nil {
			return fmt.Errorf("erase %s, cut short before: %w (run pisyncd erase %s)", p.SID, err, p.SID)
		}
	}
	return nil
}

// HardLink is a session file erase unlinked that has other names.
type HardLink struct {
	File   string `json:"file"`
	Others int    `json:"others"` // names not among the files erased
}

// otherNames is how many names file st has besides its own and those
// among erased: an erase that unlinks one name of a hard-linked file
// leaves its lines under the others.
func otherNames(path string, st fs.FileInfo, erased []string) int {
	if st == nil || !st.Mode().IsRegular() {
		return 0
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok || sys.Nlink <= 1 {
		return 0
	}
	n := int(sys.Nlink) - 1
	for _, p := range erased {
		if o, err := os.Lstat(p); err == nil && p != path && os.SameFile(o, st) {
			n--
		}
	}
	return max(n, 0)
}
