package session

import (
	"math"
	"unicode/utf8"
)

// This file models what node's Date.parse (V8, src/date/dateparser*) does
// with a string that is not in the ECMAScript date-time format, e.g.
// new Date("1") (1 January 2001) or new Date([1]), which is the same.
// pi converts entry timestamps with new Date(v), so any string a session
// file holds gives a date or NaN exactly as V8 decides.
//
// V8 reads the string as tokens (numbers, words, the symbols : - + . ),
// white space, parenthesised comments and single other characters),
// follows the ES grammar as far as it goes, and hands the token it stopped
// at to its legacy grammar, which keeps what the ES part already read.
// Numbers fill a time (after ':' or '.') or a day (up to three numbers,
// ordered by legacy heuristics); the first three letters of a word name a
// month, and a few words are zones, am/pm or the T separator. A date with
// neither zone nor offset is local time in JavaScript: like parseDate's ES
// path, it is read as UTC, the zone pi's oracle and the differential
// harness run pi in (TZ=UTC). Checked against node 20 (V8 11.3) by
// TestParseDateNode and testdata/jsdate.
//
// Strings are bytes of UTF-8 here and UTF-16 code units in V8; the grammar
// tells ASCII characters apart, and of the others only JS white space
// (U+00A0, U+FEFF, the Zs spaces), which separates; every other non-ASCII
// character (every byte of one) is part of a word either way, so lengths
// in bytes serve. A NUL character ends the input, as it does for V8's
// reader.

// dateNone is V8's missing value in its composers (kMaxInt).
const dateNone = math.MaxInt32

// dateMaxDigits is how many digits of a number count, after its leading
// zeros; more are read and ignored.
const dateMaxDigits = 9

type dateTokKind int8

const (
	dtInvalid dateTokKind = iota // the ES part found a terminal error
	dtUnknown                    // another character, or a (comment)
	dtSpace
	dtNumber
	dtSymbol // one of : - + . )
	dtEnd
	dtWord // a word: kw says which keyword, if any
)

type dateKeyword int8

const (
	kwNone dateKeyword = iota // a word that is no keyword
	kwMonth
	kwZone
	kwTimeSep
	kwAMPM
)

type dateTok struct {
	kind dateTokKind
	kw   dateKeyword
	val  int // number, symbol character, keyword value
	len  int // characters (digits of a number)
}

func (t dateTok) isSym(c byte) bool { return t.kind == dtSymbol && t.val == int(c) }
func (t dateTok) isSign() bool      { return t.isSym('+') || t.isSym('-') }
func (t dateTok) isNum(n int) bool  { return t.kind == dtNumber && t.len == n }
func (t dateTok) isZ() bool         { return t.kind == dtWord && t.kw == kwZone && t.len == 1 && t.val == 0 }

// dateKeywords are the words V8 knows by their (lower-cased) first three
// letters, zero-padded; only month names may be longer than their entry.
var dateKeywords = [...]struct {
	pre [3]byte
	kw  dateKeyword
	val int
}{
	{[3]byte{'j', 'a', 'n'}, kwMonth, 1}, {[3]byte{'f', 'e', 'b'}, kwMonth, 2},
	{[3]byte{'m', 'a', 'r'}, kwMonth, 3}, {[3]byte{'a', 'p', 'r'}, kwMonth, 4},
	{[3]byte{'m', 'a', 'y'}, kwMonth, 5}, {[3]byte{'j', 'u', 'n'}, kwMonth, 6},
	{[3]byte{'j', 'u', 'l'}, kwMonth, 7}, {[3]byte{'a', 'u', 'g'}, kwMonth, 8},
	{[3]byte{'s', 'e', 'p'}, kwMonth, 9}, {[3]byte{'o', 'c', 't'}, kwMonth, 10},
	{[3]byte{'n', 'o', 'v'}, kwMonth, 11}, {[3]byte{'d', 'e', 'c'}, kwMonth, 12},
	{[3]byte{'a', 'm'}, kwAMPM, 0}, {[3]byte{'p', 'm'}, kwAMPM, 12},
	{[3]byte{'u', 't'}, kwZone, 0}, {[3]byte{'u', 't', 'c'}, kwZone, 0},
	{[3]byte{'z'}, kwZone, 0}, {[3]byte{'g', 'm', 't'}, kwZone, 0},
	{[3]byte{'c', 'd', 't'}, kwZone, -5}, {[3]byte{'c', 's', 't'}, kwZone, -6},
	{[3]byte{'e', 'd', 't'}, kwZone, -4}, {[3]byte{'e', 's', 't'}, kwZone, -5},
	{[3]byte{'m', 'd', 't'}, kwZone, -6}, {[3]byte{'m', 's', 't'}, kwZone, -7},
	{[3]byte{'p', 'd', 't'}, kwZone, -7}, {[3]byte{'p', 's', 't'}, kwZone, -8},
	{[3]byte{'t'}, kwTimeSep, 0},
}

// dateScanner hands out tokens with one token of lookahead.
type dateScanner struct {
	s    string
	i    int
	next dateTok
}

func (sc *dateScanner) ch() byte {
	if sc.i < len(sc.s) {
		return sc.s[sc.i]
	}
	return 0
}

// spaceAt is the length in bytes of the JS white space character (not a
// line terminator) at the reader, or 0: V8 ends a word there. Line
// terminators U+2028 and U+2029 are word characters, and so is a byte of
// invalid UTF-8 (U+FFFD in pi).
func (sc *dateScanner) spaceAt() int {
	if sc.i >= len(sc.s) || sc.s[sc.i] < 0x80 {
		return 0 // ASCII spaces are below 'A'
	}
	r, n := utf8.DecodeRuneInString(sc.s[sc.i:])
	switch {
	case r == '\u00a0', r == '\u1680', r >= '\u2000' && r <= '\u200a',
		r == '\u202f', r == '\u205f', r == '\u3000', r == '\ufeff':
		return n
	}
	return 0
}

func (sc *dateScanner) scan() dateTok {
	c := sc.ch()
	switch {
	case c == 0:
		return dateTok{kind: dtEnd}
	case c >= '0' && c <= '9':
		// Leading zeros count in the length, not in the nine digits.
		start := sc.i
		for sc.i < len(sc.s) && sc.s[sc.i] == '0' {
			sc.i++
		}
		sig, v := sc.i, 0
		for ; sc.i < len(sc.s) && sc.s[sc.i] >= '0' && sc.s[sc.i] <= '9'; sc.i++ {
			if sc.i-sig < dateMaxDigits {
				v = v*10 + int(sc.s[sc.i]-'0')
			}
		}
		return dateTok{kind: dtNumber, val: v, len: sc.i - start}
	case c == ':' || c == '-' || c == '+' || c == '.' || c == ')':
		sc.i++
		return dateTok{kind: dtSymbol, val: int(c), len: 1}
	case c >= 'A' && sc.spaceAt() == 0:
		// A word: every character from 'A' up but JS white space.
		start := sc.i
		var pre [3]byte
		for ; sc.i < len(sc.s) && sc.s[sc.i] >= 'A' && sc.spaceAt() == 0; sc.i++ {
			if k := sc.i - start; k < len(pre) {
				pre[k] = sc.s[sc.i] | 0x20
			}
		}
		t := dateTok{kind: dtWord, len: sc.i - start}
		for _, k := range dateKeywords {
			if k.pre == pre && (t.len <= len(pre) || k.kw == kwMonth) {
				t.kw, t.val = k.kw, k.val
				break
			}
		}
		return t
	case c == ' ' || (c >= '\t' && c <= '\r'):
		sc.i++
		return dateTok{kind: dtSpace, len: 1}
	case c >= 0x80: // a word character unless spaceAt said otherwise
		n := sc.spaceAt()
		sc.i += n
		return dateTok{kind: dtSpace, len: 1}
	case c == '(':
		// A comment, nested parentheses balanced; it may run to the end.
		for depth := 0; ; {
			switch sc.ch() {
			case '(':
				depth++
			case ')':
				depth--
			}
			sc.i++
			if depth <= 0 || sc.ch() == 0 {
				break
			}
		}
		return dateTok{kind: dtUnknown, len: 1}
	}
	sc.i++
	return dateTok{kind: dtUnknown, len: 1}
}

func (sc *dateScanner) take() dateTok {
	t := sc.next
	sc.next = sc.scan()
	return t
}

func (sc *dateScanner) skip(c byte) bool {
	if sc.next.isSym(c) {
		sc.next = sc.scan()
		return true
	}
	return false
}

// dateFields gathers what the parser read: up to three day numbers and a
// named month, up to four time numbers and an am/pm offset, and a zone.
type dateFields struct {
	day        [3]int
	nday       int
	month      int // named month, or dateNone
	iso        bool
	time       [4]int
	ntime      int
	hourOffset int // 0 (am), 12 (pm) or dateNone
	tzSign     int
	tzHour     int
	tzMin      int
}

func (f *dateFields) addDay(n int) bool {
	if f.nday == len(f.day) {
		return false
	}
	f.day[f.nday] = n
	f.nday++
	return true
}

func (f *dateFields) addTime(n int) bool {
	if f.ntime == len(f.time) {
		return false
	}
	f.time[f.ntime] = n
	f.ntime++
	return true
}

// finishTime adds the last time number and zeroes the rest.
func (f *dateFields) finishTime(n int) {
	if f.addTime(n) {
		for f.ntime < len(f.time) {
			f.addTime(0)
		}
	}
}

// timeExpects reports whether n can be the next minute, second or
// millisecond of a time already begun.
func (f *dateFields) timeExpects(n int) bool {
	switch f.ntime {
	case 1, 2:
		return n >= 0 && n <= 59
	case 3:
		return n >= 0 && n <= 999
	}
	return false
}

func (f *dateFields) setZone(hours int) {
	f.tzSign = 1
	if hours < 0 {
		f.tzSign = -1
	}
	f.tzHour, f.tzMin = hours*f.tzSign, 0
}

func (f *dateFields) zoneExpectsMinute(n int) bool {
	return f.tzHour != dateNone && f.tzMin == dateNone && n >= 0 && n <= 59
}

func (f *dateFields) zoneIsUTC() bool { return f.tzHour == 0 && f.tzMin == 0 }

// legacyParseDate is Date.parse as node's V8 computes it for any string
// (the ES format included, with V8's extensions such as ±hhmm offsets),
// with local time read as UTC. parseDate calls it when its strict ES
// reading fails.
func legacyParseDate(s string) float64 {
	f := dateFields{month: dateNone, hourOffset: dateNone, tzSign: dateNone, tzHour: dateNone, tzMin: dateNone}
	sc := dateScanner{s: s}
	sc.next = sc.scan()
	tok := f.es(&sc)
	if tok.kind == dtInvalid {
		return math.NaN()
	}
	readNumber := f.nday > 0
	for ; tok.kind != dtEnd; tok = sc.take() {
		switch {
		case tok.kind == dtNumber:
			readNumber = true
			n := tok.val
			switch {
			case sc.skip(':'):
				if sc.skip(':') { // "n::"
					if f.ntime != 0 {
						return math.NaN()
					}
					f.addTime(n)
					f.addTime(0)
				} else {
					if !f.addTime(n) {
						return math.NaN()
					}
					if sc.next.isSym('.') {
						sc.take()
					}
				}
			case sc.skip('.') && f.timeExpects(n):
				// The '.' is gone even when n is no time part: V8
				// skips it before it asks.
				f.addTime(n)
				if sc.next.kind != dtNumber {
					return math.NaN()
				}
				f.finishTime(dateMillis(sc.take()))
			case f.zoneExpectsMinute(n):
				f.tzMin = n
			case f.timeExpects(n):
				f.finishTime(n)
				// A time ends at the end, a space, Z or an offset sign.
				if p := sc.next; p.kind != dtEnd && p.kind != dtSpace && !p.isZ() && !p.isSign() {
					return math.NaN()
				}
			default:
				if !f.addDay(n) {
					return math.NaN()
				}
				sc.skip('-')
			}
		case tok.kind == dtWord:
			switch {
			case tok.kw == kwAMPM && f.ntime != 0:
				f.hourOffset = tok.val
			case tok.kw == kwMonth:
				f.month = tok.val
				sc.skip('-')
			case tok.kw == kwZone && readNumber:
				f.setZone(tok.val)
			default:
				// Other words may only come before the first number,
				// and not right against it.
				if readNumber || sc.next.kind == dtNumber {
					return math.NaN()
				}
			}
		case tok.isSign() && (f.zoneIsUTC() || f.ntime != 0):
			// An offset, after a time or a UTC zone: ±h, ±hh, ±hmm,
			// ±hhmm, or ±h: (whose minutes may follow as a number).
			f.tzSign = 1
			if tok.val == '-' {
				f.tzSign = -1
			}
			n, length := 0, 0
			if sc.next.kind == dtNumber {
				t := sc.take()
				n, length = t.val, t.len
			}
			readNumber = true
			switch {
			case sc.next.isSym(':'):
				f.tzHour, f.tzMin = n, dateNone
			case length == 1 || length == 2:
				f.tzHour, f.tzMin = n, 0
			case length == 3 || length == 4:
				f.tzHour, f.tzMin = n/100, n%100
			default:
				return math.NaN()
			}
		case (tok.isSign() || tok.isSym(')')) && readNumber:
			return math.NaN()
		}
		// Anything else (white space, other characters, comments, a sign
		// or ')' before any number) is ignored.
	}
	return f.value()
}

// es reads as much of the ES date-time format as the string follows and
// returns the token the legacy grammar continues with: dtEnd when the
// string was all ES, dtInvalid when it went wrong past the 'T'.
func (f *dateFields) es(sc *dateScanner) dateTok {
	switch {
	case sc.next.isSign():
		sign := sc.take()
		if !sc.next.isNum(6) {
			return sign
		}
		y := sc.take().val
		if sign.val == '-' {
			if y == 0 {
				return sign // -000000 is no year (and the zeros are gone)
			}
			y = -y
		}
		f.addDay(y)
	case sc.next.isNum(4):
		f.addDay(sc.take().val)
	default:
		return sc.take()
	}
	if sc.skip('-') {
		if !sc.next.isNum(2) || sc.next.val < 1 || sc.next.val > 12 {
			return sc.take()
		}
		f.addDay(sc.take().val)
		if sc.skip('-') {
			if !sc.next.isNum(2) || sc.next.val < 1 || sc.next.val > 31 {
				return sc.take()
			}
			f.addDay(sc.take().val)
		}
	}
	if sc.next.kind != dtWord || sc.next.kw != kwTimeSep {
		if sc.next.kind != dtEnd {
			return sc.take()
		}
	} else {
		invalid := dateTok{kind: dtInvalid}
		sc.take()
		if !sc.next.isNum(2) || sc.next.val > 24 {
			return invalid
		}
		h24 := sc.next.val == 24
		f.addTime(sc.take().val)
		if !sc.skip(':') {
			return invalid
		}
		if !sc.next.isNum(2) || sc.next.val > 59 || (h24 && sc.next.val > 0) {
			return invalid
		}
		f.addTime(sc.take().val)
		if sc.skip(':') {
			if !sc.next.isNum(2) || sc.next.val > 59 || (h24 && sc.next.val > 0) {
				return invalid
			}
			f.addTime(sc.take().val)
			if sc.skip('.') {
				if sc.next.kind != dtNumber || (h24 && sc.next.val > 0) {
					return invalid
				}
				f.addTime(dateMillis(sc.take()))
			}
		}
		switch {
		case sc.next.isZ():
			sc.take()
			f.setZone(0)
		case sc.next.isSign():
			f.tzSign = 1
			if sc.take().val == '-' {
				f.tzSign = -1
			}
			if sc.next.isNum(4) { // hhmm
				hm := sc.take().val
				if hm/100 > 23 || hm%100 > 59 {
					return invalid
				}
				f.tzHour, f.tzMin = hm/100, hm%100
			} else {
				if !sc.next.isNum(2) || sc.next.val > 23 {
					return invalid
				}
				f.tzHour = sc.take().val
				if !sc.skip(':') || !sc.next.isNum(2) || sc.next.val > 59 {
					return invalid
				}
				f.tzMin = sc.take().val
			}
		}
		if sc.next.kind != dtEnd {
			return invalid
		}
	}
	// A date alone is UTC; a date-time without offset is local time.
	if f.tzHour == dateNone && f.ntime == 0 {
		f.setZone(0)
	}
	f.iso = true
	return dateTok{kind: dtEnd}
}

// dateMillis reads a fraction of a second as V8 does: the number scaled by
// its length to three digits. Past nine digits that is not always the
// first three (".0123456789012" is 123 ms: the nine digits counted start
// after the zero, the length stops at nine).
func dateMillis(t dateTok) int {
	n, l := t.val, min(t.len, dateMaxDigits)
	for ; l < 3; l++ {
		n *= 10
	}
	for ; l > 3; l-- {
		n /= 10
	}
	return n
}

// value composes the fields into a time value, or NaN.
func (f *dateFields) value() float64 {
	if f.nday == 0 {
		return math.NaN()
	}
	for f.nday < len(f.day) {
		f.addDay(1) // day and month default to 1
	}
	// The missing numbers are 1s, so "1" is 1 January of year 1, which
	// the two-digit rule makes 2001; beside a month name the first number
	// is the day, unless it cannot be one.
	isDay := func(n int) bool { return n >= 1 && n <= 31 }
	var year, month, day int
	d := f.day
	switch {
	case f.month == dateNone && (f.iso || !isDay(d[0])):
		year, month, day = d[0], d[1], d[2] // Y M D
	case f.month == dateNone:
		month, day, year = d[0], d[1], d[2] // M D Y (Y defaults to 1: 2001)
	case !isDay(d[0]):
		month, year, day = f.month, d[0], d[1]
	default:
		month, day, year = f.month, d[0], d[1]
	}
	if !f.iso {
		switch {
		case year >= 0 && year <= 49:
			year += 2000
		case year >= 50 && year <= 99:
			year += 1900
		}
	}
	if month < 1 || month > 12 || !isDay(day) {
		return math.NaN()
	}

	for f.ntime < len(f.time) {
		f.addTime(0)
	}
	h, mi, sec, ms := f.time[0], f.time[1], f.time[2], f.time[3]
	if f.hourOffset != dateNone {
		if h < 0 || h > 12 {
			return math.NaN()
		}
		h = h%12 + f.hourOffset
	}
	if (h < 0 || h > 23 || mi < 0 || mi > 59 || sec < 0 || sec > 59 || ms < 0 || ms > 999) &&
		(h != 24 || mi != 0 || sec != 0 || ms != 0) {
		return math.NaN()
	}

	offset := 0.0 // seconds east of UTC; none is local time, here UTC
	if f.tzSign != dateNone {
		hh, mm := f.tzHour, f.tzMin
		if hh == dateNone {
			hh = 0
		}
		if mm == dateNone {
			mm = 0
		}
		// V8 sums in 32-bit unsigned arithmetic and refuses more than
		// its largest small integer (2^31-1 in node's 64-bit build).
		secs := uint32(hh)*3600 + uint32(mm)*60
		if secs > math.MaxInt32 {
			return math.NaN()
		}
		offset = float64(secs) * float64(f.tzSign)
	}
	if year < -1000000 || year > 1000000 {
		return math.NaN() // V8's MakeDay range; far beyond TimeClip
	}
	days := float64(daysFromCivil(year, month) + int64(day-1))
	t := float64(h)*3600000 + float64(mi)*60000 + float64(sec)*1000 + float64(ms)
	return timeClip(days*86400000 + t - offset*1000)
}
