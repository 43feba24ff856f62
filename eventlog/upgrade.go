package eventlog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Stores made before `pisyncd erase` have streams that deny deleting
// single messages, and nats-server refuses to lift deny_delete on an
// existing stream. UpgradeStream brings such a stream to its new settings
// the one way nats-server allows: a snapshot of the stream (its block
// files, byte for byte) into a file, the stream deleted, and the snapshot
// restored under the new settings. Sequences, messages and headers stay
// exactly as they were, which matters: the hub's Pi-Src-Seq, the
// downloader's Pi-Hub-Seq, the saved positions and the projections'
// references all name stream sequences.
//
// The snapshot file is written in full (and synced) before the stream is
// deleted, so a crash at any step loses nothing: on the next start a
// snapshot without its stream is restored, and a snapshot beside its
// stream (not deleted yet, or restored already) is dropped.

// apiPrefix is the JetStream API of the server nc is connected to: the
// upgrade runs over a daemon's or a hub node's own in-process connection.
const apiPrefix = "$JS.API."

// snapshotSuffix names the file that holds a stream during its upgrade.
const snapshotSuffix = ".upgrade-snapshot"

// upgradingSubject replaces a stream's subjects while it is copied, so
// that nothing written meanwhile (a workstation publishing to the hub) is
// stored in the old stream and lost with it: such a publish finds no
// stream and is retried.
func upgradingSubject(name string) string { return "pisyncd.upgrading." + name }

// NeedsUpgrade reports whether an existing stream has settings that
// nats-server will not change in place to cfg's.
func NeedsUpgrade(have, want jetstream.StreamConfig) bool {
	return have.DenyDelete && !want.DenyDelete || have.DenyPurge && !want.DenyPurge
}

// UpgradeStream makes sure the stream named cfg.Name can take cfg: it
// first finishes an upgrade cut short (see above), then, if the existing
// stream has settings nats-server will not change in place, copies it into
// dir, deletes it and restores it with cfg. It reports whether it
// upgraded. A missing stream is left to the caller to create. Nothing may
// read the stream meanwhile: consumers are lost with the old stream.
func UpgradeStream(ctx context.Context, nc *nats.Conn, cfg jetstream.StreamConfig, dir string) (bool, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return false, fmt.Errorf("eventlog: upgrade %s: %w", cfg.Name, err)
	}
	snap := filepath.Join(dir, cfg.Name+snapshotSuffix)
	s, err := js.Stream(ctx, cfg.Name)
	if err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return false, fmt.Errorf("eventlog: upgrade %s: %w", cfg.Name, err)
	}
	if _, serr := os.Stat(snap); serr == nil {
		if s == nil {
			// Deleted, not restored yet: the file is the stream now.
			if err := restoreStream(ctx, nc, cfg, snap, nil); err != nil {
				return false, err
			}
			if err := os.Remove(snap); err != nil {
				return false, fmt.Errorf("eventlog: upgrade %s: %w", cfg.Name, err)
			}
			return true, nil
		}
		// The stream is whole (never deleted, or restored already).
		if err := os.Remove(snap); err != nil {
			return false, fmt.Errorf("eventlog: upgrade %s: %w", cfg.Name, err)
		}
	}
	if s == nil {
		return false, nil
	}
	have := s.CachedInfo().Config
	if have.Mirror != nil || !NeedsUpgrade(have, cfg) {
		return false, nil // (a mirror PI_ALL of old is replaced by OpenAll)
	}
	// Close the stream to writers: its subjects go elsewhere while it is
	// copied. A stream already closed (an upgrade cut short) stays so.
	if len(have.Subjects) != 1 || have.Subjects[0] != upgradingSubject(cfg.Name) {
		closed := have
		closed.Subjects = []string{upgradingSubject(cfg.Name)}
		if _, err = js.UpdateStream(ctx, closed); err != nil {
			return false, fmt.Errorf("eventlog: upgrade %s: close to writers: %w", cfg.Name, err)
		}
	}
	state, err := snapshotStream(ctx, nc, cfg.Name, snap)
	if err != nil {
		return false, err
	}
	if err := js.DeleteStream(ctx, cfg.Name); err != nil {
		return false, fmt.Errorf("eventlog: upgrade %s: delete the old stream: %w", cfg.Name, err)
	}
	if err := restoreStream(ctx, nc, cfg, snap, state); err != nil {
		return false, err
	}
	if err := os.Remove(snap); err != nil {
		return false, fmt.Errorf("eventlog: upgrade %s: %w", cfg.Name, err)
	}
	return true, nil
}

// apiError is the error part of a JetStream API reply.
type apiError struct {
	Error *jetstream.APIError `json:"error,omitempty"`
}

// snapshotStream writes the stream's snapshot (nats-server's own format:
// an s2-compressed tar of its files) to path, durably, and returns the
// stream state it reported.
func snapshotStream(ctx context.Context, nc *nats.Conn, name, path string) (json.RawMessage, error) {
	fail := func(err error) (json.RawMessage, error) {
		return nil, fmt.Errorf("eventlog: upgrade %s: snapshot: %w", name, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fail(err)
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fail(err)
	}
	defer os.Remove(tmp) // a no-op once renamed
	defer f.Close()

	// The server sends the chunks to an inbox of ours and waits for an
	// ack of each (flow control); a message without data ends the run,
	// its status telling success (204) from failure.
	inbox := nc.NewInbox()
	chunks := make(chan *nats.Msg, 64)
	sub, err := nc.ChanSubscribe(inbox, chunks)
	if err != nil {
		return fail(err)
	}
	defer sub.Unsubscribe()
	req, _ := json.Marshal(map[string]any{"deliver_subject": inbox, "no_consumers": true, "chunk_size": 256 << 10})
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	resp, err := nc.RequestWithContext(rctx, apiPrefix+"STREAM.SNAPSHOT."+name, req)
	cancel()
	if err != nil {
		return fail(err)
	}
	var sr struct {
		apiError
		State json.RawMessage `json:"state"`
	}
	if err := json.Unmarshal(resp.Data, &sr); err != nil {
		return fail(fmt.Errorf("bad reply %q: %w", resp.Data, err))
	}
	if sr.Error != nil {
		return fail(sr.Error)
	}
	idle := time.NewTimer(time.Minute)
	defer idle.Stop()
	for done := false; !done; {
		select {
		case <-ctx.Done():
			return fail(ctx.Err())
		case <-idle.C:
			return fail(errors.New("the server stopped sending"))
		case m := <-chunks:
			idle.Reset(time.Minute)
			if len(m.Data) == 0 {
				if st := m.Header.Get("Status"); st != "" && st != "204" {
					return fail(fmt.Errorf("server: %s %s", st, m.Header.Get("Description")))
				}
				done = true
				continue
			}
			if _, err := f.Write(m.Data); err != nil {
				return fail(err)
			}
			if m.Reply == "" {
				continue // the last chunk asks for no ack
			}
			if err := m.Respond(nil); err != nil {
				return fail(err)
			}
		}
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fail(err)
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		d.Sync()
		d.Close()
	}
	return sr.State, nil
}

// restoreStream creates the stream cfg.Name from the snapshot at path,
// with cfg as its settings.
func restoreStream(ctx context.Context, nc *nats.Conn, cfg jetstream.StreamConfig, path string, state json.RawMessage) error {
	fail := func(err error) error {
		return fmt.Errorf("eventlog: upgrade %s: restore: %w", cfg.Name, err)
	}
	f, err := os.Open(path)
	if err != nil {
		return fail(err)
	}
	defer f.Close()
	body := map[string]any{"config": cfg}
	if len(state) > 0 {
		body["state"] = state
	}
	req, _ := json.Marshal(body)
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	resp, err := nc.RequestWithContext(rctx, apiPrefix+"STREAM.RESTORE."+cfg.Name, req)
	cancel()
	if err != nil {
		return fail(err)
	}
	var rr struct {
		apiError
		Deliver string `json:"deliver_subject"`
	}
	if err := json.Unmarshal(resp.Data, &rr); err != nil {
		return fail(fmt.Errorf("bad reply %q: %w", resp.Data, err))
	}
	if rr.Error != nil {
		return fail(rr.Error)
	}
	// Every chunk is a request: its (empty) reply is the server's ack, an
	// error object if it failed. An empty message ends the upload; its
	// reply comes once the stream is restored.
	buf := make([]byte, 128<<10)
	for {
		n, rerr := io.ReadFull(f, buf)
		if n > 0 {
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			ack, err := nc.RequestWithContext(cctx, rr.Deliver, buf[:n])
			cancel()
			if err != nil {
				return fail(err)
			}
			if len(ack.Data) > 0 {
				var ae apiError
				if json.Unmarshal(ack.Data, &ae) == nil && ae.Error != nil {
					return fail(ae.Error)
				}
			}
		}
		if errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF) {
			break
		}
		if rerr != nil {
			return fail(rerr)
		}
	}
	// Restoring a large store takes a while: the server reads it all.
	cctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	end, err := nc.RequestWithContext(cctx, rr.Deliver, nil)
	if err != nil {
		return fail(err)
	}
	var er apiError
	if err := json.Unmarshal(end.Data, &er); err != nil {
		return fail(fmt.Errorf("bad reply %q: %w", end.Data, err))
	}
	if er.Error != nil {
		return fail(er.Error)
	}
	return nil
}

// UpgradeStreams runs UpgradeStream for this machine's streams, PI_LOCAL
// and PI_ALL, keeping their snapshots in dir while it works, and returns
// the names of those it upgraded. Call it before opening them, while
// nothing reads them.
func UpgradeStreams(ctx context.Context, nc *nats.Conn, dir string) ([]string, error) {
	var done []string
	for _, cfg := range []jetstream.StreamConfig{LocalStreamConfig(), AllStreamConfig()} {
		ok, err := UpgradeStream(ctx, nc, cfg, dir)
		if err != nil {
			return done, err
		}
		if ok {
			done = append(done, cfg.Name)
		}
	}
	return done, nil
}
