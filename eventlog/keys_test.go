package eventlog_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/admit"
	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/internal/testenv"
	"github.com/pisyncd/pisyncd/keyring"
	"github.com/pisyncd/pisyncd/seal"
)

// TestDownloaderKeyMessages: sealed lines name their key message on the
// hub's PI_KEYS. One whose key message lies past the last PI_KEYS holds
// was never stored and is refused as undecryptable, without holding back
// what follows; one whose key message was tombstoned (an erase) is passed
// over as erased; one whose key message is on another session's key
// subject is refused as moved. (A key message missing from a replica that
// lags, at or before the leader's last, is still waited for: a single
// server cannot show it.)
func TestDownloaderKeyMessages(t *testing.T) {
	hubJS, ws, all := hubAndLeaf(t)
	ctx := context.Background()
	if _, err := eventlog.EnsureStream(ctx, hubJS, eventlog.KeysStreamConfig(1)); err != nil {
		t.Fatal(err)
	}
	ring := keyring.New(time.Now())
	keyFile := filepath.Join(t.TempDir(), "team-key.json")
	if err := keyring.Save(keyFile, ring); err != nil {
		t.Fatal(err)
	}
	sender := eventlog.NewCrypt(keyFile, "n2", true)
	publishKey := func(subj string, body []byte) (uint64, error) {
		ack, err := hubJS.Publish(ctx, subj, body)
		if err != nil {
			return 0, err
		}
		return ack.Sequence, nil
	}
	kh := func(pub func(string, []byte) (uint64, error)) eventlog.KeyHub {
		return eventlog.KeyHub{Publish: pub, Subjects: func(filter string) ([]string, error) {
			return eventlog.KeySubjects(ctx, hubJS, filter)
		}}
	}
	pub := eventlog.NewPublisher(hubJS.Conn(), hubJS, 10*time.Second)
	send := func(sid string, kp func(string, []byte) (uint64, error)) string {
		t.Helper()
		l := mkLines(1, 50, sid)[0]
		l.SrcSeq = 1
		subj, sealed, err := eventlog.SealLine(sender, sid, &l, kh(kp))
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := pub.Publish(ctx, subj, 0, []eventlog.Line{sealed}); err != nil {
			t.Fatal(err)
		}
		return subj
	}

	send("s1", publishKey)
	// s2 names a key message that is not on the hub yet.
	const later = 10
	var held struct {
		subj string
		body []byte
	}
	send("s2", func(subj string, body []byte) (uint64, error) {
		held.subj, held.body = subj, body
		return later, nil
	})
	// s3's key message is tombstoned after it was used: s3 is erased.
	send("s3", publishKey)
	subjs, err := eventlog.KeySubjects(ctx, hubJS, eventlog.KeySubject("n2", seal.Token(ring, "s3"))+".>")
	if err != nil || len(subjs) != 1 {
		t.Fatalf("s3's key subjects %v: %v", subjs, err)
	}
	if _, err := publishKey(subjs[0], nil); err != nil {
		t.Fatal(err)
	}
	send("s4", publishKey)
	// s5's key message is on s6's key subject.
	send("s5", func(_ string, body []byte) (uint64, error) {
		return publishKey(eventlog.KeySubject("n2", seal.Token(ring, "s6"))+"."+eventlog.KeyID(body), body)
	})

	receiver := eventlog.NewCrypt(keyFile, "w1", true)
	gate := copyFromHubWith(t, ws, all, receiver)

	// s2's key message lies past the last PI_KEYS holds: it was never
	// stored (key messages are stored before the lines naming them), so
	// the envelope is forged and refused, not waited for; before, one such
	// line held back every line after it, of every node (an audit stalled
	// a team's copying with one 73-byte message).
	waitCount(t, all, 2) // s1, s4
	testenv.WaitFor(t, 30*time.Second, func() (bool, string) {
		by := gate.Stats().ByOrigin["n2"].ByReason
		return by[admit.Reason(eventlog.RejectErased)] == 1 && by[admit.Reason(eventlog.RejectMoved)] == 1 && by[admit.Reason(eventlog.RejectUndecryptable)] == 1, fmt.Sprintf("rejections %v", by)
	})
	if w := receiver.Status().CopyWaiting; w != "" {
		t.Errorf("copy still waiting: %q", w)
	}
	var sids []string
	err = eventlog.ReadFiltered(ctx, all.JetStream(), eventlog.AllStream, eventlog.AllPrefix+".>", 2, false, func(ev *eventlog.Event) error {
		sids = append(sids, ev.SID)
		return nil
	})
	if err != nil || strings.Join(sids, ",") != "s1,s4" {
		t.Fatalf("PI_ALL holds %v (%v), want s1, s4", sids, err)
	}
}

// TestCryptStatusWhileSealing: status answers while a seal waits for the
// hub to take a new key message (it holds the lock across that request,
// up to the publish timeout), with the state as the seal began.
func TestCryptStatusWhileSealing(t *testing.T) {
	ring := keyring.New(time.Now())
	keyFile := filepath.Join(t.TempDir(), "team-key.json")
	if err := keyring.Save(keyFile, ring); err != nil {
		t.Fatal(err)
	}
	c := eventlog.NewCrypt(keyFile, "n1", true)
	publishing, release := make(chan struct{}), make(chan struct{})
	kh := eventlog.KeyHub{
		Publish: func(string, []byte) (uint64, error) {
			close(publishing)
			<-release
			return 1, nil
		},
		Subjects: func(string) ([]string, error) { return nil, nil },
	}
	sealed := make(chan error, 1)
	go func() {
		l := mkLines(1, 50, "s1")[0]
		l.SrcSeq = 1
		_, _, err := eventlog.SealLine(c, "s1", &l, kh)
		sealed <- err
	}()
	<-publishing
	got := make(chan eventlog.CryptStatus, 1)
	go func() { got <- c.Status() }()
	select {
	case st := <-got:
		if st.CurrentKey != ring.Current || st.ForwardWaiting != "" {
			t.Errorf("status while sealing: %+v", st)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("status waited for the key message's publish")
	}
	close(release)
	if err := <-sealed; err != nil {
		t.Fatal(err)
	}
}

// TestAutoFailsClosedOnABrokenKeyFile: under PISYNC_ENCRYPT=auto, no
// keyring file means lines go in clear, but a keyring file that is there
// and cannot be read (a mode too open, a damaged file) holds them back, as
// on does, and status says why. Before, auto sent every line in clear,
// sessions sealed until then included, and said nothing.
func TestAutoFailsClosedOnABrokenKeyFile(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "team-key.json")
	if subj, sealed, err := eventlog.HubSubject(eventlog.NewCrypt(keyFile, "n1", false), "s1"); err != nil || sealed || subj != eventlog.UpSubject("n1", "s1") {
		t.Fatalf("auto without a keyring: %q %v %v, want in clear", subj, sealed, err)
	}
	for name, breakIt := range map[string]func() error{
		"mode":    func() error { return os.Chmod(keyFile, 0o644) },
		"damaged": func() error { return os.WriteFile(keyFile, []byte("{not a keyring"), 0o600) },
	} {
		t.Run(name, func(t *testing.T) {
			os.Remove(keyFile)
			if err := keyring.Save(keyFile, keyring.New(time.Now())); err != nil {
				t.Fatal(err)
			}
			if _, sealed, err := eventlog.HubSubject(eventlog.NewCrypt(keyFile, "n1", false), "s1"); err != nil || !sealed {
				t.Fatalf("auto with a keyring: sealed %v, %v", sealed, err)
			}
			if err := breakIt(); err != nil {
				t.Fatal(err)
			}
			c := eventlog.NewCrypt(keyFile, "n1", false)
			_, _, err := eventlog.HubSubject(c, "s1")
			if !errors.Is(err, eventlog.ErrNoTeamKey) {
				t.Fatalf("auto with a keyring file it cannot read: %v, want ErrNoTeamKey", err)
			}
			if st := c.Status(); st.KeyError == "" || st.ForwardWaiting == "" {
				t.Errorf("status: %+v", st)
			}
		})
	}
}

// TestKeyringOfAnotherTeamUnderARunningDaemon: a keyring of another team
// put in the key file's place while the daemon runs is taken (the right
// team's, for a machine set up with a wrong one), and said: in the log and
// in status, with what it means. Before, the daemon sealed on for the new
// team without a word (a keyring made by key init after the file was moved
// away), and its teammates could open none of it.
func TestKeyringOfAnotherTeamUnderARunningDaemon(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "team-key.json")
	ours := keyring.New(time.Now())
	if err := keyring.Save(keyFile, ours); err != nil {
		t.Fatal(err)
	}
	var log testenv.LogBuffer
	c := eventlog.NewCrypt(keyFile, "n1", true)
	c.SetLogger(log.Logger())
	os.Remove(keyFile)
	theirs := keyring.New(time.Now())
	if err := keyring.Save(keyFile, theirs); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 10*time.Second, func() (bool, string) {
		st := c.Status()
		return st.Team == theirs.Team && strings.Contains(st.TeamChanged, "from team "+ours.Team+" to team "+theirs.Team), fmt.Sprintf("status %+v", st)
	})
	if subj, sealed, err := eventlog.HubSubject(c, "s1"); err != nil || !sealed || subj != eventlog.UpPrefix+".n1."+seal.Token(theirs, "s1") {
		t.Fatalf("sealed under %q (%v, %v), want team %s's token", subj, sealed, err, theirs.Team)
	}
	if !strings.Contains(log.String(), "another team's keyring") {
		t.Errorf("nothing logged:\n%s", log.String())
	}
}
