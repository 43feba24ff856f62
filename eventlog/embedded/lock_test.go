package embedded

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestHelperHoldLock is not a test: TestLockReleasedOnProcessDeath runs the
// test binary with it to hold a state dir lock in another process.
func TestHelperHoldLock(t *testing.T) {
	dir := os.Getenv("PISYNC_TEST_LOCK_DIR")
	if dir == "" {
		t.Skip("helper process only")
	}
	if _, err := lockDir(dir, ""); err != nil {
		t.Fatalf("lock: %v", err)
	}
	os.Stdout.WriteString("locked\n")
	// Hold the lock until the parent kills us.
	bufio.NewReader(os.Stdin).ReadString('\n')
}

func TestLockReleasedOnProcessDeath(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHoldLock$")
	cmd.Env = append(os.Environ(), "PISYNC_TEST_LOCK_DIR="+dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "locked\n" {
		t.Fatalf("helper said %q, %v", line, err)
	}

	_, err = Start(context.Background(), testConfig(t, dir))
	var inUse *InUseError
	if !errors.As(err, &inUse) || inUse.PID != cmd.Process.Pid {
		t.Fatalf("Start while another process holds the lock: %v; want InUseError naming pid %d", err, cmd.Process.Pid)
	}

	// SIGKILL: no cleanup runs in the helper; the kernel drops the flock.
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	startServer(t, testConfig(t, dir))
}

// TestLockNamesACommand: a command that holds the state dir while no daemon
// runs (pisyncd events, paged) is named as that, with what to do, and not
// as "another pisyncd"; a daemon's lock reads as before.
func TestLockNamesACommand(t *testing.T) {
	dir := t.TempDir()
	l, err := lockDir(dir, "pisyncd events")
	if err != nil {
		t.Fatal(err)
	}
	_, err = lockDir(dir, "")
	var inUse *InUseError
	if !errors.As(err, &inUse) || inUse.PID != os.Getpid() || inUse.Holder != "pisyncd events" ||
		!strings.Contains(err.Error(), "`pisyncd events` (pid") || !strings.Contains(err.Error(), "quit its pager") {
		t.Fatalf("lock held by a command: %v (%+v)", err, inUse)
	}
	if got := StateDirInUse(dir); got == nil || got.Holder != "pisyncd events" {
		t.Errorf("StateDirInUse: %+v", got)
	}
	l.release()
	if l, err = lockDir(dir, ""); err != nil {
		t.Fatal(err)
	}
	defer l.release()
	if _, err = lockDir(dir, "pisyncd ls"); !errors.As(err, &inUse) || inUse.Holder != "" || !strings.Contains(err.Error(), "another pisyncd") {
		t.Fatalf("lock held by a daemon: %v", err)
	}
}
