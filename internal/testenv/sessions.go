package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Header is a pi v3 session header line for session sid.
func Header(sid string) string { return HeaderAt(sid, "/home/u/p", "2026-11-29T23:08:16.463Z") }

// HeaderAt is the header of session sid begun in cwd at ts.
func HeaderAt(sid, cwd, ts string) string {
	return fmt.Sprintf(`{"type":"session","version":3,"id":%q,"timestamp":%q,"cwd":%q}`, sid, ts, cwd)
}

// Entry is a pi user-message entry line; parent "" makes it a root.
func Entry(id, parent, text string) string {
	return EntryAt(id, parent, "2026-11-29T23:08:17.000Z", text)
}

// EntryAt is a user-message entry written at ts.
func EntryAt(id, parent, ts, text string) string {
	p := "null"
	if parent != "" {
		p = fmt.Sprintf("%q", parent)
	}
	return fmt.Sprintf(`{"type":"message","id":%q,"parentId":%s,"timestamp":%q,"message":{"role":"user","content":%q,"timestamp":1}}`, id, p, ts, text)
}

// WriteFile writes a private file, creating its folders (0700).
func WriteFile(tb testing.TB, path string, data []byte) {
	tb.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		tb.Fatal(err)
	}
}

// AppendFile appends data with one O_APPEND write, as pi appends.
func AppendFile(tb testing.TB, path, data string) {
	tb.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(data); err != nil {
		tb.Fatal(err)
	}
}
