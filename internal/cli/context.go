package cli

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"runtime/debug"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/pisyncd/pisyncd/session"
)

// Flag texts and the valued flags (Reorder) every context command shares.
const (
	ContextJSONUsage  = `print {rules, rulesMode, leafId, contextEntryIds, messages, thinkingLevel, model}`
	ContextRulesUsage = "the context rules: auto, seed or pi-1.6 (default: PISYNC_RULES, else auto; docs/RULES.md)"
)

// ContextValued are the context flags that take a value (Reorder).
var ContextValued = []string{"leaf", "rules"}

// ContextFile is `context FILE [--leaf ID] [--rules SET] [--json]`: pi's
// rules applied to the file directly, no daemon needed. usage is the
// calling binary's usage line; lookup reads the environment
// (os.LookupEnv), for PISYNC_RULES when --rules is not given.
func ContextFile(args []string, stdout io.Writer, usage string, lookup func(string) (string, bool)) error {
	fs := flag.NewFlagSet("context", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, ContextJSONUsage)
	leaf := fs.String("leaf", "", "build the context at this entry id instead of the file's leaf")
	rules := fs.String("rules", "", ContextRulesUsage)
	if err := ParseArgs(fs, Reorder(args, ContextValued...), usage, 1); err != nil {
		return err
	}
	if err := CheckLeafFlag(fs, usage); err != nil {
		return err
	}
	mode, err := ContextRules(*rules, usage)
	if err != nil {
		return err
	}
	if *rules == "" {
		// PISYNC_RULES alone: `context FILE` needs no other setting.
		if mode, err = LoadRules(lookup); err != nil {
			return err
		}
	}
	return WriteFileContext(stdout, fs.Arg(0), *leaf, *asJSON, mode)
}

// CheckLeafFlag refuses a --leaf given as "": pi's branch("") fails as no
// entry has that id, where an empty flag read as none gave the file's own
// leaf without a word.
func CheckLeafFlag(fs *flag.FlagSet, usage string) error {
	var err error
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "leaf" && f.Value.String() == "" {
			err = &UsageError{Msg: "context: --leaf is empty: give an entry's id, or leave --leaf out for the session's own leaf", Usage: usage}
		}
	})
	return err
}

// WriteFileContext writes the context of the session file path at leaf
// ("" for its own) under the rule set mode: the corpus JSON
// (session.WriteReport), or the human summary.
func WriteFileContext(stdout io.Writer, path, leafArg string, asJSON bool, mode session.RuleSet) (err error) {
	var leaf *string
	if leafArg != "" {
		leaf = &leafArg
	}
	// The file may be mapped (loadContextFile): a fault on it (the file cut
	// short by another process while it is read) is an error, not a crash.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer faultAsError(path, &err)
	// Not blocking: opening a named pipe would wait for a writer for
	// ever. A regular file reads as it would otherwise.
	file, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return fmt.Errorf("context: %w", err)
	}
	defer file.Close()
	st, err := file.Stat()
	if err != nil {
		return fmt.Errorf("context: %w", err)
	}
	if st.IsDir() {
		return fmt.Errorf("context: %s is a folder; want a session file", path)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("context: %s is %s, not a session file", path, NotRegular(st.Mode()))
	}
	if st.Size() <= wholeFileMax {
		// A one-shot command: the garbage of one scan of at most 32 MiB
		// is cheaper to leave than to collect (the collector would run
		// several times while the heap grows from nothing). The soft limit
		// still bounds it; both are put back for a caller in the same
		// process (tests).
		defer debug.SetGCPercent(debug.SetGCPercent(-1))
		if os.Getenv("GOMEMLIMIT") == "" {
			defer debug.SetMemoryLimit(debug.SetMemoryLimit(oneShotMemory + 4*st.Size()))
		}
		if st.Size() >= hugeHeapFrom {
			hugeHeap(int(2 * st.Size()))
		}
	}
	tree, f, unmap, err := loadContextFile(file, st.Size(), mode)
	if errors.Is(err, session.ErrNotSession) {
		// Said once, and why: "session: load: session: not a valid pi
		// session" named the package twice and the cause not at all.
		return fmt.Errorf("context: %s is not a pi session: the first line pi can read in it is not a session header ({\"type\":\"session\",...}), and pi refuses such a file too", path)
	}
	if err != nil {
		return fmt.Errorf("context: %s: %w", path, err)
	}
	defer unmap()
	var ix *session.Index
	if leaf == nil {
		ix, err = tree.Index()
	} else {
		ix, err = tree.IndexAt(leaf)
	}
	if err != nil {
		return fmt.Errorf("context: %s: %w", path, err)
	}
	if asJSON {
		bw := HoldBack(stdout)
		if err := session.WriteReport(bw, ix, f, mode); err != nil {
			return fmt.Errorf("context: %s: %w", path, err)
		}
		bw.WriteByte('\n')
		return bw.Flush()
	}
	leafID, _ := ix.LeafID.String()
	sum := &Summary{Leaf: leafID, Entries: len(ix.EntryIDs), Model: ix.Model, Thinking: ix.ThinkingLevel,
		Rules: ix.Rules.String(), RulesMode: mode.String()}
	err = ix.EachMessage(f, func(m json.RawMessage) error {
		sum.Add(m)
		return nil
	})
	if err != nil {
		return fmt.Errorf("context: %s: %w", path, err)
	}
	return sum.Print(stdout)
}

// NotRegular names what a file that is not a regular one is.
func NotRegular(m iofs.FileMode) string {
	switch {
	case m.IsDir():
		return "a folder"
	case m&iofs.ModeNamedPipe != 0:
		return "a pipe"
	case m&iofs.ModeDevice != 0:
		return "a device"
	case m&iofs.ModeSocket != 0:
		return "a socket"
	default:
		return "an irregular file"
	}
}

// faultAsError, deferred, turns a fault on an address (a mapped file cut
// short under SetPanicOnFault) into *err; a bug (a nil pointer, which
// carries no address) stays a crash.
func faultAsError(path string, err *error) {
	r := recover()
	if r == nil {
		return
	}
	if _, ok := r.(interface{ Addr() uintptr }); !ok {
		panic(r)
	}
	*err = fmt.Errorf("context: %s: the file changed while it was read (%v)", path, r)
}

// wholeFileMax is the largest session file `context FILE` reads into
// memory at once; larger ones are read line by line (session.ReadSpans)
// and their window's bodies read back from the file, so that a file of
// any size costs its lines' metadata. Below it one read and bodies that
// alias it save a read and a copy per body.
const wholeFileMax = 32 << 20

// loadContextFile reads the session file of size bytes under the rule
// set mode: mapped whole when it is at most wholeFileMax, else line by
// line, its window's bodies read back from it. unmap releases the mapping
// once the bodies are written (a no-op when there is none); until then
// the source's bodies alias it.
func loadContextFile(file *os.File, size int64, mode session.RuleSet) (tree *session.Tree, src session.BodySource, unmap func(), err error) {
	if size == 0 {
		// pi writes a fresh header into an empty file and opens it as a
		// new session, of no entries: its context is empty, as a header
		// alone gives it (this said "session: empty file", where pi
		// gives the empty context: a files probe, 2026-12-07).
		f, err := session.LoadWith([]byte(`{"type":"session","version":3,"id":""}`), session.LoadOptions{Rules: mode, NoStats: true})
		if err != nil {
			return nil, nil, nil, err
		}
		return f.Tree, f, func() {}, nil
	}
	if size > wholeFileMax {
		f, err := session.ReadSpans(file, size, mode)
		if err != nil {
			return nil, nil, nil, err
		}
		return f.Tree, f, func() {}, nil
	}
	// Mapped rather than read: no copy of the file, and its pages come
	// from the page cache a batch per fault instead of one fresh page of
	// heap at a time.
	data, err := unix.Mmap(int(file.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_PRIVATE)
	if err != nil {
		data = make([]byte, size)
		if _, err := io.ReadFull(file, data); err != nil {
			return nil, nil, nil, err
		}
		unmap = func() {}
	} else {
		unix.Madvise(data, unix.MADV_WILLNEED) // read ahead: the scan takes it all, in order
		unmap = func() { unix.Munmap(data) }
	}
	// The catalog's usage totals are no part of a context: not kept.
	f, err := session.LoadWith(data, session.LoadOptions{Rules: mode, NoStats: true})
	if err != nil {
		unmap()
		return nil, nil, nil, err
	}
	return f.Tree, f, unmap, nil
}

// heldBack is what a context's JSON output holds back: a failure prints
// nothing unless the context is larger.
const heldBack = 1 << 20

// HoldBack is the writer of a context's JSON to stdout: it holds back up to
// heldBack bytes, and writes them to a pipe as wide (widenPipe).
func HoldBack(stdout io.Writer) *bufio.Writer {
	widenPipe(stdout)
	return bufio.NewWriterSize(stdout, heldBack)
}

// hugeHeapFrom is the smallest file whose one shot gets its heap in huge
// pages (hugeHeap): the heap of a smaller one is a few hundred pages, for
// which a collection and a 2 MiB page cost as much as they save.
const hugeHeapFrom = 1 << 20

// oneShotMemory is the Go soft limit of `context FILE` besides four
// times the file it holds: the runtime, the tree and the output buffer.
const oneShotMemory = 64 << 20
