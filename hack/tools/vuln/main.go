// Command vulncheck runs govulncheck (its library, golang.org/x/vuln/scan)
// on the packages named, against a Go vulnerability database, and fails when
// Berth's code reaches a vulnerable symbol, unless the advisory is accepted in
// the file -accepted names (an ID and, after it, why; # starts a comment).
// An accepted advisory that has a fixed release, or that the scan no longer
// finds, fails too: the list only ever holds what cannot be upgraded today.
//
//	vulncheck -db file:///path/to/db -accepted hack/vulncheck-accepted.txt ./...
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"golang.org/x/vuln/scan"
)

// The parts of govulncheck's JSON stream read here (its documented
// protocol: golang.org/x/vuln/internal/govulncheck, not importable).
type message struct {
	Config *struct {
		DB        string `json:"db"`
		GoVersion string `json:"go_version"`
	} `json:"config"`
	OSV *struct {
		ID      string `json:"id"`
		Summary string `json:"summary"`
	} `json:"osv"`
	Finding *struct {
		OSV          string `json:"osv"`
		FixedVersion string `json:"fixed_version"`
		Trace        []struct {
			Module   string `json:"module"`
			Version  string `json:"version"`
			Package  string `json:"package"`
			Function string `json:"function"`
		} `json:"trace"`
	} `json:"finding"`
}

// called is an advisory Berth's code reaches, with what it takes to leave it.
type called struct {
	id, summary, module, version, fixed string
}

func main() {
	db := flag.String("db", "https://vuln.go.dev", "the vulnerability database (govulncheck's -db)")
	acceptedFile := flag.String("accepted", "", "advisories accepted for now, one ID a line followed by the reason")
	flag.Parse()
	accepted, err := readAccepted(*acceptedFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "vulncheck:", err)
		os.Exit(2)
	}
	pr, pw := io.Pipe()
	cmd := scan.Command(context.Background(), append([]string{"-db", *db, "-format", "json"}, flag.Args()...)...)
	cmd.Stdout = pw
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "vulncheck:", err)
		os.Exit(2)
	}
	var found map[string]*called
	var goVersion string
	var readErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		found, goVersion, readErr = read(pr)
		_, _ = io.Copy(io.Discard, pr)
	}()
	runErr := cmd.Wait()
	_ = pw.Close()
	<-done
	if runErr != nil || readErr != nil {
		fmt.Fprintln(os.Stderr, "vulncheck: govulncheck:", errors.Join(runErr, readErr))
		os.Exit(2)
	}
	os.Exit(report(os.Stdout, found, accepted, goVersion, *db))
}

// read collects, from govulncheck's JSON stream, the advisories whose
// vulnerable symbols Berth's code calls (a finding whose trace starts at a
// function; the others are only imported or required).
func read(r io.Reader) (map[string]*called, string, error) {
	found := map[string]*called{}
	summaries := map[string]string{}
	var goVersion string
	dec := json.NewDecoder(r)
	for {
		var m message
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, "", err
		}
		switch {
		case m.Config != nil:
			goVersion = m.Config.GoVersion
		case m.OSV != nil:
			summaries[m.OSV.ID] = m.OSV.Summary
		case m.Finding != nil:
			f := m.Finding
			if len(f.Trace) == 0 || f.Trace[0].Function == "" {
				continue
			}
			if _, ok := found[f.OSV]; !ok {
				found[f.OSV] = &called{id: f.OSV, module: f.Trace[0].Module, version: f.Trace[0].Version, fixed: f.FixedVersion}
			}
		}
	}
	for id, c := range found {
		c.summary = summaries[id]
	}
	return found, goVersion, nil
}

// report prints what was found and returns the exit code: 0 when every
// called advisory is accepted and nothing accepted is stale, 3 (as
// govulncheck) otherwise.
func report(w io.Writer, found map[string]*called, accepted map[string]string, goVersion, db string) int {
	ids := make([]string, 0, len(found))
	for id := range found {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	code := 0
	fmt.Fprintf(w, "govulncheck with %s against %s: %d advisories reached from Berth's code\n", goVersion, db, len(ids))
	for _, id := range ids {
		c := found[id]
		fix := "no fixed release"
		if c.fixed != "" {
			fix = "fixed in " + c.fixed
		}
		why, ok := accepted[id]
		switch {
		case ok && c.fixed == "":
			fmt.Fprintf(w, "  accepted %s (%s@%s, %s): %s\n    because: %s\n", id, c.module, c.version, fix, c.summary, why)
		case ok:
			code = 3
			fmt.Fprintf(w, "  FAIL %s (%s@%s) is accepted but now %s: upgrade, and drop it from the accepted list\n", id, c.module, c.version, fix)
		default:
			code = 3
			fmt.Fprintf(w, "  FAIL %s (%s@%s, %s): %s\n", id, c.module, c.version, fix, c.summary)
		}
	}
	var stale []string
	for id := range accepted {
		if found[id] == nil {
			stale = append(stale, id)
		}
	}
	sort.Strings(stale)
	for _, id := range stale {
		code = 3
		fmt.Fprintf(w, "  FAIL %s is accepted but no longer found: drop it from the accepted list\n", id)
	}
	return code
}

// readAccepted reads "ID reason..." lines; # starts a comment.
func readAccepted(path string) (map[string]string, error) {
	accepted := map[string]string{}
	if path == "" {
		return accepted, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for n := 1; s.Scan(); n++ {
		line := strings.TrimSpace(s.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		id, why, _ := strings.Cut(line, " ")
		if strings.TrimSpace(why) == "" {
			return nil, fmt.Errorf("%s:%d: %s has no reason", path, n, id)
		}
		accepted[id] = strings.TrimSpace(why)
	}
	return accepted, s.Err()
}
