package session

import (
	"runtime/debug"
	"sync"
)

// helpers carries a caller's fault handling to the goroutines that work
// for it (loadPipelined's parsers, writeMessagesOnTwo's renderer). Their
// input may be a mapped file (`context FILE` maps one), which faults when
// another process cuts the file short; the caller asked for such a fault
// to panic (debug.SetPanicOnFault) so that it can report it. A goroutine
// does not inherit that setting, and a panic in it cannot be recovered by
// the caller: a helper takes the caller's setting, and hands a fault back
// for the caller to panic with on its own goroutine (rethrow). Any other
// panic is a bug, and crashes where it happened.
type helpers struct {
	onFault bool
	once    sync.Once
	fault   any
	faulted chan struct{} // closed once a helper faulted
}

// newHelpers reads the calling goroutine's setting (setting it back).
func newHelpers() *helpers {
	onFault := debug.SetPanicOnFault(false)
	debug.SetPanicOnFault(onFault)
	return &helpers{onFault: onFault, faulted: make(chan struct{})}
}

// run is a helper's body: fn under the caller's setting, its fault kept.
func (h *helpers) run(fn func()) {
	debug.SetPanicOnFault(h.onFault)
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		if _, ok := r.(interface{ Addr() uintptr }); !ok {
			panic(r)
		}
		h.once.Do(func() {
			h.fault = r
			close(h.faulted)
		})
	}()
	fn()
}

// rethrow panics, on the caller's goroutine, with the fault a helper met.
// Call it once faulted is closed.
func (h *helpers) rethrow() { panic(h.fault) }
