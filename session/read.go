package session

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"runtime"
	"sync"
)

// File is a whole session file as pi loads it: the Tree plus the raw kept
// lines, which serve as the Tree's BodySource (Ref = position among the
// kept lines, header included).
type File struct {
	Tree  *Tree
	lines [][]byte
}

// Read reads a whole session file the way pi's loadEntriesFromFile does
// (spec §2): lines split on '\n' only, of any length; invalid UTF-8 replaced
// by U+FFFD as node's decoder does; blank, malformed and falsy lines
// skipped; other values kept, including id-less pseudo-entries.
//
// A zero-byte input returns ErrEmptyFile (pi would write a fresh header into
// it). Input whose first kept value is not a header with a string id —
// whitespace only, an entry first, a BOM before the header — returns
// ErrNotSession, as pi's open() throws.
func Read(r io.Reader) (*File, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("session: read: %w", err)
	}
	return Load(data)
}

// Load is Read for bytes already in memory, with the rule set chosen per
// session (RulesAuto). The File keeps its own copies only of lines that
// needed UTF-8 repair; other lines alias data.
func Load(data []byte) (*File, error) { return LoadRules(data, RulesAuto) }

// LoadRules is Load under the rule set mode.
func LoadRules(data []byte, mode RuleSet) (*File, error) {
	return LoadWith(data, LoadOptions{Rules: mode})
}

// LoadOptions say how LoadWith reads a file.
type LoadOptions struct {
	// Rules is the rule set (RulesAuto: chosen per session).
	Rules RuleSet
	// NoStats leaves the tree's token and cost totals (Stats) at zero: a
	// reader that wants only a context (`context FILE`) skips the second
	// scan of every assistant message's usage, about a tenth of a load.
	NoStats bool
}

// LoadWith is Load with options.
func LoadWith(data []byte, o LoadOptions) (*File, error) {
	if len(data) == 0 {
		return nil, ErrEmptyFile
	}
	f := &File{Tree: NewTree()}
	f.Tree.SetRules(o.Rules)
	f.Tree.noStats = o.NoStats
	// Sized once for every line: the count is a fast pass, and growing
	// the tree's slices and id index step by step copied and rehashed them.
	n := bytes.Count(data, []byte{'\n'}) + 1
	f.lines = make([][]byte, 0, n)
	f.Tree.grow(n)
	if runtime.GOMAXPROCS(0) > 1 && len(data) >= pipelineMin {
		if err := f.loadPipelined(data); err != nil {
			return nil, fmt.Errorf("session: load: %w", err)
		}
	} else if err := f.loadLines(data); err != nil {
		return nil, fmt.Errorf("session: load: %w", err)
	}
	if f.Tree.state != 1 {
		return nil, fmt.Errorf("session: load: %w", ErrNotSession)
	}
	return f, nil
}

func (f *File) add(l Line) error {
	if !l.Kind.Kept() {
		return nil
	}
	ref := Ref(len(f.lines))
	f.lines = append(f.lines, l.Raw)
	return f.Tree.Append(l, ref)
}

// loadLines adds the lines of data in order, on this goroutine.
func (f *File) loadLines(data []byte) error {
	for {
		line, rest, more := bytes.Cut(data, []byte{'\n'})
		if err := f.add(ParseLine(ToValidUTF8(line))); err != nil {
			return err
		}
		if !more {
			return nil
		}
		data = rest
	}
}

// pipelineMin is the smallest input loadPipelined takes: below it a
// goroutine costs more than it saves.
const pipelineMin = 1 << 20

// pipeBatch is how many lines one batch of loadPipelined carries,
// pipeParsers how many goroutines parse them, and pipeBatches how many
// batches each of them may fill ahead of the tree.
const (
	pipeBatch   = 128
	pipeParsers = 2
	pipeBatches = 4
)

// pipeSlot is a batch of loadPipelined: the parsed lines of one run of
// pipeBatch lines, whether it is the file's last, and the two hand-overs
// (cap 1 each) between the parser that fills it and the tree.
type pipeSlot struct {
	lines []Line
	last  bool
	full  chan struct{}
	free  chan struct{}
}

// loadPipelined is Load's loop on more than one core: goroutines parse
// runs of lines (ParseLine validates each: more than half of a line's
// cost) while this one adds them to the tree in file order, so what is
// added and the first error are the sequential loop's. Two parsers keep
// the tree busy on two cores where one could not (it parses slower than
// the tree adds). Run k of the file goes to slot k of a ring; the parsers
// take runs, and their slots, in order under a lock (cutting a run is a few
// IndexByte calls), so the lowest run not yet added always has its slot.
// The slots are used again and again: the parsed lines take no memory
// that grows with the file.
func (f *File) loadPipelined(data []byte) error {
	slots := make([]pipeSlot, pipeParsers*pipeBatches)
	for i := range slots {
		slots[i] = pipeSlot{lines: make([]Line, 0, pipeBatch), full: make(chan struct{}, 1), free: make(chan struct{}, 1)}
		slots[i].free <- struct{}{}
	}
	quit := make(chan struct{})
	var (
		mu   sync.Mutex
		next int  // the next run to cut, under mu
		done bool // the last run is cut, under mu
	)
	// cut takes the next run of up to pipeBatch lines off data (without
	// the '\n' that ends it, as bytes.Cut would leave it), and its slot
	// once the tree has read the run before in it. Both under mu: a
	// parser that took run k but not yet its slot must not be passed by
	// the other taking run k+len(slots) into that slot, which the tree
	// would then read as run k.
	cut := func() (s *pipeSlot, run []byte, last, ok bool) {
		mu.Lock()
		defer mu.Unlock()
		if done {
			return nil, nil, false, false
		}
		s = &slots[next%len(slots)]
		select {
		case <-s.free:
		case <-quit:
			return nil, nil, false, false
		}
		next++
		rest := data
		for range pipeBatch {
			i := bytes.IndexByte(rest, '\n')
			if i < 0 {
				run, data, done = data, nil, true
				return s, run, true, true
			}
			rest = rest[i+1:]
		}
		run, data = data[:len(data)-len(rest)-1], rest
		return s, run, false, true
	}
	// parse fills slots with runs until there are none left, or the tree
	// has stopped (quit).
	parse := func() {
		for {
			s, run, last, ok := cut()
			if !ok {
				return
			}
			b := s.lines[:0]
			for {
				line, rest, more := bytes.Cut(run, []byte{'\n'})
				if l := ParseLine(ToValidUTF8(line)); l.Kind.Kept() {
					b = append(b, l)
				}
				if !more {
					break
				}
				run = rest
			}
			s.lines, s.last = b, last
			s.full <- struct{}{} // never blocks: the tree took the slot's last run
		}
	}
	h := newHelpers()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(quit)
	for range pipeParsers {
		wg.Go(func() { h.run(parse) })
	}
	for k := 0; ; k++ {
		s := &slots[k%len(slots)]
		select {
		case <-s.full:
		case <-h.faulted:
			h.rethrow() // the input faulted under a parser (helpers)
		}
		for i := range s.lines {
			if err := f.add(s.lines[i]); err != nil {
				return err
			}
		}
		last := s.last
		s.free <- struct{}{}
		if last {
			return nil
		}
	}
}

// Body implements BodySource over the file's kept lines.
func (f *File) Body(ref Ref) ([]byte, error) {
	if ref < 0 || int(ref) >= len(f.lines) {
		return nil, fmt.Errorf("session: no line %d", ref)
	}
	return f.lines[ref], nil
}

// Context is the context at the file's leaf.
func (f *File) Context() (*Context, error) { return f.Tree.Context(f) }

// ContextAt is the context at entry id, or with no leaf for nil.
func (f *File) ContextAt(id *string) (*Context, error) { return f.Tree.ContextAt(id, f) }

// ContextJSON renders the corpus-shaped context JSON of f at its leaf, or
// at entry *leaf when leaf is not nil.
func ContextJSON(f *File, leaf *string) ([]byte, error) {
	var c *Context
	var err error
	if leaf == nil {
		c, err = f.Context()
	} else {
		c, err = f.ContextAt(leaf)
	}
	if err != nil {
		return nil, err
	}
	// Not json.Marshal: its check of the output stops at 10,000 levels,
	// and pi passes content of any depth through.
	return c.MarshalJSON()
}

// Spans is a session file read line by line from an io.ReaderAt: the Tree,
// and where each kept line lies in the input, so that a context reads its
// bodies back from the input (Spans is its BodySource) instead of holding
// the file. It reads as Load does (Ref = position among the kept lines,
// header included); one line at a time is held while it is read.
type Spans struct {
	Tree  *Tree
	r     io.ReaderAt
	spans []span
}

type span struct{ off, n int64 }

// ReadSpans reads size bytes of r under the rule set mode. Its errors are
// Load's.
func ReadSpans(r io.ReaderAt, size int64, mode RuleSet) (*Spans, error) {
	if size == 0 {
		return nil, ErrEmptyFile
	}
	s := &Spans{Tree: NewTree(), r: r}
	s.Tree.SetRules(mode)
	br := bufio.NewReaderSize(io.NewSectionReader(r, 0, size), 256<<10)
	var off int64
	var long []byte
	for {
		piece, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			if long == nil && !mayBeEntry(piece) {
				// No object: pi skips the line, and it is not held to
				// find that out (a file of 2 GiB of NULs was held whole,
				// 7 GB with the copies of its growth).
				n, err := skipLine(br)
				if err != nil {
					return nil, fmt.Errorf("session: read: %w", err)
				}
				off += int64(len(piece)) + n
				continue
			}
			long = append(long, piece...)
			continue
		}
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("session: read: %w", err)
		}
		line := piece
		if long != nil {
			line = append(long, piece...)
		}
		n := int64(len(line))
		line = bytes.TrimSuffix(line, []byte{'\n'})
		l := ParseLine(ToValidUTF8(line))
		if l.Kind.Kept() {
			ref := Ref(len(s.spans))
			s.spans = append(s.spans, span{off, int64(len(line))})
			if err := s.Tree.Append(l, ref); err != nil {
				return nil, fmt.Errorf("session: load: %w", err)
			}
		}
		off += n
		long = nil
		if err == io.EOF {
			break
		}
	}
	if s.Tree.state != 1 {
		return nil, fmt.Errorf("session: load: %w", ErrNotSession)
	}
	return s, nil
}

// mayBeEntry reports whether a line that begins with start may be an
// object, which only an entry or a header is: its first byte past JSON's
// white space is '{' (or a byte-order mark's first, which ParseLine
// judges).
func mayBeEntry(start []byte) bool {
	for _, c := range start {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		case '{', 0xEF:
			return true
		}
		return false
	}
	return true // white space so far: held, as any line
}

// skipLine reads past the rest of a line (its '\n' included), holding
// none of it, and returns how many bytes it read.
func skipLine(br *bufio.Reader) (int64, error) {
	var n int64
	for {
		piece, err := br.ReadSlice('\n')
		n += int64(len(piece))
		switch err {
		case nil, io.EOF:
			return n, nil
		case bufio.ErrBufferFull:
			continue
		}
		return n, err
	}
}

// Body implements BodySource: the kept line ref, read back from the input.
func (s *Spans) Body(ref Ref) ([]byte, error) {
	if ref < 0 || int(ref) >= len(s.spans) {
		return nil, fmt.Errorf("session: no line %d", ref)
	}
	sp := s.spans[ref]
	b := make([]byte, sp.n)
	if _, err := s.r.ReadAt(b, sp.off); err != nil {
		return nil, fmt.Errorf("session: read line %d: %w", ref, err)
	}
	return ToValidUTF8(b), nil
}
