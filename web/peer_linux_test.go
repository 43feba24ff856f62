package web

import (
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/pisyncd/pisyncd/internal/testenv"
)

func TestFindSocketOwner(t *testing.T) {
	// A real /proc/net/tcp: a client on 127.0.0.1:40000 of uid 1002
	// connected to 127.0.0.1:19470 (its server's end, uid 1001, listed too).
	table := []byte(`  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:4C0E 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1001        0 81234 1 0000000000000000 100 0 0 10 0
   1: 0100007F:9C40 0100007F:4C0E 01 00000000:00000000 00:00000000 00000000  1002        0 81300 1 0000000000000000 20 4 30 10 -1
   2: 0100007F:4C0E 0100007F:9C40 01 00000000:00000000 00:00000000 00000000  1001        0 81301 1 0000000000000000 20 4 30 10 -1
`)
	client := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
	server := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 19470}
	if a := procAddr(client, "/proc/net/tcp"); a != "0100007F:9C40" {
		t.Fatalf("procAddr = %q", a)
	}
	if a := procAddr(&net.TCPAddr{IP: net.IPv6loopback, Port: 19470}, "/proc/net/tcp6"); a != "00000000000000000000000001000000:4C0E" {
		t.Fatalf("procAddr ::1 = %q", a)
	}
	if uid, ok := findSocketOwner(table, [2]string{procAddr(client, "tcp"), procAddr(server, "tcp")}); !ok || uid != 1002 {
		t.Errorf("the client's socket: uid %d, %v; want 1002", uid, ok)
	}
	if _, ok := findSocketOwner(table, [2]string{procAddr(server, "tcp"), "0100007F:0001"}); ok {
		t.Error("found a socket that is not there")
	}
	// This process's own connections, looked up for real.
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0"} {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Logf("%s: %v", addr, err) // no IPv6 here
			continue
		}
		defer ln.Close()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if uid, ok := socketOwner(c.LocalAddr().(*net.TCPAddr), c.RemoteAddr().(*net.TCPAddr)); !ok || uid != os.Geteuid() {
			t.Errorf("own socket on %s: uid %d, %v; want %d", addr, uid, ok, os.Geteuid())
		}
	}
}

// TestCookieOnlyFromOwnUser: the view's cookie reaches every port of the
// host in a browser, so another user of the machine listening on one gets
// it (a page of any site sends the browser there: chromium did, in an
// audit on 2026-12-03). Replayed by that user's program it lets nothing in,
// as a cookie or as a token; the user's own browser (a program of the
// daemon's user) is let in by it.
func TestCookieOnlyFromOwnUser(t *testing.T) {
	if url := os.Getenv("PISYNC_TEST_STOLEN_URL"); url != "" {
		// The child, as another user: replay what was stolen.
		for _, h := range [][2]string{{"Cookie", os.Getenv("PISYNC_TEST_STOLEN_COOKIE")}, {TokenHeader, os.Getenv("PISYNC_TEST_STOLEN_VALUE")}} {
			req, _ := http.NewRequest("GET", url, nil)
			req.Header.Set(h[0], h[1])
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized || strings.Contains(string(b), "secret") {
				t.Errorf("another user with the stolen %s: %d %.100q", h[0], resp.StatusCode, b)
			}
		}
		return
	}
	d := startDaemon(t)
	d.write(sid1, testenv.Header(sid1), testenv.Entry("u1", "", "secret words"))
	d.waitEntries(sid1, 1)
	plain := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := plain.Get(d.http.URL + "/?" + TokenParam + "=" + testToken)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cookies := resp.Cookies()
	if len(cookies) != 1 || cookies[0].Value == testToken {
		t.Fatalf("the link's cookies: %v; want one, not the token itself", cookies)
	}
	cookie := cookies[0].Name + "=" + cookies[0].Value
	get := func(h, v string) int {
		req, _ := http.NewRequest("GET", d.http.URL+"/api/s/"+sid1+"/context", nil)
		req.Header.Set(h, v)
		resp, err := plain.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get("Cookie", cookie); code != 200 {
		t.Errorf("own user with the cookie: %d", code)
	}
	if code := get(TokenHeader, cookies[0].Value); code != http.StatusUnauthorized {
		t.Errorf("the cookie's value as the token: %d, want 401", code)
	}
	if os.Getuid() != 0 {
		t.Skip("another user's replay needs root to run as nobody")
	}
	cmd := testenv.AsNobody(t, "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1")
	cmd.Env = append(cmd.Env, "PISYNC_TEST_STOLEN_URL="+d.http.URL+"/api/s/"+sid1+"/context",
		"PISYNC_TEST_STOLEN_COOKIE="+cookie, "PISYNC_TEST_STOLEN_VALUE="+cookies[0].Value)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
}
