package session

import (
	"bytes"
	"encoding/binary"
	"errors"
	"unicode/utf8"
)

// A single-pass JSON scanner for everything this package reads from a
// line: it walks an object's members and hands out each value as the raw
// bytes of the input, so a body is validated and split in one pass without
// building maps or copying values. It accepts exactly what JSON.parse
// accepts (RFC 8259 grammar) with no nesting limit: pi reads a line nested a
// million levels deep, and encoding/json, which stops at 10000, would call
// it malformed. Values are yielded without surrounding white space and keys
// unescaped (jsstring.go); a duplicate key is yielded again, so the caller's
// last assignment wins, as in JSON.parse.

var errSyntax = errors.New("invalid JSON")

// eachMember calls fn for every member of the JSON object raw, in order.
// The key is only valid during the call; val aliases raw (capped, so an
// append to it cannot write into raw). It fails when raw is not one
// valid JSON object (white space around it allowed).
func eachMember(raw []byte, fn func(key []byte, val []byte)) error {
	i := skipWS(raw, 0)
	e, err := scanMembers(raw, i, func(key []byte, at int) (int, error) {
		ve, err := skipValue(raw, at)
		if err == nil {
			fn(key, raw[at:ve:ve])
		}
		return ve, err
	})
	if err != nil {
		return err
	}
	return end(raw, e)
}

// validJSON is JSON.parse's verdict on raw: one JSON value, white space
// around it allowed, nested as deep as it likes.
func validJSON(raw []byte) bool {
	e, err := skipValue(raw, skipWS(raw, 0))
	return err == nil && end(raw, e) == nil
}

// scanMembers scans the object that starts at b[i] and returns the offset
// past it. For each member it calls fn with the key and the offset of the
// value, and fn returns the offset past the value: it skips the value
// itself, so it can also descend into it.
func scanMembers(b []byte, i int, fn func(key []byte, at int) (int, error)) (int, error) {
	if i >= len(b) || b[i] != '{' {
		return 0, errNotObject
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return 0, errSyntax
		}
		ke, esc, err := skipString(b, i)
		if err != nil {
			return 0, err
		}
		key := b[i+1 : ke-1]
		if esc || !asciiKey(key) && !utf8.Valid(key) {
			s, ok := jsString(b[i:ke])
			if !ok {
				return 0, errSyntax
			}
			key = []byte(s)
		}
		i = skipWS(b, ke)
		if i >= len(b) || b[i] != ':' {
			return 0, errSyntax
		}
		i = skipWS(b, i+1)
		if i >= len(b) {
			return 0, errSyntax
		}
		ve, err := fn(key, i)
		if err != nil {
			return 0, err
		}
		i = skipWS(b, ve)
		if i >= len(b) {
			return 0, errSyntax
		}
		switch b[i] {
		case ',':
			i = skipWS(b, i+1)
		case '}':
			return i + 1, nil
		default:
			return 0, errSyntax
		}
	}
}

// asciiKey reports whether a key is ASCII, as nearly every key is: the
// check is inline, where utf8.Valid is a call per key.
func asciiKey(k []byte) bool {
	for _, c := range k {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// eachElement calls fn for every element of the JSON array raw, in order.
func eachElement(raw []byte, fn func(val []byte)) error {
	i := skipWS(raw, 0)
	if i == len(raw) || raw[i] != '[' {
		return errSyntax
	}
	i = skipWS(raw, i+1)
	if i < len(raw) && raw[i] == ']' {
		return end(raw, i+1)
	}
	for {
		ve, err := skipValue(raw, i)
		if err != nil {
			return err
		}
		fn(raw[i:ve:ve])
		i = skipWS(raw, ve)
		if i == len(raw) {
			return errSyntax
		}
		switch raw[i] {
		case ',':
			i = skipWS(raw, i+1)
		case ']':
			return end(raw, i+1)
		default:
			return errSyntax
		}
	}
}

// end checks that only white space follows offset i.
func end(raw []byte, i int) error {
	if skipWS(raw, i) != len(raw) {
		return errSyntax
	}
	return nil
}

func skipWS(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\r', '\n':
			i++
		default:
			return i
		}
	}
	return i
}

// skipValue returns the offset just past the value that starts at b[i]
// (no white space before it). Containers are walked with an explicit stack
// of their kinds, one byte a level, so depth costs no Go stack.
func skipValue(b []byte, i int) (int, error) {
	var buf [64]byte
	stack := buf[:0]
	for {
		// A value starts at b[i].
		if i >= len(b) {
			return 0, errSyntax
		}
		var err error
		switch c := b[i]; {
		case c == '"':
			i, _, err = skipString(b, i)
		case c == '{':
			i = skipWS(b, i+1)
			if i < len(b) && b[i] == '}' {
				i++
				break
			}
			stack = append(stack, '{')
			if i, err = skipKey(b, i); err != nil {
				return 0, err
			}
			continue
		case c == '[':
			i = skipWS(b, i+1)
			if i < len(b) && b[i] == ']' {
				i++
				break
			}
			stack = append(stack, '[')
			continue
		case c == 't':
			i, err = skipWord(b, i, "true")
		case c == 'f':
			i, err = skipWord(b, i, "false")
		case c == 'n':
			i, err = skipWord(b, i, "null")
		case c == '-' || c >= '0' && c <= '9':
			i, err = skipNumber(b, i)
		default:
			return 0, errSyntax
		}
		if err != nil {
			return 0, err
		}
		// After a value: close what ends here, or move to the next one.
	closing:
		for {
			if len(stack) == 0 {
				return i, nil
			}
			i = skipWS(b, i)
			if i >= len(b) {
				return 0, errSyntax
			}
			top := stack[len(stack)-1]
			switch b[i] {
			case ',':
				i = skipWS(b, i+1)
				if top == '{' {
					if i, err = skipKey(b, i); err != nil {
						return 0, err
					}
				}
				break closing
			case '}', ']':
				if (b[i] == '}') != (top == '{') {
					return 0, errSyntax
				}
				i++
				stack = stack[:len(stack)-1]
			default:
				return 0, errSyntax
			}
		}
	}
}

// skipKey skips `"key" :` and the white space after it, at b[i].
func skipKey(b []byte, i int) (int, error) {
	if i >= len(b) || b[i] != '"' {
		return 0, errSyntax
	}
	e, _, err := skipString(b, i)
	if err != nil {
		return 0, err
	}
	i = skipWS(b, e)
	if i >= len(b) || b[i] != ':' {
		return 0, errSyntax
	}
	return skipWS(b, i+1), nil
}

// plain marks the bytes a string can hold as they are: not '"', not '\\',
// not a control character.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// skipString skips the string starting at b[i] (a '"'); esc reports a
// backslash in it.
func skipString(b []byte, i int) (end int, esc bool, err error) {
	// Keys and ids are short: byte by byte until a string proves long.
	i++
	for stop := min(len(b), i+16); i < stop && plain[b[i]]; i++ {
	}
	if i < len(b) && b[i] == '"' {
		return i + 1, false, nil
	}
	// A long string, or one that holds an escape or a control byte: the
	// quote that may end it and the next backslash are found by
	// bytes.IndexByte (vector instructions), the bytes between them
	// checked for control bytes eight at a time. quote is reused until an
	// escaped quote is passed, so each byte is searched once: linear in
	// the string however many escapes it holds.
	quote := -1
	for {
		if quote < i {
			j := bytes.IndexByte(b[i:], '"')
			if j < 0 {
				return 0, false, errSyntax
			}
			quote = i + j
		}
		stop := quote
		if k := bytes.IndexByte(b[i:quote], '\\'); k >= 0 {
			stop = i + k
		}
		if hasControl(b[i:stop]) {
			return 0, false, errSyntax
		}
		if stop == quote {
			return quote + 1, esc, nil
		}
		// A backslash at stop.
		esc = true
		i = stop + 1
		if i >= len(b) {
			return 0, false, errSyntax
		}
		switch b[i] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		case 'u':
			if i+4 >= len(b) {
				return 0, false, errSyntax
			}
			for _, h := range b[i+1 : i+5] {
				if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
					return 0, false, errSyntax
				}
			}
			i += 4
		default:
			return 0, false, errSyntax
		}
		i++
	}
}

// hasControl reports a byte below 0x20 in s, which a JSON string may not
// hold raw; eight bytes at a time.
func hasControl(s []byte) bool {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	i := 0
	for ; i+8 <= len(s); i += 8 {
		x := binary.LittleEndian.Uint64(s[i:])
		// The high bit of a byte below 0x20 is set here (borrows only
		// mark bytes above a real one).
		if (x-lo*0x20)&^x&hi != 0 {
			return true
		}
	}
	for ; i < len(s); i++ {
		if s[i] < 0x20 {
			return true
		}
	}
	return false
}

func skipWord(b []byte, i int, w string) (int, error) {
	if !bytes.HasPrefix(b[i:], []byte(w)) {
		return 0, errSyntax
	}
	return i + len(w), nil
}

// skipNumber skips -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?.
func skipNumber(b []byte, i int) (int, error) {
	digits := func(i int) int {
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i
	}
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(i)
	default:
		return 0, errSyntax
	}
	if i < len(b) && b[i] == '.' {
		j := digits(i + 1)
		if j == i+1 {
			return 0, errSyntax
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(i)
		if j == i {
			return 0, errSyntax
		}
		i = j
	}
	return i, nil
}
