package embedded

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/nats-io/nkeys"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/internal/fsutil"
)

// Node is a workstation registered with the hub: its name (the node id it
// runs with, PISYNC_NODE_ID), its team (a NATS account: teams see nothing
// of each other) and the public half of its nkey. The seed stays with the
// workstation.
type Node struct {
	Name string `json:"name"`
	Team string `json:"team"`
	Nkey string `json:"nkey"`
}

var teamPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,63}$`) })

// DefaultTeam is the account of nodes registered without a team.
const DefaultTeam = "pisyncd"

// NodeExistsError is AddNode's refusal of a name already registered:
// registering it again would replace the key the workstation runs with.
type NodeExistsError struct{ Node Node }

func (e *NodeExistsError) Error() string {
	return fmt.Sprintf("node %s is registered already (team %s, key %s)", e.Node.Name, e.Node.Team, e.Node.Nkey)
}

// AddNode registers a new node in dir (0700) and returns its nkey seed, to
// be handed to the workstation (PISYNC_HUB_NKEY). A name registered
// already is refused (*NodeExistsError): ReplaceNode replaces its key.
func AddNode(dir, name, team string) ([]byte, error) {
	seed, _, err := addNode(dir, name, team, false)
	return seed, err
}

// ReplaceNode registers node name with a new key and team, whether or not
// it is registered, and returns the registration it replaced (nil if
// none): the old seed stops working once the hub reloads, and a node moved
// to another team leaves its lines in the old team's PI_HUB. Team "" keeps
// the node's team: a key replaced because its seed leaked must not move
// the node into the default team, whose sessions it would then read.
func ReplaceNode(dir, name, team string) ([]byte, *Node, error) {
	return addNode(dir, name, team, true)
}

// CheckNodeName refuses a name no node id can be.
func CheckNodeName(name string) error {
	if !eventlog.ValidNodeID(name) {
		return fmt.Errorf("node name %q: want 1 to 64 characters of [A-Za-z0-9_-] (the node's PISYNC_NODE_ID)", name)
	}
	return nil
}

func addNode(dir, name, team string, replace bool) ([]byte, *Node, error) {
	if err := CheckNodeName(name); err != nil {
		return nil, nil, err
	}
	files, err := readNodes(dir)
	if err != nil {
		return nil, nil, err
	}
	var old *nodeFile
	if i := slices.IndexFunc(files, func(f nodeFile) bool { return f.Name == name }); i >= 0 {
		old = &files[i]
		if !replace {
			return nil, nil, &NodeExistsError{old.Node}
		}
	}
	if team == "" {
		team = DefaultTeam
		if old != nil {
			team = old.Team
		}
	}
	if !teamPattern().MatchString(team) || team == "SYS" || team == "$G" {
		return nil, nil, fmt.Errorf("team %q: want a letter, then up to 63 of [A-Za-z0-9_-]", team)
	}
	kp, err := nkeys.CreateUser()
	if err != nil {
		return nil, nil, err
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return nil, nil, err
	}
	seed, err := kp.Seed()
	if err != nil {
		return nil, nil, err
	}
	// Registered with sudo into the hub's state dir, the folder and the
	// file take its owner: the hub, running as a user of its own, reads
	// them at its reload.
	if err := fsutil.MkdirAllKeepOwner(dir); err != nil {
		return nil, nil, err
	}
	path := filepath.Join(dir, name+".json")
	b, _ := json.MarshalIndent(Node{Name: name, Team: team, Nkey: pub}, "", "  ")
	if err := fsutil.ReplaceFileKeepOwner(path, append(b, '\n')); err != nil {
		return nil, nil, err
	}
	if old == nil {
		return seed, nil, nil
	}
	// A registration under another file name goes, or the name would be
	// registered twice (a reload in between fails and keeps the old nodes).
	if old.path != path {
		if err := os.Remove(old.path); err != nil {
			return nil, nil, fmt.Errorf("replace node: %w", err)
		}
	}
	return seed, &old.Node, nil
}

// CreateSecretFile creates a new file for a secret (a node's seed), 0600.
// It refuses a path that exists, a symbolic link included (O_EXCL does not
// follow links; O_NOFOLLOW says so twice): a file planted there beforehand
// with loose permissions, or a link pointing elsewhere, would hand the
// secret to whoever planted it. Write through the returned file: opening
// the path again could open what someone put there since.
func CreateSecretFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("%s exists (or a link was planted there): refusing to write a secret into it; remove it or choose another file", path)
	}
	if err != nil {
		return nil, fmt.Errorf("secret file: %w", err)
	}
	return f, nil
}

// WriteSeed writes seed into f (from CreateSecretFile), syncs and closes it;
// on failure it removes the file.
func WriteSeed(f *os.File, seed []byte) error {
	_, err := f.Write(append(seed, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("write seed: %w", err)
	}
	return nil
}

// LoadNodes reads every registration in dir.
func LoadNodes(dir string) ([]Node, error) {
	files, err := readNodes(dir)
	if err != nil || files == nil {
		return nil, err
	}
	nodes := make([]Node, len(files))
	for i, f := range files {
		nodes[i] = f.Node
	}
	return nodes, nil
}

// nodeFile is a registration and the file that holds it.
type nodeFile struct {
	Node
	path string
}

// readNodes reads every registration in dir, sorted by name.
func readNodes(dir string) ([]nodeFile, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("nodes dir: %w", err)
	}
	var nodes []nodeFile
	seen := map[string]string{}  // name → its file
	byKey := map[string]string{} // nkey → the file that registers it
	// Each message names the file and the fix: the hub stops at start or
	// reload on any of them (a registration it cannot read is not left
	// out in silence), and a key two files hold made nats-server refuse
	// the generated configuration after part of the reload was applied.
	fix := "fix it or move it out of the folder, then reload the hub (pisyncd hub reload)"
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("nodes dir: %w", err)
		}
		var n Node
		if err := json.Unmarshal(b, &n); err != nil {
			return nil, fmt.Errorf("node file %s is no registration (%w): %s", path, err, fix)
		}
		if !eventlog.ValidNodeID(n.Name) || !teamPattern().MatchString(n.Team) || !nkeys.IsValidPublicUserKey(n.Nkey) {
			return nil, fmt.Errorf("node file %s: invalid name, team or nkey (pisyncd hub add-node writes them): %s", path, fix)
		}
		if other, ok := seen[n.Name]; ok {
			return nil, fmt.Errorf("node %s is registered twice, by %s and %s: remove one, then reload the hub (pisyncd hub reload)", n.Name, other, path)
		}
		if other, ok := byKey[n.Nkey]; ok {
			return nil, fmt.Errorf("node files %s and %s hold the same key: one key is one node; remove one, or give it a key of its own (pisyncd hub add-node NAME --replace), then reload the hub (pisyncd hub reload)", other, path)
		}
		seen[n.Name], byKey[n.Nkey] = path, path
		nodes = append(nodes, nodeFile{n, path})
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	return nodes, nil
}

// RemoveNode deletes node name's registration from dir and returns it. The
// node's key keeps working on a running hub until it reloads (SIGHUP, or
// the control socket's reload), which closes its connections. The file is
// found by the name it holds, not by its own name: AddNode's NAME.json is
// a habit, and a registration under another file name counts as well.
func RemoveNode(dir, name string) (Node, error) {
	files, err := readNodes(dir)
	if err != nil {
		return Node{}, err
	}
	i := slices.IndexFunc(files, func(f nodeFile) bool { return f.Name == name })
	if i < 0 {
		return Node{}, fmt.Errorf("node %q is not registered in %s (pisyncd hub nodes lists those that are)", name, dir)
	}
	if err := os.Remove(files[i].path); err != nil {
		return Node{}, fmt.Errorf("remove node: %w", err)
	}
	// The removal must outlive a crash: a hub started again would
	// otherwise let the node back in.
	d, err := os.Open(dir)
	if err != nil {
		return Node{}, fmt.Errorf("remove node: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return Node{}, fmt.Errorf("remove node: %w", err)
	}
	return files[i].Node, nil
}

// Permissions are a node's rights on the hub, seen from the hub: the
// subjects it may publish (except those in PublishDeny) and subscribe to.
type Permissions struct {
	Publish, PublishDeny, Subscribe []string
}

// NodePermissions are what node name may do on the hub: publish only its
// own events and key messages (pi.key.<name>.>, end-to-end encryption; a
// tombstone there replaces only its own), read a key message by sequence
// (JetStream's message API on PI_KEYS, not a direct get: hubNoDirect in
// eventlog) and list key subjects (stream info on PI_KEYS: subject names,
// which PI_HUB's subjects show anyway), and the JetStream API calls of
// its forwarder (stream info, a message of PI_HUB) and of its downloader, which may create,
// read from, look up and delete one consumer on PI_HUB, the one named
// after it (eventlog.HubConsumerName): no other name, so no durable of its
// choosing, and no other node's consumer; receive only replies on its own
// inbox prefix. The legacy durable-create API is denied outright.
func NodePermissions(name string) Permissions {
	api := "$JS." + HubDomain + ".API."
	cons := eventlog.HubConsumerName(name)
	return Permissions{
		Publish: []string{
			"pi.up." + name + ".>",
			"pi.key." + name + ".>",
			api + "STREAM.MSG.GET.PI_KEYS",
			api + "STREAM.INFO.PI_KEYS",
			api + "STREAM.INFO.PI_HUB",
			api + "STREAM.MSG.GET.PI_HUB",
			api + "CONSUMER.CREATE.PI_HUB." + cons,
			api + "CONSUMER.CREATE.PI_HUB." + cons + ".>",
			api + "CONSUMER.MSG.NEXT.PI_HUB." + cons,
			api + "CONSUMER.INFO.PI_HUB." + cons,
			api + "CONSUMER.DELETE.PI_HUB." + cons,
		},
		PublishDeny: []string{api + "CONSUMER.DURABLE.CREATE.>"},
		Subscribe:   []string{InboxPrefix(name) + ".>"},
	}
}

// InboxPrefix is node name's reply-subject prefix. A node's own prefix lets
// the hub grant it its replies without those of other nodes.
func InboxPrefix(name string) string { return eventlog.NodeInboxPrefix(name) }
