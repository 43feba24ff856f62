package web

import (
	"bufio"
	"errors"
	"fmt"
	"io"
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
	ln := LimitListener(raw, total, reserved, 0)
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

// TestLimitListenerCutsAStalledWrite: a write that waits longer than the
// stall for its client to read fails, so the request writing it ends and
// lets go of what it holds; a client that reads gets everything, however
// long the answer, and a write after a quiet spell longer than the stall
// is not cut. (Before, two clients that stopped reading held every
// whole-session read of the web view for as long as they stayed.)
func TestLimitListenerCutsAStalledWrite(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	const stall = 200 * time.Millisecond
	ln := LimitListener(raw, 4, 0, stall)
	defer ln.Close()
	write := func(c net.Conn, total int) error {
		buf := make([]byte, 64<<10)
		for n := 0; n < total; n += len(buf) {
			if _, err := c.Write(buf); err != nil {
				return err
			}
		}
		return nil
	}
	serve := func(f func(net.Conn) error) <-chan error {
		done := make(chan error, 1)
		go func() {
			c, err := ln.Accept()
			if err != nil {
				done <- err
				return
			}
			defer c.Close()
			done <- f(c)
		}()
		return done
	}

	// A client that never reads: the server's write fails.
	done := serve(func(c net.Conn) error { return write(c, 256<<20) })
	idle, err := net.Dial("tcp", raw.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("the write to a client that reads nothing: %v, want a deadline exceeded", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a write to a client that reads nothing was not cut")
	}

	// A client that reads: 32 MiB, then a write after a quiet spell of
	// twice the stall.
	quiet := make(chan struct{})
	done = serve(func(c net.Conn) error {
		if err := write(c, 32<<20); err != nil {
			return err
		}
		<-quiet
		_, err := c.Write([]byte("late"))
		return err
	})
	reader, err := net.Dial("tcp", raw.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	if _, err := io.ReadFull(reader, make([]byte, 32<<20)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * stall) // the quiet spell itself, not a wait for anything
	close(quiet)
	got := make([]byte, 4)
	if _, err := io.ReadFull(reader, got); err != nil || string(got) != "late" {
		t.Fatalf("a write after a quiet spell: %q, %v", got, err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the server's writes to a reading client: %v", err)
	}
}
