package session

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"time"
)

// dateValue is `new Date(v).getTime()` for a raw JSON value: pi turns entry
// timestamps into milliseconds this way, and sorts siblings by it. NaN
// stands for an invalid date (null in pi's JSON output).
func dateValue(raw json.RawMessage) float64 {
	raw = trimWS(raw)
	if len(raw) == 0 {
		return math.NaN() // new Date(undefined)
	}
	switch raw[0] {
	case '"':
		if len(raw) >= 2 && raw[len(raw)-1] == '"' && plainASCII(raw[1:len(raw)-1]) {
			// What jsonString would return, without a copy on the heap
			// (parseDate keeps nothing of it): every entry has one.
			return parseDate(string(raw[1 : len(raw)-1]))
		}
		s, _ := jsonString(raw)
		return parseDate(s)
	case '[':
		return parseDate(jsArrayString(raw)) // ToPrimitive joins arrays
	case '{':
		return math.NaN() // "[object Object]"
	}
	return timeClip(jsToNumber(raw))
}

// plainASCII reports printable ASCII with no backslash or quote: a JSON
// string body that decodes to itself.
func plainASCII(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c >= 0x80 || c == '\\' || c == '"' {
			return false
		}
	}
	return true
}

// piJoinDepth is the deepest chain of directly nested arrays that
// new Date(v) turns into a string in pi: ToPrimitive joins arrays
// recursively, and node 20's default stack holds 3162 levels of it in
// pi's getTree and buildSessionContext (testdata/hostile); deeper, pi
// throws RangeError.
const piJoinDepth = 3162

// ErrDate means pi throws converting an entry's timestamp: a RangeError
// for an array timestamp nested deeper than piJoinDepth, a TypeError for
// an object with an own toString member (toPrimitiveThrows).
var ErrDate = errors.New("session: timestamp cannot be converted to a date")

// dateThrows reports whether pi's new Date(raw) throws (see ErrDate).
func dateThrows(raw json.RawMessage) bool {
	return arrayChainDepth(raw) > piJoinDepth || toPrimitiveThrows(raw)
}

// arrayChainDepth is the length of the longest chain of arrays directly
// inside one another from the top of raw (an object ends a chain: its
// string is "[object Object]", no recursion).
func arrayChainDepth(raw []byte) int {
	raw = trimWS(raw)
	if len(raw) == 0 || raw[0] != '[' {
		return 0
	}
	depth, chain, deepest := 0, 0, 0
	for i := 0; i < len(raw); i++ {
		switch raw[i] {
		case '[':
			if chain == depth {
				chain++
				deepest = max(deepest, chain)
			}
			depth++
		case '{':
			depth++
		case '}', ']':
			if chain == depth {
				chain--
			}
			depth--
		case '"':
			e, _, err := skipString(raw, i)
			if err != nil {
				return deepest
			}
			i = e - 1
		}
	}
	return deepest
}

// timeClip is ECMAScript TimeClip.
func timeClip(f float64) float64 {
	if math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) > 8.64e15 {
		return math.NaN()
	}
	return math.Trunc(f) + 0
}

// parseDate is Date.parse as node's V8 computes it. The common case, the
// ECMAScript date-time string format (YYYY[-MM[-DD]][THH:mm[:ss[.fff…]]]
// [Z|±HH:mm], extended ±YYYYYY years, T and Z in either case, days up to
// 31 in every month, which V8 rolls 2025-02-30 over into March, and 24:00
// as the end of a day), is read here directly; any other string goes to
// legacyParseDate, V8's whole parser with its legacy fallback ("1" is
// 1 January 2001, "Jan 2 2020 10:00 GMT+2", "2020/1/2", …). A date-time
// without zone is local time in JavaScript; both read it as UTC, the zone
// pi's oracle and the differential harness run pi in (TZ=UTC).
func parseDate(s string) float64 {
	p := dateParser{s: s}
	if v, ok := p.parse(); ok && p.i == len(s) {
		return timeClip(v)
	}
	return legacyParseDate(s)
}

type dateParser struct {
	s string
	i int
}

func (p *dateParser) digits(n int) (int, bool) {
	if p.i+n > len(p.s) {
		return 0, false
	}
	v := 0
	for k := 0; k < n; k++ {
		c := p.s[p.i+k]
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int(c-'0')
	}
	p.i += n
	return v, true
}

func (p *dateParser) peek(c byte) bool {
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *dateParser) parse() (float64, bool) {
	var year int
	var ok bool
	switch {
	case p.peek('+'):
		year, ok = p.digits(6)
	case p.peek('-'):
		year, ok = p.digits(6)
		if year == 0 {
			return 0, false // -000000 is not allowed
		}
		year = -year
	default:
		year, ok = p.digits(4)
	}
	if !ok {
		return 0, false
	}
	month, day := 1, 1
	if p.peek('-') {
		if month, ok = p.digits(2); !ok || month < 1 || month > 12 {
			return 0, false
		}
		if p.peek('-') {
			if day, ok = p.digits(2); !ok || day < 1 || day > 31 {
				return 0, false
			}
		}
	}
	var hour, min, sec, ms int
	offset := 0
	if p.i < len(p.s) && (p.s[p.i] == 'T' || p.s[p.i] == 't') {
		p.i++
		if hour, ok = p.digits(2); !ok || !p.peek(':') {
			return 0, false
		}
		if min, ok = p.digits(2); !ok {
			return 0, false
		}
		if p.peek(':') {
			if sec, ok = p.digits(2); !ok {
				return 0, false
			}
			if p.peek('.') {
				start := p.i
				for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
					p.i++
				}
				frac := p.s[start:p.i]
				if frac == "" || len(frac) > 9 || hour == 24 {
					// V8 reads the first nine digits after leading
					// zeros, and any non-zero digit spoils 24:00:00.
					// Rare enough to leave to legacyParseDate.
					return 0, false
				}
				frac = (frac + "00")[:3]
				ms, _ = strconv.Atoi(frac)
			}
		}
		if hour > 24 || min > 59 || sec > 59 || (hour == 24 && (min|sec|ms) != 0) {
			return 0, false
		}
		switch {
		case p.peek('Z'), p.peek('z'):
		case p.i < len(p.s) && (p.s[p.i] == '+' || p.s[p.i] == '-'):
			sign := 1
			if p.s[p.i] == '-' {
				sign = -1
			}
			p.i++
			oh, ok1 := p.digits(2)
			if !ok1 || !p.peek(':') {
				return 0, false
			}
			om, ok2 := p.digits(2)
			if !ok2 || oh > 23 || om > 59 {
				return 0, false
			}
			offset = sign * (oh*60 + om)
		}
	}
	days := daysFromCivil(year, month) + int64(day-1)
	msv := float64(days)*86400000 + float64(hour)*3600000 + float64(min)*60000 + float64(sec)*1000 + float64(ms)
	return msv - float64(offset)*60000, true
}

// daysFromCivil counts days from 1970-01-01 to the first of month/year
// (proleptic Gregorian).
func daysFromCivil(y, m int) int64 {
	yy := int64(y)
	if m <= 2 {
		yy--
	}
	era := yy / 400
	if yy < 0 && yy%400 != 0 {
		era--
	}
	yoe := yy - era*400
	mp := int64((m + 9) % 12)
	doy := (153*mp + 2) / 5
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

// isoString is Date.prototype.toISOString for a valid time value.
func isoString(ms float64) string {
	t := time.UnixMilli(int64(ms)).UTC()
	y := t.Year()
	var ys string
	switch {
	case y >= 0 && y <= 9999:
		ys = pad(y, 4)
	case y < 0:
		ys = "-" + pad(-y, 6)
	default:
		ys = "+" + pad(y, 6)
	}
	return ys + t.Format("-01-02T15:04:05.000Z")
}

func pad(v, n int) string {
	s := strconv.Itoa(v)
	if len(s) < n {
		s = strings.Repeat("0", n-len(s)) + s
	}
	return s
}
