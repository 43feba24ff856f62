// Package admit is the one admission point for events from other machines.
// Every line and control event that comes down from the hub passes a Gate
// before anything here sees it: what is rejected never enters PI_ALL, so the
// replicator, the projections and subscribers only ever read lines that are
// one JSON object whose headers agree with it, under a name pi could make.
package admit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/session"
)

// Reason names why a remote event was rejected: a label for status, logs
// and metrics.
type Reason string

const (
	NotObject      Reason = "not-a-json-object"
	LineBreak      Reason = "line-break-inside"
	TooLong        Reason = "too-long"
	HeaderMismatch Reason = "headers-disagree-with-payload"
	BadFileName    Reason = "bad-file-name"
	BadCwd         Reason = "bad-cwd"
	UnknownOp      Reason = "unknown-control-event"
	NoAuthority    Reason = "no-authority-over-session"
	BrokenChunks   Reason = "broken-chunk-run"
	BadSubject     Reason = "bad-subject"
	SessionQuota   Reason = "over-new-session-quota"
	ByteQuota      Reason = "over-byte-quota"
	Quarantined    Reason = "quarantined"
)

// Rejection is a remote event that is passed over, with the reason.
type Rejection struct {
	Node, SID string
	Reason    Reason
	Detail    string
}

func (r *Rejection) Error() string {
	s := fmt.Sprintf("admit: rejected an event of session %q from node %q: %s", r.SID, r.Node, r.Reason)
	if r.Detail != "" {
		s += " (" + r.Detail + ")"
	}
	return s
}

// Unwrap makes a rejection match eventlog.ErrRejected, which is all the
// downloader needs to know.
func (r *Rejection) Unwrap() error { return eventlog.ErrRejected }

// nameMax is NAME_MAX on Linux and macOS: the longest name of one folder or
// file. pathMax bounds a whole relative path.
const (
	nameMax = 255
	pathMax = 4096
	// controlMax bounds a control event's payload.
	controlMax = 16 << 10
)

// Check validates one whole remote event on its own, without state: a
// line must be one JSON object on one line (a single '\r' before the '\n'
// is kept, as the tailer publishes lines of CRLF files), within maxLine,
// with Pi-Type, Pi-Id and Pi-Parent equal to its own fields, a header's id
// equal to the subject's session, a session id short enough for subjects
// (eventlog.CheckSID), a valid file name and a cwd without control
// characters. A control event must be a known one naming a valid
// file. It returns nil or a *Rejection.
func Check(ev *eventlog.Event, maxLine int) *Rejection {
	rej := func(r Reason, format string, a ...any) *Rejection {
		return &Rejection{Node: ev.Node, SID: ev.SID, Reason: r, Detail: fmt.Sprintf(format, a...)}
	}
	if err := eventlog.CheckSID(ev.SID); err != nil {
		return rej(BadSubject, "%v", err) // no subject or key is built from it here
	}
	if len(ev.Raw) > maxLine {
		return rej(TooLong, "%s", eventlog.TooLongDetail(fmt.Sprintf("a line of %d bytes", len(ev.Raw)), maxLine))
	}
	if ev.File != "" {
		if err := ValidFile(ev.File); err != nil {
			return rej(BadFileName, "%v", err)
		}
	}
	switch ev.Op {
	case "":
	case eventlog.OpDelete, eventlog.OpRestore, eventlog.OpErase:
		// The payload is a small JSON object naming the op and the file.
		if ev.File == "" || len(ev.Raw) > controlMax || session.ParseLine(ev.Raw).Kind != session.Entry {
			return rej(UnknownOp, "a %s event without its file or JSON object", ev.Op)
		}
		return nil
	default:
		return rej(UnknownOp, "%.64q", ev.Op)
	}
	body := bytes.TrimSuffix(ev.Raw, []byte{'\r'})
	if i := bytes.IndexAny(body, "\r\n"); i >= 0 {
		return rej(LineBreak, "byte %d", i)
	}
	l := session.ParseLine(ev.Raw)
	if l.Kind != session.Header && l.Kind != session.Entry {
		return rej(NotObject, "a %s line", l.Kind)
	}
	id := ""
	if l.HasID {
		id = l.ID
	}
	parent := ""
	if l.HasParent {
		parent = l.ParentID
	}
	if ev.Type != l.Type || ev.ID != id || ev.ParentID != parent {
		return rej(HeaderMismatch, "Pi-Type %.32q Pi-Id %.64q Pi-Parent %.64q against %.32q %.64q %.64q",
			ev.Type, ev.ID, ev.ParentID, l.Type, id, parent)
	}
	if l.Kind == session.Header {
		if id != ev.SID {
			return rej(HeaderMismatch, "header id %.64q on the subject of session %.64q", id, ev.SID)
		}
		if err := checkCwd(ev.Raw); err != nil {
			return rej(BadCwd, "%v", err)
		}
	}
	return nil
}

// ValidFile checks a file path relative to the sessions root, as the
// tailer publishes it: '/'-separated names, none empty, "." or "..", none
// hidden or longer than NAME_MAX, no control characters or '\', valid
// UTF-8, ending in ".jsonl".
func ValidFile(rel string) error {
	if rel == "" || len(rel) > pathMax || !utf8.ValidString(rel) {
		return fmt.Errorf("file %.64q: empty, too long or not UTF-8", rel)
	}
	if !strings.HasSuffix(rel, ".jsonl") {
		return fmt.Errorf("file %.64q: not a .jsonl file", rel)
	}
	for name := range strings.SplitSeq(rel, "/") { // no slice: every remote event and every read of a file checks its name
		if name == "" || name[0] == '.' || len(name) > nameMax {
			return fmt.Errorf("file %.64q: name %.64q is empty, hidden or longer than %d bytes", rel, name, nameMax)
		}
		if i := strings.IndexFunc(name, isControl); i >= 0 || strings.ContainsRune(name, '\\') {
			return fmt.Errorf("file %.64q: control character or '\\' in a name", rel)
		}
	}
	return nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) }

// checkCwd accepts a header whose cwd, when it is a string, has no control
// characters (a header without a string cwd is pi's to reject, and the
// replicator writes no file for it).
func checkCwd(raw []byte) error {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return nil // Check has parsed it as an object; unreachable
	}
	var cwd string
	if json.Unmarshal(obj["cwd"], &cwd) != nil {
		return nil
	}
	if strings.IndexFunc(cwd, isControl) >= 0 {
		return fmt.Errorf("cwd %.64q holds a control character", cwd)
	}
	if len(cwd) > pathMax {
		return errors.New("cwd longer than 4096 bytes")
	}
	return nil
}
