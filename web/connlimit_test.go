package web

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/internal/testenv"
)

// TestLimitListenerKeepsTheReserve: another user's program that opens more
// connections than the listener takes gets at most total-reserved of them,
// and the rest are closed; a connection of this user is then still taken.
// (Before, one bound for all: another user holding it with idle
// connections kept the daemon's own user out of the view and /healthz.)
func TestLimitListenerKeepsTheReserve(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root, to run a program as another user (nobody)")
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("needs bash, whose /dev/tcp opens the other user's connections")
	}
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	const total, reserved = 6, 2
	ln := LimitListener(raw, total, reserved)
	defer ln.Close()
	accepted := make(chan net.Conn, 64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c // held open, as an idle client's would be
		}
	}()
	defer func() {
		close(accepted)
		for c := range accepted {
			c.Close()
		}
	}()

	host, port, _ := net.SplitHostPort(raw.Addr().String())
	hold := exec.Command(bash, "-c", fmt.Sprintf(`for i in $(seq 1 %d); do exec {fd}<>/dev/tcp/%s/%s || exit 1; done; echo ready; read`, total+4, host, port))
	hold.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	in, _ := hold.StdinPipe()
	out, _ := hold.StdoutPipe()
	if err := hold.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { in.Close(); hold.Wait() }()
	var line string
	testenv.Within(t, 60*time.Second, "the other user's connections", func() { line, _ = bufio.NewReader(out).ReadString('\n') })
	if line != "ready\n" {
		t.Fatalf("the other user's program: %q", line)
	}
	theirs := 0
	for theirs < total-reserved {
		select {
		case <-accepted:
			theirs++
		case <-time.After(30 * time.Second):
			t.Fatalf("%d of the other user's connections taken, want %d", theirs, total-reserved)
		}
	}
	mine, err := net.Dial("tcp", raw.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer mine.Close()
	select {
	case c := <-accepted:
		if c.RemoteAddr().String() != mine.LocalAddr().String() {
			t.Errorf("taken: %v, a connection of the other user's; want this user's %v", c.RemoteAddr(), mine.LocalAddr())
		}
		c.Close()
	case <-time.After(30 * time.Second):
		t.Fatal("this user's connection was not taken while another user's held the listener")
	}
}
