package session

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pisyncd/pisyncd/internal/testenv"
)

var (
	jsdateN      = flag.Int("jsdate.n", 60000, "TestParseDateNode: generated strings compared with node")
	jsdateSeed   = flag.Uint64("jsdate.seed", 1, "TestParseDateNode: generator seed")
	jsdateUpdate = flag.Bool("jsdate.update", false, "rewrite testdata/jsdate/legacy.json from node")
)

// nodeDates runs node (TZ=UTC, as pi runs in the harness) with a loop
// that reads a JSON array of values a line and answers with a JSON array
// of new Date(v).getTime() (null for NaN, "throws" when it throws).
type nodeDates struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

const nodeDatesScript = `
const rl = require("readline").createInterface({input: process.stdin, crlfDelay: Infinity});
rl.on("line", (l) => {
  const out = JSON.parse(l).map((v) => {
    try { return new Date(v).getTime(); } catch (e) { return "throws"; }
  });
  process.stdout.write(JSON.stringify(out) + "\n");
});
`

func startNodeDates(t testing.TB) *nodeDates {
	t.Helper()
	testenv.Oracle(t) // node, or skip (fail under CI=true)
	cmd, in, out := startNode(t, os.Stderr, []string{"TZ=UTC"}, "-e", nodeDatesScript)
	n := &nodeDates{cmd: cmd, in: in, out: out}
	t.Cleanup(func() {
		in.Close() // ends node's loop
		if err := cmd.Wait(); err != nil {
			t.Errorf("node exited: %v", err)
		}
	})
	return n
}

// times asks node for new Date(v).getTime() of each raw JSON value.
func (n *nodeDates) times(vals []json.RawMessage) ([]json.RawMessage, error) {
	req, err := json.Marshal(vals)
	if err != nil {
		return nil, err
	}
	if _, err := n.in.Write(append(req, '\n')); err != nil {
		return nil, fmt.Errorf("node: write: %w", err)
	}
	line, err := n.out.ReadBytes('\n')
	if err != nil {
		return nil, fmt.Errorf("node: read: %w", err)
	}
	var out []json.RawMessage
	if err := json.Unmarshal(line, &out); err != nil || len(out) != len(vals) {
		return nil, fmt.Errorf("node: answer %.200s: %v", line, err)
	}
	return out, nil
}

// dateAnswer is dateValue of raw spelled as node's answer is.
func dateAnswer(raw json.RawMessage) string {
	v := dateValue(raw)
	if math.IsNaN(v) {
		return "null"
	}
	return fmt.Sprint(int64(v))
}

// dateJSON spells s as a JSON string (as node will read it).
func dateJSON(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// TestParseDateNode compares dateValue with node's new Date(v) on many
// generated strings (random tokens of V8's legacy grammar, mutated ES
// strings) and JSON values. A larger run:
// go test ./session/ -run TestParseDateNode -args -jsdate.n 1000000 -jsdate.seed 2
func TestParseDateNode(t *testing.T) {
	node := startNodeDates(t)
	r := rand.New(rand.NewPCG(*jsdateSeed, 0x5eed))
	const batch = 2000
	var compared, valid, bad int
	vals := make([]json.RawMessage, 0, batch)
	check := func() {
		got, err := node.times(vals)
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range vals {
			compared++
			want := string(got[i])
			if want != "null" {
				valid++
			}
			if g := dateAnswer(v); g != want {
				bad++
				if bad <= 40 {
					t.Errorf("new Date(%s): node %s, pisyncd %s", v, want, g)
				}
			}
		}
		vals = vals[:0]
	}
	vals = append(vals, dateValueCases()...)
	check()
	for i := 0; i < *jsdateN; i++ {
		if i%10 == 9 {
			vals = append(vals, genDateArray(r))
		} else {
			vals = append(vals, dateJSON(genDateString(r)))
		}
		if len(vals) == batch {
			check()
		}
	}
	check()
	t.Logf("compared %d values with node (%d valid dates), %d disagreements", compared, valid, bad)
}

// dateValueCases are JSON values whose conversion goes through ToPrimitive:
// arrays join like String([…]), objects are "[object Object]".
func dateValueCases() []json.RawMessage {
	var out []json.RawMessage
	for _, s := range []string{
		`[1]`, `[1,2]`, `[1,2,3]`, `[[2020]]`, `[["Jan 1 2020"]]`, `["Jan 1 2020"]`,
		`[null]`, `[true]`, `[false]`, `[]`, `[[]]`, `[null,1]`, `[1,null,2020]`,
		`{}`, `{"a":1}`, `[{}]`, `[{},1]`, `[1,{}]`, `[2020,1,2]`, `["2020-01-02"]`,
		`["2020","01","02"]`, `[12.5]`, `[1e21]`, `[1.5e-7]`, `[-1]`, `[0]`, `[-0]`,
		`[2020.5]`, `["10:00",2020]`, `[[1,2],[3]]`, `1`, `0`, `-1`, `1e21`, `8.64e15`,
		`8.64e15`, `8640000000000001`, `-8.64e15`, `1.5`, `-0.5`, `true`, `false`, `null`,
		`""`, `" "`, `"1"`, `"\u0000"`, `"1\u00002020"`, `"2020-01-02\u0000x"`,
		`"Jan\u00a01 2020"`, `"1\u00a02020"`, `"Jan 1 2020\u2028"`, `"\ud800 1 2"`,
		`["\u0000"]`, `[" 1"]`, `[[[[[[1]]]]]]`, `[[null],[true]]`, `[1,[2,[3]]]`,
	} {
		out = append(out, json.RawMessage(s))
	}
	return out
}

// TestParseDateTable checks parseDate on testdata/jsdate/legacy.json, node's
// answers for a few hundred representative strings and values, without
// node. Regenerate: go test ./session/ -run TestParseDateTable -args -jsdate.update
func TestParseDateTable(t *testing.T) {
	file := filepath.Join(testenv.TestdataDir(t), "jsdate", "legacy.json")
	if *jsdateUpdate {
		updateDateTable(t, file)
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var table struct {
		Cases []struct {
			Value json.RawMessage `json:"value"`
			Time  json.RawMessage `json:"time"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(raw, &table); err != nil {
		t.Fatal(err)
	}
	if len(table.Cases) < 300 {
		t.Fatalf("only %d cases in %s", len(table.Cases), file)
	}
	for _, c := range table.Cases {
		if g := dateAnswer(c.Value); g != string(c.Time) {
			t.Errorf("new Date(%s): node %s, pisyncd %s", c.Value, c.Time, g)
		}
	}
}

// dateTableStrings are the table's hand-picked strings; generated ones
// follow them.
var dateTableStrings = []string{
	// ES format, and V8's extensions of it
	"2020", "2020-01", "2020-01-02", "2020-01-02T03:04", "2020-01-02T03:04:05",
	"2020-01-02T03:04:05.678", "2020-01-02T03:04:05.678Z", "2020-01-02t03:04:05z",
	"2020-01-02T03:04:05+01:30", "2020-01-02T03:04:05-0130", "2020-01-02T03:04:05+2400",
	"2020-01-02T24:00", "2020-01-02T24:00:00.000", "2020-01-02T24:00:00.0001",
	"2020-01-02T24:00:00.0000000001", "2020-01-02T24:01", "2020-01-02T03:04:05.1",
	"2020-01-02T03:04:05.123456789", "2020-01-02T03:04:05.0123456789012Z", "2020-01-02T03:04:05.1234567890123Z", "2020-01-02T03:04:05.", "2020-02-30", "2020-02-32",
	"+002020-01-02", "-002020-01-02", "+275760-09-13", "+275760-09-14", "-271821-04-20",
	"-271821-04-19", "-000000-01-01", "+000000-01-01", "-000000", "2020-13-01", "2020-00-01",
	"2020-01-00", "2020-1-2", "2020-01-2", "2020-1", "20200-01-01", "202-01-01", "2020-01-02T",
	"2020-01-02T3:04", "2020-01-02 03:04", "2020-01-02 03:04Z", "2020-01-02T03:04 Z",
	"2020-01-02T03:04:05Z ", " 2020-01-02", "2020-01-02Z", "2020-01-02T03:04:05+01",
	"2020-01-02T03:04:05+1:00", "2020-01-02T03:04:05GMT", "2020-01-02 GMT", "2020-01-02 10:00 PM",
	// numbers alone
	"0", "1", "9", "12", "13", "31", "32", "49", "50", "99", "100", "999", "1000", "9999",
	"10000", "99999", "123456", "275760", "1234567890", "01", "001", "1 2", "1 2 3",
	"1 2 3 4", "13 1 2020", "1 13 2020", "31 12 1999", "2020 1 2", "2020 13 2", "1/2/3",
	"1/2/2020", "12/31/99", "2020/1/2", "2020/01/02 10:00", "2020.1.2", "1.2.2020", "1,2,2020",
	"1-2-2020", "2020-1-2 3:4:5", "0/0/0", "0 1 1", "1 0 1", "1 32 1", "1 1 0", "1 1 -1",
	"-1", "+1", "- 1", "1-", "1--2", "1 -2", "(1)", "1 (2) 3", "1 (2 (3) 4) 5", "1 (2",
	"1 )", ") 1", "1 2 3 )",
	// month and day names
	"Jan 2 2020", "January 2, 2020", "2 Jan 2020", "2020 Jan 2", "Jan 2020 2", "Jan 2",
	"Jan", "jan", "JAN 1", "Janx 1", "Ja 1", "Ju 1", "Jun 1", "Jul 1", "June 1 2020",
	"Sept 1 2020", "Mar 1 2020", "Ma 1 2020", "May 1 2020", "Dec 31 1999", "Feb 30 2021",
	"Feb 29 2021", "Jan 32 2020", "Jan 0 2020", "Jan 1 0", "Jan 1 49", "Jan 1 50",
	"Jan 1 100", "Jan-1-2020", "1-Jan-2020", "Jan 1 Feb 2020", "Tue Jan 2 2020",
	"Tuesday, January 2, 2020", "Tue, 01 Jan 2019 10:00:00 GMT", "Thu, 01 Jan 1970 00:00:00 GMT",
	"Thu Jan 01 1970 00:00:00 GMT+0000 (Coordinated Universal Time)",
	"Wed Dec 31 1969 19:00:00 GMT-0500 (Eastern Standard Time)", "Mon1 Jan 2020",
	"x1 Jan 2020", "x 1 Jan 2020", "1 Jan 2020 x", "foo", "foo bar", "Jan 1 2020 foo",
	"Jan 1 2020 (foo)", "(Jan) 1 2020",
	// times
	"10:00", "10:00 2020", "12:30 2020-01-02", "2020-01-02 12:30", "1 10:00", "Jan 1 10:00",
	"Jan 1 2020 10:00", "Jan 1 2020 10:00:30", "Jan 1 2020 10:00:30.5", "Jan 1 2020 10:00:30.123456",
	"Jan 1 2020 10:00.5", "Jan 1 2020 10.5", "Jan 1 2020 10:", "Jan 1 2020 10::", "Jan 1 2020 10::30",
	"Jan 1 2020 10:00:", "Jan 1 2020 10:00:00:00", "Jan 1 2020 10:00:00:00:00", "Jan 1 2020 24:00",
	"Jan 1 2020 24:01", "Jan 1 2020 25:00", "Jan 1 2020 10:60", "Jan 1 2020 10:00:60",
	"Jan 1 2020 10:00x", "Jan 1 2020 10:00Z", "Jan 1 2020 10:00+1", "Jan 1 2020 10:00 +1",
	"Jan 1 2020 10:00:00.000Z", "Jan 1 2020 10:00.", "Jan 1 2020 10:00.x",
	// am/pm
	"Jan 1 2020 10:00 am", "Jan 1 2020 10:00 pm", "Jan 1 2020 12:00 am", "Jan 1 2020 12:00 pm",
	"Jan 1 2020 13:00 pm", "Jan 1 2020 0:00 pm", "Jan 1 2020 10:00pm", "Jan 1 2020 10 pm",
	"Jan 1 2020 pm 10:00", "Jan 1 2020 10:00 a.m.", "Jan 1 2020 10:00 PM", "Jan 1 2020 10:00 amx",
	"pm", "am 1",
	// zones and offsets
	"Jan 1 2020 10:00 GMT", "Jan 1 2020 10:00 UTC", "Jan 1 2020 10:00 UT", "Jan 1 2020 10:00 Z",
	"Jan 1 2020 10:00 EST", "Jan 1 2020 10:00 EDT", "Jan 1 2020 10:00 CST", "Jan 1 2020 10:00 CDT",
	"Jan 1 2020 10:00 MST", "Jan 1 2020 10:00 MDT", "Jan 1 2020 10:00 PST", "Jan 1 2020 10:00 PDT",
	"Jan 1 2020 10:00 CET", "Jan 1 2020 10:00 utcx", "Jan 1 2020 GMT+2", "Jan 1 2020 GMT-8",
	"Jan 1 2020 GMT+0530", "Jan 1 2020 GMT+530", "Jan 1 2020 GMT+05:30", "Jan 1 2020 GMT+5:",
	"Jan 1 2020 GMT+12345", "Jan 1 2020 GMT+", "Jan 1 2020 GMT-", "Jan 1 2020 10:00 +0100",
	"Jan 1 2020 10:00 -01:00", "Jan 1 2020 10:00 +01:30", "Jan 1 2020 10:00 +99:99",
	"Jan 1 2020 10:00 +596523:", "Jan 1 2020 10:00 +596524:", "Jan 1 2020 10:00 +1193046:",
	"Jan 1 2020 10:00 +999999999:", "Jan 1 2020 10:00 +1193047:", "Jan 1 2020 10:00 +2386093:",
	"Jan 1 2020 +0100", "Jan 1 2020 10:00 GMT+0100 (CET)", "GMT Jan 1 2020", "EST 1 2 2020",
	"1 2 2020 EST", "Jan 1 2020 10:00 EST+1", "Jan 1 2020 10:00 +1 +2", "Jan 1 2020 10:00 - 1",
	"Jan 1 2020 Z", "Jan 1 2020 z", "Jan 1 2020 T", "Jan 1 2020 T10:00", "2020-01-02T10:00 GMT",
	// odd characters
	"Jan\t1\n2020", "Jan\v1\f2020\r", "Jan\u00a01 2020", "Jan\u30001 2020", "Jan 1 2020\u3000",
	"1日 2020", "2020年1月2日", "Jan_1_2020", "Jan[1]2020", "Jan@1@2020", "Jan,1,2020",
	"Jan;1;2020", "Jan!1!2020", "1\x002020", "Jan 1 2020\x00 junk", "\x00",
	"\x1c1 2 2020", "1\x1f2\x1f2020", "Jan 1 2020 10:00\x1c", "x\u20281", "x\u2029 1",
	"x\u00851", "Jan\ufeff1 2020", "January\ufeff_45", "\U0001F600 1 2 2020",
	// leading zeros and long numbers
	"Jan 1 0000000002020", "Jan 1 2020 10:00:00.0123456789012", "Jan 1 1234567890123",
	"Jan 1 999999999", "Jan 1 1000000", "0000000000000001 2 2020",
	// the edges of the time range, with and without zone
	"Sep 13 275760", "Sep 13 275760 00:00:01", "Sep 14 275760 GMT+1", "Sep 13 275760 10:00 GMT+1100",
	"Sep 13 275760 23:00 -0100", "Apr 20 271821 GMT", "Jan 1 100000 10:00 -9999:",
}

func updateDateTable(t *testing.T, file string) {
	node := startNodeDates(t)
	vals := dateValueCases()
	for _, s := range dateTableStrings {
		vals = append(vals, dateJSON(s))
	}
	r := rand.New(rand.NewPCG(7, 0x7ab1e))
	for i := 0; i < 200; i++ {
		vals = append(vals, dateJSON(genDateString(r)))
	}
	times, err := node.times(vals)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("{\n  \"note\": \"new Date(value).getTime() in node (TZ=UTC), null for NaN; regenerate with: go test ./session/ -run TestParseDateTable -args -jsdate.update\",\n")
	fmt.Fprintf(&b, "  \"node\": %q,\n  \"cases\": [\n", nodeVersion(t))
	for i, v := range vals {
		sep := ","
		if i == len(vals)-1 {
			sep = ""
		}
		fmt.Fprintf(&b, "    {\"value\": %s, \"time\": %s}%s\n", v, times[i], sep)
	}
	b.WriteString("  ]\n}\n")
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

func nodeVersion(t *testing.T) string {
	out, err := exec.Command("node", "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// Building blocks of generated date strings: what V8's grammar tells
// apart, and near misses.
var (
	genMonths = []string{"Jan", "January", "feb", "FEB", "Mar", "March", "Apr", "April", "May",
		"Jun", "June", "Jul", "July", "Aug", "Sep", "Sept", "September", "Oct", "Nov", "Dec",
		"December", "Ja", "Ju", "Ma", "De", "Janx", "jUL"}
	genDays  = []string{"Mon", "Tue", "Tuesday", "Wed", "Thu", "Fri", "Sat", "Sun", "Sunday"}
	genZones = []string{"GMT", "UTC", "UT", "Z", "z", "EST", "EDT", "CST", "CDT", "MST", "MDT",
		"PST", "PDT", "gmt", "utc", "CET", "CEST", "BST", "GMTx", "UTCZ", "U", "G"}
	genAMPM = []string{"am", "pm", "AM", "PM", "a.m.", "p.m.", "amx", "pmx", "a", "p"}
	genSeps = []string{" ", " ", " ", "  ", "-", "/", ".", ",", ", ", ":", "::", "\t", "\n", "", "", "_"}
	genJunk = []string{"x", "T", "t", "@", "#", "é", "日", "\x00", "\u00a0", "[", "]", "_", "~",
		"(", ")", "(x)", "(1)", "((a)b)", "(Coordinated Universal Time)", "'", "\"", "\\", "*",
		"{", "}", "|", "`", "^", "\x7f", "\x1c", "\x01", "\u2028", "\ufeff", "!", "?", ";", "=",
		"<", ">", "&", "%", "$", "foo", "at", "the", "of", "th", "st", "nd", "rd", "\u2000",
		"\u3000", "\u2028", "\u0085", "\r", "\v", "\u180e", "\U0001F600", "\u00e9t\u00e9"}
	genISO = []string{"2020-01-02T03:04:05.678Z", "2020-01-02", "2020-01-02T03:04",
		"1970-01-01T00:00:00Z", "+002020-06-30T23:59:59.999+05:30", "-000001-12-31T24:00:00",
		"2020-02-29T12:00:00-0800", "0000-01-01T00:00:00.000Z", "9999-12-31T23:59:59.999Z",
		"+275760-09-13T00:00:00.000Z", "-271821-04-20T00:00:00.000Z", "2020-01",
		"2020", "2024-12-31T23:59:60Z", "2020-01-02T03:04:05.6789012345Z"}
	genISOChars = "0123456789-+:.TtZz WGMTUCamp()/,Jan\x00\t"
)

func genNumber(r *rand.Rand) string {
	n := 1 + r.IntN(6)
	if r.IntN(20) == 0 {
		n = 7 + r.IntN(5)
	}
	var b strings.Builder
	for i := 0; i < n; i++ {
		if i == 0 && r.IntN(3) != 0 {
			b.WriteByte(byte('1' + r.IntN(9)))
			continue
		}
		b.WriteByte(byte('0' + r.IntN(10)))
	}
	return b.String()
}

// genSmall is a number of one or two digits in the ranges that matter.
func genSmall(r *rand.Rand) string {
	switch r.IntN(4) {
	case 0:
		return fmt.Sprint(r.IntN(13))
	case 1:
		return fmt.Sprint(r.IntN(32))
	case 2:
		return fmt.Sprintf("%02d", r.IntN(61))
	}
	return fmt.Sprint(r.IntN(100))
}

func pickStr(r *rand.Rand, s []string) string { return s[r.IntN(len(s))] }

// genDateString makes a random string in (or near) V8's date grammar.
func genDateString(r *rand.Rand) string {
	switch r.IntN(10) {
	case 0, 1:
		return mutateISO(r, pickStr(r, genISO))
	case 2:
		return genTemplate(r)
	}
	var b strings.Builder
	for n := 1 + r.IntN(8); n > 0; n-- {
		switch r.IntN(16) {
		case 0, 1, 2:
			b.WriteString(genNumber(r))
		case 3, 4, 5:
			b.WriteString(genSmall(r))
		case 6, 7:
			b.WriteString(pickStr(r, genMonths))
		case 8:
			b.WriteString(pickStr(r, genDays))
		case 9:
			b.WriteString(pickStr(r, genZones))
		case 10:
			b.WriteString(pickStr(r, genAMPM))
		case 11:
			b.WriteString(pickStr(r, []string{"+", "-"}))
			if r.IntN(3) != 0 {
				b.WriteString(genNumber(r))
			}
		case 12:
			b.WriteString(genSmall(r) + ":" + fmt.Sprintf("%02d", r.IntN(62)))
			if r.IntN(2) == 0 {
				b.WriteString(":" + fmt.Sprintf("%02d", r.IntN(62)))
			}
			if r.IntN(4) == 0 {
				b.WriteString("." + genNumber(r))
			}
		case 13:
			b.WriteString(pickStr(r, genJunk))
		default:
			b.WriteString(pickStr(r, genSeps))
		}
		b.WriteString(pickStr(r, genSeps))
	}
	s := b.String()
	if r.IntN(4) == 0 {
		s = strings.TrimSpace(s)
	}
	return s
}

// genTemplate fills a common date layout with random parts.
func genTemplate(r *rand.Rand) string {
	m, d, y := pickStr(r, genMonths), genSmall(r), genNumber(r)
	hms := fmt.Sprintf("%s:%02d:%02d", genSmall(r), r.IntN(61), r.IntN(61))
	zone := pickStr(r, genZones)
	off := fmt.Sprintf("%s%02d%02d", pickStr(r, []string{"+", "-"}), r.IntN(25), r.IntN(61))
	switch r.IntN(8) {
	case 0:
		return fmt.Sprintf("%s %s %s %s %s%s (%s)", pickStr(r, genDays), m, d, y, hms, zone+off, "Some Time")
	case 1:
		return fmt.Sprintf("%s, %s %s %s %s %s", pickStr(r, genDays), d, m, y, hms, zone)
	case 2:
		return fmt.Sprintf("%s/%s/%s %s %s", genSmall(r), genSmall(r), y, hms, pickStr(r, genAMPM))
	case 3:
		return fmt.Sprintf("%s-%s-%s %s", y, genSmall(r), genSmall(r), hms)
	case 4:
		return fmt.Sprintf("%s %s, %s %s %s", m, d, y, hms, off)
	case 5:
		return fmt.Sprintf("%s %s %s", hms, y, m)
	case 6:
		return fmt.Sprintf("%s.%s.%s %s:%s", d, genSmall(r), y, genSmall(r), genSmall(r))
	}
	return fmt.Sprintf("%s %s %s %s %s", d, m, y, hms, zone)
}

// mutateISO applies a few random edits to an ES date string.
func mutateISO(r *rand.Rand, s string) string {
	b := []byte(s)
	for n := r.IntN(4); n >= 0; n-- {
		i := 0
		if len(b) > 0 {
			i = r.IntN(len(b))
		}
		c := genISOChars[r.IntN(len(genISOChars))]
		switch r.IntN(6) {
		case 0: // delete
			if len(b) > 0 {
				b = append(b[:i], b[i+1:]...)
			}
		case 1: // insert
			b = append(b[:i], append([]byte{c}, b[i:]...)...)
		case 2: // replace
			if len(b) > 0 {
				b[i] = c
			}
		case 3: // truncate
			b = b[:i]
		case 4: // swap
			if i+1 < len(b) {
				b[i], b[i+1] = b[i+1], b[i]
			}
		default: // append a suffix
			b = append(b, pickStr(r, []string{" GMT", "Z", " +0100", " pm", " (x)", " 10:00", "+01", ".5", " 2020"})...)
		}
	}
	return string(b)
}

// genDateArray makes an array value whose joined string is a date string.
func genDateArray(r *rand.Rand) json.RawMessage {
	var parts []string
	for n := r.IntN(4); n >= 0; n-- {
		switch r.IntN(6) {
		case 0:
			parts = append(parts, strings.TrimLeft(genNumber(r), "0")+"0") // JSON: no leading 0
		case 1:
			parts = append(parts, "null")
		case 2:
			parts = append(parts, string(dateJSON(genDateString(r))))
		case 3:
			parts = append(parts, fmt.Sprintf("[%d]", r.IntN(40)))
		case 4:
			parts = append(parts, pickStr(r, []string{"true", "{}", "[]", "1.5", "-1", "1e21"}))
		default:
			parts = append(parts, string(dateJSON(pickStr(r, genMonths))))
		}
	}
	return json.RawMessage("[" + strings.Join(parts, ",") + "]")
}

// FuzzParseDate: parseDate never panics and gives NaN or an integral time
// value within TimeClip's range.
func FuzzParseDate(f *testing.F) {
	for _, s := range dateTableStrings {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v := parseDate(s)
		if math.IsNaN(v) {
			return
		}
		if v != math.Trunc(v) || math.Abs(v) > 8.64e15 {
			t.Fatalf("parseDate(%q) = %v", s, v)
		}
	})
}

// BenchmarkParseDate: the ES path and the legacy one allocate nothing.
func BenchmarkParseDate(b *testing.B) {
	for _, s := range []string{"2026-11-29T23:08:16.463Z", "Tue, 01 Jan 2019 10:00:00 GMT", "1"} {
		b.Run(s, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = parseDate(s)
			}
		})
	}
}
