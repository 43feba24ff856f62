package eventlog

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// hubMsg is a stored hub message as the downloader receives it; only the
// fields the framer reads are real.
type hubMsg struct {
	jetstream.Msg
	subj string
	hdr  nats.Header
	data []byte
	seq  uint64
}

func (m *hubMsg) Subject() string      { return m.subj }
func (m *hubMsg) Headers() nats.Header { return m.hdr }
func (m *hubMsg) Data() []byte         { return m.data }
func (m *hubMsg) Metadata() (*jetstream.MsgMetadata, error) {
	return &jetstream.MsgMetadata{Sequence: jetstream.SequencePair{Stream: m.seq}, Timestamp: time.Unix(int64(m.seq), 0)}, nil
}

// admitAll admits every whole line: the framing is what is fuzzed here.
type admitAll struct{ rejected int }

func (a *admitAll) Admit(context.Context, *Event, time.Time) error { return nil }
func (a *admitAll) Reject(_, _, _, _ string)                       { a.rejected++ }
func (a *admitAll) ErasedLines(_, _ string)                        {}

// FuzzFramer: whatever sequence of messages nodes store on the hub, the
// framer hands on only whole lines (every chunk of a run, in order, on one
// subject, matching its Pi-Sha, within the line limit) and never holds
// more than one line's chunks.
func FuzzFramer(f *testing.F) {
	f.Add([]byte{0, 1, 3, 10, 1, 2, 3, 20, 2, 3, 3, 5, 0, 0, 1, 4})
	f.Add([]byte{1, 1, 250, 200, 1, 2, 250, 200, 1, 3, 3, 100})
	f.Fuzz(func(t *testing.T, script []byte) {
		// Two chunks at most, and two large ones are too long: both
		// limits are reached.
		const maxLine = MaxChunk + 100<<10
		d := &Downloader{opts: DownloaderOptions{Admit: &admitAll{}}}
		fr := &framer{d: d, maxLine: maxLine}
		var msgs []jetstream.Msg
		var truth = map[string][]byte{} // subject → the line a run claims
		for i := 0; i+3 < len(script) && len(msgs) < 200; i += 4 {
			subj := UpSubject("n", fmt.Sprint("s", script[i]%3))
			chunk, n := int(script[i+1]%6), int(script[i+2]%6)
			size := int(script[i+3]) * 1024
			data := bytes.Repeat([]byte{'a' + script[i]%3}, size)
			h := nats.Header{}
			if n > 1 || chunk > 1 {
				h.Set(HdrChunk, fmt.Sprintf("%d/%d", chunk, n))
			}
			line := truth[subj]
			if chunk <= 1 {
				line = nil
			}
			line = append(line, data...)
			truth[subj] = line
			sum := sha256.Sum256(line) // right only if the run completes as sent
			h.Set(HdrSha, hex.EncodeToString(sum[:]))
			h.Set(HdrType, "message")
			msgs = append(msgs, &hubMsg{subj: subj, hdr: h, data: data, seq: uint64(len(msgs) + 1)})
		}
		lines, err := fr.take(context.Background(), msgs)
		if err != nil {
			t.Fatal(err)
		}
		last := uint64(0)
		for _, l := range lines {
			var raw []byte
			for i, m := range l {
				seq, _ := strconv.ParseUint(m.Header.Get(HdrHubSeq), 10, 64)
				if seq <= last {
					t.Fatalf("out of order: seq %d after %d", seq, last)
				}
				last = seq
				ci, cn, err := ParseChunk(m.Header.Get(HdrChunk))
				if err != nil || ci != i+1 || cn != len(l) || m.Subject != l[0].Subject {
					t.Fatalf("run of %d: chunk %q on %s", len(l), m.Header.Get(HdrChunk), m.Subject)
				}
				raw = append(raw, m.Data...)
			}
			if len(raw) > maxLine {
				t.Fatalf("a line of %d bytes, limit %d", len(raw), maxLine)
			}
			if sha, _ := ParseSha(l[0].Header.Get(HdrSha)); sha != sha256.Sum256(raw) {
				t.Fatalf("a line that does not match its sha")
			}
		}
		if fr.runSize > maxLine || len(fr.run) > (maxLine+MaxChunk-1)/MaxChunk {
			t.Fatalf("holding %d chunks, %d bytes", len(fr.run), fr.runSize)
		}
	})
}
