package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/config"
	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/projection"
	"github.com/pisyncd/pisyncd/session"
)

// TestProjectionCommands runs ls, context SESSION-ID, context FILE and tail
// against a projection served on the control socket, as the daemon will
// once it mounts projection.Worker.Handler.
func TestProjectionCommands(t *testing.T) {
	state, sessions := t.TempDir(), t.TempDir()
	t.Setenv("PISYNC_STATE_DIR", state)
	t.Setenv("PISYNC_SESSIONS_DIR", sessions)
	t.Setenv("PISYNC_NODE_ID", "cmd-node")
	cfg, err := config.Load()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d, err := OpenStore(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()

	sid := "0199ffff-0000-7000-8000-000000000001"
	lines := []string{
		`{"type":"session","version":3,"id":"` + sid + `","timestamp":"2026-11-29T23:08:16.463Z","cwd":"/home/u/cmd"}`,
		`{"type":"message","id":"m1","parentId":null,"timestamp":"2026-11-29T23:08:17.000Z","message":{"role":"user","content":"hello","timestamp":1}}`,
		`{"type":"message","id":"m2","parentId":"m1","timestamp":"2026-11-29T23:08:18.000Z","message":{"role":"assistant","content":[{"type":"text","text":"hi"}],"provider":"p","model":"m","usage":{"totalTokens":7,"cost":{"total":0.25}},"timestamp":2}}`,
	}
	file := filepath.Join(t.TempDir(), sid+".jsonl")
	os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o600)
	publish := func(last uint64, raws ...string) uint64 {
		var ls []eventlog.Line
		for _, r := range raws {
			l := session.ParseLine([]byte(r))
			ls = append(ls, eventlog.NewLine([]byte(r), l.ID, l.ParentID, l.Type, "x/"+sid+".jsonl", 0))
		}
		seq, _, err := d.log.Publish(ctx, sid, last, ls)
		if err != nil {
			t.Fatal(err)
		}
		return seq
	}
	last := publish(0, lines...)

	w, err := projection.New(d.nc, projection.Options{Node: cfg.NodeID})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := listenControl(state)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: w.Handler(), ReadHeaderTimeout: 5 * time.Second}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); w.Run(ctx) }()
	go func() { defer wg.Done(); srv.Serve(ln) }()
	defer func() {
		srv.Shutdown(context.Background())
		cancel()
		wg.Wait()
	}()

	// ls: poll until the session shows.
	deadline := time.Now().Add(20 * time.Second)
	for {
		var out bytes.Buffer
		if err := lsCommand([]string{"--json"}, &out); err != nil {
			t.Fatal(err)
		}
		var cat []projection.CatalogEntry
		json.Unmarshal(out.Bytes(), &cat)
		if len(cat) == 1 && cat[0].Entries == 2 && cat[0].Tokens == 7 && cat[0].Cwd == "/home/u/cmd" {
			// The catalog's first message is in the JSON, under pi's name.
			if !strings.Contains(out.String(), `"firstMessage":"hello"`) || strings.Contains(out.String(), `"forked"`) {
				t.Fatalf("ls --json: %s", out.String())
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ls: %s", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	var table bytes.Buffer
	if err := lsCommand(nil, &table); err != nil || !strings.Contains(table.String(), sid) {
		t.Fatalf("ls table: %v\n%s", err, table.String())
	}

	// context by session id equals context FILE.
	var byID, byFile bytes.Buffer
	if err := contextCommand([]string{sid, "--json"}, &byID); err != nil {
		t.Fatal(err)
	}
	if err := contextCommand([]string{"--json", file}, &byFile); err != nil {
		t.Fatal(err)
	}
	if byID.String() != byFile.String() {
		t.Fatalf("context by id:\n%s\nby file:\n%s", byID.String(), byFile.String())
	}
	// The daemon's answer goes through the 1 MiB buffer: a stdout with a
	// ReadFrom of its own (an *os.File) is not handed the copy, which
	// would write each 32 KiB read straight through.
	var rec writeRecorder
	if err := contextCommand([]string{sid, "--json"}, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.readFroms != 0 || rec.writes != 1 || rec.buf.String() != byFile.String() {
		t.Fatalf("context by id: %d ReadFrom calls, %d writes (want 0, 1)\n%s", rec.readFroms, rec.writes, rec.buf.String())
	}
	var human bytes.Buffer
	if err := contextCommand([]string{sid}, &human); err != nil || !strings.Contains(human.String(), "leaf m2") {
		t.Fatalf("human context: %v\n%s", err, human.String())
	}
	if err := contextCommand([]string{"no-such-session"}, io.Discard); err == nil {
		t.Fatal("unknown session: no error")
	}

	// tail: subscribe, then append; the entry arrives.
	pr, pw := io.Pipe()
	tailDone := make(chan error, 1)
	var tailErr bytes.Buffer
	go func() {
		tailDone <- tailCommand([]string{"--session", sid, "--type", "message", "--json"}, pw, &tailErr)
		pw.Close()
	}()
	// tail of a session no stream holds says so on stderr, and waits.
	er, ew := io.Pipe()
	unknownDone := make(chan error, 1)
	go func() {
		unknownDone <- tailCommand([]string{"--session", "no-such-session"}, io.Discard, ew)
		ew.Close()
	}()
	// Error, not Fatal, here and below: the tails must still end with the
	// server.
	if note, ok := noteWithin(er); !ok {
		t.Error("tail of an unknown session: no note on stderr in 20 s")
	} else if !strings.Contains(note, "no session no-such-session here yet") {
		t.Errorf("tail of an unknown session: stderr %q", note)
	}
	// A type pisyncd does not know is followed, with a note naming the
	// known ones (before, it waited in silence).
	ter, tew := io.Pipe()
	unknownTypeDone := make(chan error, 1)
	go func() {
		unknownTypeDone <- tailCommand([]string{"--type", "bogus"}, io.Discard, tew)
		tew.Close()
	}()
	if note, ok := noteWithin(ter); !ok {
		t.Error("tail --type bogus: no note on stderr in 20 s")
	} else if !strings.Contains(note, `type "bogus" is none pisyncd knows (session, message, `) || !strings.Contains(note, "context_edit, tombstone, restore, erase)") || !strings.Contains(note, "waiting for entries of that type all the same") {
		t.Errorf("tail of an unknown type: stderr %q", note)
	}
	got := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		if sc.Scan() {
			got <- sc.Text()
		}
		close(got)
		io.Copy(io.Discard, pr)
	}()
	// The subscription is live once /tail answered; appends before that
	// would be missed, so append until one shows.
	n := 3
	var line string
	giveUp := time.After(20 * time.Second)
	for line == "" {
		select {
		case line = <-got:
		case <-time.After(200 * time.Millisecond):
			last = publish(last, fmt.Sprintf(`{"type":"message","id":"t%d","parentId":"m2","timestamp":"2026-11-29T23:09:00.000Z","message":{"role":"user","content":"more","timestamp":3}}`, n))
			n++
		case <-giveUp:
			t.Fatal("tail: nothing arrived")
		}
	}
	var e projection.TailEntry
	if err := json.Unmarshal([]byte(line), &e); err != nil || e.Session != sid || e.Type != "message" {
		t.Fatalf("tail line %q: %v", line, err)
	}
	// Stopping the server ends the tail.
	srv.Close()
	for _, done := range []chan error{tailDone, unknownDone, unknownTypeDone} {
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatal("tail did not end")
		}
	}
	if tailErr.Len() != 0 {
		t.Fatalf("tail of a known session wrote to stderr: %q", tailErr.String())
	}
}

// writeRecorder counts how a command writes to it.
type writeRecorder struct {
	buf               bytes.Buffer
	writes, readFroms int
}

func (w *writeRecorder) Write(p []byte) (int, error) {
	w.writes++
	return w.buf.Write(p)
}

func (w *writeRecorder) ReadFrom(r io.Reader) (int64, error) {
	w.readFroms++
	return w.buf.ReadFrom(r)
}

// noteWithin returns r's first line, or false when none comes within 20 s.
// What follows it is read and thrown away, so that its writer never
// blocks.
func noteWithin(r io.Reader) (string, bool) {
	c := make(chan string, 1)
	go func() {
		br := bufio.NewReader(r)
		line, _ := br.ReadString('\n')
		c <- line
		io.Copy(io.Discard, br)
	}()
	select {
	case line := <-c:
		return line, true
	case <-time.After(20 * time.Second):
		return "", false
	}
}
