package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/pisyncd/pisyncd/config"
	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/keyring"
	"github.com/pisyncd/pisyncd/seal"
)

const keyUsage = "pisyncd key init [--new-team]|export|import [FILE]|status|rotate|token SESSION-ID [--json]"

// keyCommand manages the team key of end-to-end encryption (keyring):
// it works on the keyring file alone, so it needs no daemon; a running
// daemon reads the file again within a second of a change.
func keyCommand(args []string, stdout io.Writer) error {
	if len(args) == 0 || wantsHelp(args) {
		if len(args) == 0 {
			return &usageError{Msg: "key: missing subcommand", Usage: keyUsage}
		}
		return &helpRequest{Usage: keyUsage}
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("key "+sub, flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print JSON")
	var newTeam *bool
	if sub == "init" {
		newTeam = fs.Bool("new-team", false, "begin a new team even where the running daemon sees that this machine's team encrypts already")
	}
	want := 0
	switch sub {
	case "import":
		want = -1
	case "token":
		want = 1
	case "init", "export", "status", "rotate":
	default:
		return &usageError{Msg: fmt.Sprintf("key: unknown subcommand %q", sub), Usage: keyUsage}
	}
	if err := parseArgs(fs, reorder(args), keyUsage, want); err != nil {
		return err
	}
	if sub == "import" && fs.NArg() > 1 {
		return &usageError{Msg: "key import: one FILE at most", Usage: keyUsage}
	}
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	path := keyring.Path(cfg.StateDir, cfg.KeyFile)
	now := time.Now()
	var r *keyring.Ring
	switch sub {
	case "init":
		if _, err := os.Stat(path); err == nil {
			return fmt.Errorf("key init: %s already holds a team key (pisyncd key status; remove it first to start a new team)", path)
		}
		if why := teamEncrypts(cfg); why != "" && !*newTeam {
			// A newcomer's key init where key import was meant sealed
			// their sessions for a team of one, which no teammate could
			// ever read, and nothing said so (a probe, 2026-12-07).
			return fmt.Errorf("key init: %s. Import the team's key instead: pisyncd key export on a teammate's machine, pisyncd key import here. key init begins a new team, whose lines none of the others can read: add --new-team if that is what you mean", why)
		}
		r = keyring.New(now)
		if err := keyring.Save(path, r); err != nil {
			return err
		}
		if !*asJSON {
			fmt.Fprintf(stdout, "created team %s, key %s, in %s\n", r.Team, r.Current, path)
			fmt.Fprintln(stdout, "copy it to the team's other machines: pisyncd key export here, pisyncd key import there")
			return nil
		}
	case "export":
		if r, err = keyring.Load(path); err != nil {
			return err
		}
		if *asJSON {
			return writeJSONTo(stdout, map[string]string{"team": r.Team, "export": keyring.Export(r)})
		}
		_, err = io.WriteString(stdout, keyring.Export(r))
		return err
	case "import":
		if r, err = importKey(path, fs.Arg(0), stdout, *asJSON); err != nil {
			return err
		}
	case "rotate":
		if r, err = keyring.Load(path); err != nil {
			return err
		}
		if len(r.Keys) >= keyring.MaxKeys {
			// One more could not be exported, so no other machine could
			// get it.
			return fmt.Errorf("key rotate: team %s's keyring holds %d keys, the most it can: to renew the keys, start a new team (pisyncd key init in a fresh PISYNC_KEY_FILE, key import of it on every machine)", r.Team, len(r.Keys))
		}
		k := r.Rotate(now)
		if err := keyring.Save(path, r); err != nil {
			return err
		}
		if !*asJSON {
			fmt.Fprintf(stdout, "team %s: new key %s seals everything from now on; the %d older key(s) stay to open what they sealed\n", r.Team, k.ID, len(r.Keys)-1)
			fmt.Fprintln(stdout, "give it to the machines that stay in the team: pisyncd key export here, pisyncd key import there")
			return nil
		}
	case "status":
		if r, err = keyring.Load(path); err != nil {
			if errors.Is(err, keyring.ErrNoKeyring) && *asJSON {
				// The answer on stdout, and the exit status of the text
				// form: a script may test either.
				if jerr := writeJSONTo(stdout, map[string]any{"path": path, "present": false}); jerr != nil {
					return jerr
				}
			}
			return err
		}
	case "token":
		// A session id as pi writes it and pisyncd carries it: an empty
		// or over-long one names no session, and its token matched none.
		if sid := fs.Arg(0); sid == "" {
			return &usageError{Msg: "key token: the session id is empty (pisyncd ls lists the sessions)", Usage: keyUsage}
		} else if err := eventlog.CheckSID(sid); err != nil {
			return fmt.Errorf("key token: %w: no session has this id", err)
		}
		if r, err = keyring.Load(path); err != nil {
			return err
		}
		tok := seal.Token(r, fs.Arg(0))
		if *asJSON {
			return writeJSONTo(stdout, map[string]string{"session": fs.Arg(0), "token": tok})
		}
		fmt.Fprintln(stdout, tok)
		return nil
	}
	return printKeyStatus(stdout, path, r, *asJSON)
}

// maxExport bounds what key import reads: an export block is a few hundred
// bytes a key; a file that is not one (/dev/zero, a log) is not read whole.
const maxExport = 1 << 20

// readExport reads an export block from file ("" or "-": stdin), at most
// maxExport bytes.
func readExport(file string) ([]byte, error) {
	in := io.Reader(os.Stdin)
	if file != "" && file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		in = f
	}
	b, err := io.ReadAll(io.LimitReader(in, maxExport+1))
	if err == nil && len(b) > maxExport {
		err = fmt.Errorf("%s is larger than %d bytes, more than any export block: give the file `pisyncd key export` wrote", cmp.Or(file, "stdin"), maxExport)
	}
	return b, err
}

// importKey reads an export block from file ("" or "-": stdin) into the
// keyring at path, merging with the keys already there.
func importKey(path, file string, stdout io.Writer, asJSON bool) (*keyring.Ring, error) {
	b, err := readExport(file)
	if err != nil {
		return nil, fmt.Errorf("key import: %w", err)
	}
	in, err := keyring.Import(string(b))
	if err != nil {
		return nil, fmt.Errorf("key import: %w", err)
	}
	r, err := keyring.Load(path)
	switch {
	case errors.Is(err, keyring.ErrNoKeyring):
		r = in
	case err != nil:
		// Not written over: it may hold keys found nowhere else.
		return nil, fmt.Errorf("key import: the keyring %s cannot be read (%w): mend it (its mode: chmod 600), or move it away, keeping a copy, and import again", path, err)
	default:
		changed, err := r.Merge(in, time.Now())
		if err != nil {
			return nil, fmt.Errorf("key import: %w", err)
		}
		if r.Current != in.Current && !asJSON {
			// The user may have imported it to switch keys (a rotation
			// meant to lock a machine out): say why it did not.
			fmt.Fprintf(stdout, "the block's current key %s stays a spare here (it opens what it sealed): this machine's current key %s is newer, made by a rotation the block's machine has not imported (or the block's key is dated ahead of this machine's clock); give this machine's keys to it: pisyncd key export here, pisyncd key import there\n", in.Current, r.Current)
		}
		if !changed {
			if !asJSON {
				fmt.Fprintln(stdout, "nothing new: every key of that block is already here")
			}
			return r, nil
		}
	}
	if err := keyring.Save(path, r); err != nil {
		return nil, err
	}
	if !asJSON {
		fmt.Fprintf(stdout, "imported team %s into %s; a running daemon uses it within a second\n", r.Team, path)
	}
	return r, nil
}

type keyStatus struct {
	Path    string    `json:"path"`
	Present bool      `json:"present"`
	Team    string    `json:"team"`
	Current string    `json:"currentKey"`
	Keys    []keyInfo `json:"keys"`
}

type keyInfo struct {
	ID      string    `json:"id"`
	Created time.Time `json:"created"`
}

func printKeyStatus(w io.Writer, path string, r *keyring.Ring, asJSON bool) error {
	st := keyStatus{Path: path, Present: true, Team: r.Team, Current: r.Current}
	for _, k := range r.Keys {
		st.Keys = append(st.Keys, keyInfo{ID: k.ID, Created: k.Created})
	}
	if asJSON {
		return writeJSONTo(w, st)
	}
	fmt.Fprintf(w, "team key file  %s\nteam           %s\n", path, r.Team)
	for _, k := range st.Keys {
		mark := ""
		if k.ID == r.Current {
			mark = "  (current: seals new data)"
		}
		fmt.Fprintf(w, "key            %s  created %s%s\n", k.ID, k.Created.Format(time.RFC3339), mark)
	}
	return nil
}

func writeJSONTo(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// teamEncrypts says how the running daemon knows that this machine's team
// encrypts already ("" when it does not, or no daemon runs to ask): the
// hub holds its team's key messages, or sessions sealed under keys this
// machine lacks are held here.
func teamEncrypts(cfg *config.Config) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := fetchStatus(ctx, cfg)
	switch {
	case err != nil:
		return ""
	case st.Encryption != nil && st.Encryption.HubSealed != "":
		return "this machine's team encrypts already: " + st.Encryption.HubSealed
	case st.Downloader != nil && st.Downloader.Held > 0:
		return fmt.Sprintf("this machine's team encrypts already: %d of its sessions are held here, sealed under a team key this machine lacks", st.Downloader.Held)
	}
	return ""
}
