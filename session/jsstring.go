package session

import (
	"unicode/utf16"
	"unicode/utf8"
)

// JavaScript strings are UTF-16 and may hold lone surrogates: JSON.parse
// turns "\ud800" into a one-unit string that differs from "\udc00" and
// from "\ufffd". encoding/json replaces all three by U+FFFD, so two ids pi
// keeps apart would meet in Go. Strings decoded here are WTF-8 instead: UTF-8
// in which a lone surrogate keeps its own three-byte sequence (ED A0 80 …
// ED BF BF). Those bytes never come from a file (invalid UTF-8 is replaced
// before parsing, as node's decoder does), so every JavaScript string has
// exactly one WTF-8 form and equal strings are equal Go strings.

// jsString decodes the JSON string literal raw (quotes included) as
// JSON.parse does, into WTF-8. ok is false when raw is not a string.
func jsString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	body := raw[1 : len(raw)-1]
	plainBody := utf8.Valid(body)
	for _, c := range body {
		if c == '\\' || c == '"' || c < 0x20 {
			plainBody = false
			break
		}
	}
	if plainBody {
		return string(body), true
	}
	if e, _, err := skipString(raw, 0); err != nil || e != len(raw) {
		return "", false
	}
	body = ToValidUTF8(body)
	out := make([]byte, 0, len(body))
	for i := 0; i < len(body); i++ {
		c := body[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		i++
		switch body[i] {
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			u := hex4(body[i+1 : i+5])
			i += 4
			// A high surrogate followed by an escaped low one is a pair;
			// the string was validated, so an escape after it is whole.
			if u >= 0xD800 && u < 0xDC00 && i+6 < len(body) && body[i+1] == '\\' && body[i+2] == 'u' {
				if lo := hex4(body[i+3 : i+7]); lo >= 0xDC00 && lo <= 0xDFFF {
					out = utf8.AppendRune(out, utf16.DecodeRune(rune(u), rune(lo)))
					i += 6
					continue
				}
			}
			out = appendUnit(out, u)
		default: // '"', '\\', '/'
			out = append(out, body[i])
		}
	}
	return string(out), true
}

func hex4(h []byte) uint16 {
	var u uint16
	for _, c := range h {
		u <<= 4
		switch {
		case c >= '0' && c <= '9':
			u |= uint16(c - '0')
		case c >= 'a' && c <= 'f':
			u |= uint16(c-'a') + 10
		default:
			u |= uint16(c-'A') + 10
		}
	}
	return u
}

// appendUnit appends one UTF-16 code unit that is not part of a pair:
// a character of the BMP, or a lone surrogate in its WTF-8 form.
func appendUnit(out []byte, u uint16) []byte {
	if !utf16.IsSurrogate(rune(u)) {
		return utf8.AppendRune(out, rune(u))
	}
	return append(out, 0xE0|byte(u>>12), 0x80|byte(u>>6)&0x3F, 0x80|byte(u)&0x3F)
}

// nextUnit decodes the character or lone surrogate at s[i]: the code
// point (a surrogate for a lone one) and its length. Bytes that are
// neither (they never come from jsString) read as U+FFFD.
func nextUnit(s string, i int) (rune, int) {
	c := s[i]
	if c < utf8.RuneSelf {
		return rune(c), 1
	}
	if c == 0xED && i+2 < len(s) && s[i+1] >= 0xA0 && s[i+1] <= 0xBF && s[i+2] >= 0x80 && s[i+2] <= 0xBF {
		return rune(c&0x0F)<<12 | rune(s[i+1]&0x3F)<<6 | rune(s[i+2]&0x3F), 3
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	return r, n
}

// appendJSON appends s (WTF-8) as JSON.stringify writes a string: `"` and
// `\` escaped, control characters as \b \f \n \r \t or \u00XX, lone
// surrogates as \uXXXX, everything else as it is (no HTML escaping).
func appendJSON(out []byte, s string) []byte {
	const hexdigits = "0123456789abcdef"
	out = append(out, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			out = append(out, c)
			i++
			continue
		}
		r, n := nextUnit(s, i)
		switch {
		case r == '"' || r == '\\':
			out = append(out, '\\', byte(r))
		case r == '\b':
			out = append(out, '\\', 'b')
		case r == '\f':
			out = append(out, '\\', 'f')
		case r == '\n':
			out = append(out, '\\', 'n')
		case r == '\r':
			out = append(out, '\\', 'r')
		case r == '\t':
			out = append(out, '\\', 't')
		case r < 0x20 || utf16.IsSurrogate(r):
			out = append(out, '\\', 'u', hexdigits[r>>12], hexdigits[r>>8&0xF], hexdigits[r>>4&0xF], hexdigits[r&0xF])
		default:
			out = append(out, s[i:i+n]...)
		}
		i += n
	}
	return append(out, '"')
}

// jsonQuote is appendJSON into a new slice.
func jsonQuote(s string) []byte { return appendJSON(nil, s) }

// utf16Less orders two WTF-8 strings as JavaScript compares strings: by
// UTF-16 code units.
func utf16Less(a, b string) bool {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		ra, na := nextUnit(a, i)
		rb, nb := nextUnit(b, j)
		if ra != rb {
			return unitKey(ra) < unitKey(rb)
		}
		i, j = i+na, j+nb
	}
	return len(a)-i < len(b)-j
}

// unitKey maps a code point to a value whose order is that of its first
// UTF-16 code unit, then the second.
func unitKey(r rune) uint32 {
	if r >= 0x10000 {
		hi, lo := utf16.EncodeRune(r)
		return uint32(hi)<<16 | uint32(lo)
	}
	return uint32(r) << 16
}

// utf8Safe replaces each lone surrogate of a WTF-8 string by U+FFFD, as
// node does when it encodes a JavaScript string as UTF-8.
func utf8Safe(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); {
		r, n := nextUnit(s, i)
		if utf16.IsSurrogate(r) {
			r = utf8.RuneError
		}
		out = utf8.AppendRune(out, r)
		i += n
	}
	return string(out)
}

// ToWellFormed is String.prototype.toWellFormed for a WTF-8 string from
// this package (Tree.Name, Tree.SessionID, an id): each lone surrogate
// becomes U+FFFD, as when node writes the string out as UTF-8. The result
// is valid UTF-8.
func ToWellFormed(s string) string { return utf8Safe(s) }

// JSString decodes a JSON string literal (quotes included) as JSON.parse
// does, into WTF-8: for readers of lines outside this package, so that an
// id they read equals the one ParseLine reads.
func JSString(raw []byte) (string, bool) { return jsString(raw) }
