package eventlog

import "github.com/nats-io/nats.go"

// Assemblers joins the chunks of the lines of many subjects read in stream
// order: an Assembler per subject, kept only while a line of that subject
// is split and missing chunks. Readers that follow a whole stream held one
// per subject for as long as they ran (10,000 sessions: ~1.5 MB each).
type Assemblers struct {
	headersOnly bool
	held        map[string]*Assembler
	spare       *Assembler // the assembler of whole lines, reused
}

// NewAssemblers returns an empty set; headersOnly skips payloads and the
// hash check (NewAssembler).
func NewAssemblers(headersOnly bool) *Assemblers {
	return &Assemblers{headersOnly: headersOnly, held: map[string]*Assembler{}}
}

// Add is Assembler.Add on subj's assembler.
func (as *Assemblers) Add(stream, subj string, seq uint64, h nats.Header, data []byte) (*Event, error) {
	a, held := as.held[subj]
	if !held {
		if as.spare == nil {
			as.spare = NewAssembler(as.headersOnly)
		}
		a = as.spare
	}
	ev, err := a.Add(stream, subj, seq, h, data)
	switch pending := a.PendingStart() > 0; {
	case pending && !held:
		as.held[subj], as.spare = a, nil
	case !pending && held:
		delete(as.held, subj)
	}
	return ev, err
}

// PendingStart is the stream sequence of the first chunk of the earliest
// split line still missing chunks, 0 when none is: a reader's position
// must stay before it.
func (as *Assemblers) PendingStart() uint64 {
	var first uint64
	for _, a := range as.held {
		if s := a.PendingStart(); s > 0 && (first == 0 || s < first) {
			first = s
		}
	}
	return first
}
