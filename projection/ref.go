package projection

import (
	"fmt"
	"strconv"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/session"
)

// A session.Ref here is a stream position: the sequence of the line's last
// message (Event.Seq), with bit 62 set for PI_ALL. Split lines are atomic
// batches, so their chunks sit on consecutive sequences before it.
const allBit = 1 << 62

func makeRef(stream string, seq uint64) session.Ref {
	if stream == eventlog.AllStream {
		return session.Ref(seq | allBit)
	}
	return session.Ref(seq)
}

func refStream(r session.Ref) string {
	if r&allBit != 0 {
		return eventlog.AllStream
	}
	return eventlog.LocalStream
}

func refSeq(r session.Ref) uint64 { return uint64(r &^ allBit) }

// refString is the form refs take in views: "L:123" (PI_LOCAL) or "A:123"
// (PI_ALL), short because a context index holds thousands.
func refString(r session.Ref) string {
	p := "L:"
	if r&allBit != 0 {
		p = "A:"
	}
	return p + strconv.FormatUint(refSeq(r), 10)
}

// ParseRef reads a ref of a view back: its stream and sequence.
func ParseRef(s string) (stream string, seq uint64, err error) {
	if len(s) < 3 || s[1] != ':' || (s[0] != 'L' && s[0] != 'A') {
		return "", 0, fmt.Errorf("projection: bad ref %q", s)
	}
	seq, err = strconv.ParseUint(s[2:], 10, 64)
	if err != nil {
		return "", 0, fmt.Errorf("projection: bad ref %q: %w", s, err)
	}
	if s[0] == 'A' {
		return eventlog.AllStream, seq, nil
	}
	return eventlog.LocalStream, seq, nil
}
