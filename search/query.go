package search

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits of a query (a local client is untrusted).
const (
	MaxQueryBytes = 1024
	MaxClauses    = 16
	// MaxWords bounds the words of a query's terms and exclusions
	// together, as the index splits them (a word with dashes, dots or
	// underscores is its parts): bleve matches a phrase without looking at
	// the search's deadline, and a probe's one word of 512 parts took 40 s
	// of CPU (docs/SEARCH.md).
	MaxWords  = 32
	maxFilter = 256 // bytes of one filter's value
)

// Query is a parsed query: every word and phrase must be in an entry's
// text, none of the excluded ones may be, and the filters match exactly.
type Query struct {
	Terms []string // words and phrases (a phrase is its words in order)
	Not   []string
	// Filters; empty matches any.
	Session, Node, Type, Role string
}

// ErrQuery is the error of a query that cannot be run; the message says
// why.
var ErrQuery = errors.New("search: bad query")

func badQuery(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrQuery, fmt.Sprintf(format, args...))
}

// ParseQuery parses q: words separated by spaces, "quoted phrases", a
// leading - to exclude a word or phrase, and the filters session:ID,
// node:ID, type:TYPE and role:ROLE. There are no operators, wildcards or
// regular expressions: every character but quotes, a leading - and a
// filter's colon is text.
func ParseQuery(q string) (Query, error) {
	out, err := parse(q)
	if err != nil {
		return out, err
	}
	return out, out.check()
}

// check refuses a query with nothing to search for.
func (q *Query) check() error {
	if len(q.Terms) == 0 && q.Session == "" && q.Node == "" && q.Type == "" && q.Role == "" {
		return badQuery("nothing to search for (give a word, a \"phrase\" or a filter)")
	}
	return nil
}

func parse(q string) (Query, error) {
	var out Query
	if len(q) > MaxQueryBytes {
		return out, badQuery("longer than %d bytes", MaxQueryBytes)
	}
	if !utf8.ValidString(q) {
		return out, badQuery("not valid UTF-8")
	}
	clauses := 0
	for i := 0; i < len(q); {
		r, n := utf8.DecodeRuneInString(q[i:])
		if unicode.IsSpace(r) {
			i += n
			continue
		}
		neg := false
		if q[i] == '-' && i+1 < len(q) && !isSpaceByte(q[i+1]) {
			neg = true
			i++
		}
		var text string
		if q[i] == '"' {
			end := strings.IndexByte(q[i+1:], '"')
			if end < 0 {
				return out, badQuery("unclosed quote")
			}
			text = q[i+1 : i+1+end]
			i += end + 2
		} else {
			end := strings.IndexFunc(q[i:], unicode.IsSpace)
			if end < 0 {
				end = len(q) - i
			}
			text = q[i : i+end]
			i += end
			if !neg {
				if ok, err := out.filter(text); err != nil {
					return out, err
				} else if ok {
					continue
				}
			}
		}
		text = strings.TrimSpace(text)
		if !hasWordChar(text) {
			continue // punctuation alone matches nothing indexed
		}
		clauses++
		if clauses > MaxClauses {
			return out, badQuery("more than %d words or phrases", MaxClauses)
		}
		if neg {
			out.Not = append(out.Not, text)
		} else {
			out.Terms = append(out.Terms, text)
		}
	}
	return out, nil
}

// filter takes a session:, node:, type: or role: word.
func (q *Query) filter(w string) (bool, error) {
	name, val, ok := strings.Cut(w, ":")
	if !ok {
		return false, nil
	}
	var dst *string
	switch name {
	case "session":
		dst = &q.Session
	case "node":
		dst = &q.Node
	case "type":
		dst = &q.Type
	case "role":
		dst = &q.Role
	default:
		return false, nil // a word with a colon (a URL, "key:value")
	}
	if val == "" || len(val) > maxFilter {
		return false, badQuery("%s: needs a value of 1 to %d bytes", name, maxFilter)
	}
	if *dst != "" && *dst != val {
		return false, badQuery("%s: given twice", name)
	}
	*dst = val
	return true, nil
}

func isSpaceByte(b byte) bool { return b == ' ' || b == '\t' || b == '\n' || b == '\r' }

func hasWordChar(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsNumber(r) }) >= 0
}
