package codepages

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// region is one mapping of the executable that is never written.
type region struct{ start, end uintptr }

// readOnly lists the mappings of the running executable that are not
// writable and hold no page of their own (code, read-only data), from
// /proc/self/smaps, matched by the executable's device and inode. A
// mapping with anonymous pages was written once (a position-independent
// build's relocated data, made read-only after): dropping those pages
// would lose the writes, so it is left alone.
func readOnly() ([]region, error) {
	exe, err := os.Stat("/proc/self/exe")
	if err != nil {
		return nil, err
	}
	st, ok := exe.Sys().(*syscall.Stat_t)
	if !ok {
		return nil, fmt.Errorf("no inode for /proc/self/exe")
	}
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return nil, err
	}
	var out []region
	last := false // the fields being read are those of out's last region
	sc := bufio.NewScanner(bytes.NewReader(smaps))
	for sc.Scan() {
		line := sc.Bytes()
		// A field of the mapping above ("Anonymous:    4 kB") has no
		// space before its colon; a mapping's line does.
		if k, v, ok := bytes.Cut(line, []byte(":")); ok && !bytes.Contains(k, []byte(" ")) {
			if last && string(k) == "Anonymous" && string(bytes.TrimSpace(v)) != "0 kB" {
				out, last = out[:len(out)-1], false
			}
			continue
		}
		var r region
		if r, last = ours(line, st); last {
			out = append(out, r)
		}
	}
	return out, sc.Err()
}

// ours parses a mapping's header line of smaps (start-end perms offset
// dev inode path) and reports whether it maps the file st read-only.
func ours(line []byte, st *syscall.Stat_t) (region, bool) {
	f := bytes.Fields(line)
	if len(f) < 6 || len(f[1]) != 4 || f[1][1] == 'w' || f[1][3] != 'p' {
		return region{}, false
	}
	if ino, err := strconv.ParseUint(string(f[4]), 10, 64); err != nil || ino != st.Ino {
		return region{}, false
	}
	ma, mi, ok := hexPair(f[3], ':', 32)
	if !ok || unix.Mkdev(uint32(ma), uint32(mi)) != uint64(st.Dev) {
		return region{}, false
	}
	start, end, ok := hexPair(f[0], '-', 64)
	if !ok || end <= start {
		return region{}, false
	}
	return region{uintptr(start), uintptr(end)}, true
}

// hexPair parses two hexadecimal numbers of at most bits bits joined by
// sep (a mapping's "start-end", its device's "major:minor").
func hexPair(b []byte, sep byte, bits int) (x, y uint64, ok bool) {
	l, r, ok := bytes.Cut(b, []byte{sep})
	if !ok {
		return 0, 0, false
	}
	x, err1 := strconv.ParseUint(string(l), 16, bits)
	y, err2 := strconv.ParseUint(string(r), 16, bits)
	return x, y, err1 == nil && err2 == nil
}

// Drop lets go of the executable's code and read-only pages that the
// process holds mapped; what runs next is mapped again, from the page
// cache. It returns the bytes of the regions it dropped. (Mapping them a
// page at a time from then on, MADV_RANDOM, kept 1 MB fewer with 10,000
// sessions, and would have read code back 4 KiB at a time on a machine
// whose cache had evicted it: docs/PERFORMANCE.md.)
func Drop() (int64, error) {
	rs, err := readOnly()
	if err != nil {
		return 0, fmt.Errorf("codepages: %w", err)
	}
	var n int64
	for _, r := range rs {
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, r.start, r.end-r.start, unix.MADV_DONTNEED); errno != 0 {
			return n, fmt.Errorf("codepages: madvise: %w", errno)
		}
		n += int64(r.end - r.start)
	}
	return n, nil
}
