package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/pisyncd/pisyncd/config"
	"github.com/pisyncd/pisyncd/projection"
)

// lsCommand prints the session catalog, newest first: from the running
// daemon's memory, else read from the pi_proj bucket.
func lsCommand(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("ls", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	asJSON := fs.Bool("json", false, "print the catalog as a JSON array")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		return fmt.Errorf("%w: pisyncd ls [--json]", errUsage)
	}
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	entries, err := fetchCatalog(ctx, cfg)
	if err != nil {
		return err
	}
	if *asJSON {
		if entries == nil {
			entries = []projection.CatalogEntry{}
		}
		return json.NewEncoder(stdout).Encode(entries)
	}
	return printCatalog(stdout, entries)
}

func fetchCatalog(ctx context.Context, cfg *config.Config) ([]projection.CatalogEntry, error) {
	var entries []projection.CatalogEntry
	err := askDaemon(ctx, cfg, "/ls", func(body io.Reader) error {
		if err := json.NewDecoder(body).Decode(&entries); err != nil {
			return fmt.Errorf("ls: %w", err)
		}
		return nil
	}, func(d *Daemon) error {
		// No daemon: read what the last run left in the bucket.
		var err error
		entries, err = projection.OpenCatalog(ctx, d.log.JetStream())
		return err
	})
	return entries, err
}

func printCatalog(w io.Writer, entries []projection.CatalogEntry) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "UPDATED\tSESSION\tENTRIES\tTOKENS\tCOST\tNODES\tNAME / CWD")
	for _, e := range entries {
		label := e.Name
		if label == "" {
			label = e.Cwd
		}
		if e.Deleted {
			label += " (deleted)"
		}
		if e.Error != "" {
			label += " (unreadable: " + e.Error + ")"
		}
		for _, c := range e.Collisions {
			label += fmt.Sprintf(" (entry %s claimed by %s and %s)", c.ID, c.Nodes[0], c.Nodes[1])
		}
		nodes := fmt.Sprint(len(e.Nodes))
		if len(e.Nodes) == 1 {
			nodes = e.Nodes[0]
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.0f\t%.4f\t%s\t%s\n", orDash(e.Updated), e.SessionID, e.Entries, e.Tokens, e.Cost, nodes, label)
	}
	return tw.Flush()
}
