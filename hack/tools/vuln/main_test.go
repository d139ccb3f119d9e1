package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A stream as govulncheck -format json writes it: one advisory called, one
// only imported (no function at the top of its trace).
const stream = `{"config":{"protocol_version":"v1.0.0","db":"file:///db","go_version":"go1.27.3"}}
{"osv":{"id":"GO-1","summary":"called"}}
{"osv":{"id":"GO-2","summary":"imported"}}
{"finding":{"osv":"GO-1","fixed_version":"v1.2.0","trace":[{"module":"example.com/m","version":"v1.1.0","package":"example.com/m/p","function":"F"},{"module":"github.com/berth-scheduler/berth","function":"main"}]}}
{"finding":{"osv":"GO-2","trace":[{"module":"example.com/n","version":"v0.1.0","package":"example.com/n/p"}]}}
`

func TestReportFailsOnWhatIsCalledUnlessAcceptedAndUnfixable(t *testing.T) {
	found, goVersion, err := read(strings.NewReader(stream))
	if err != nil {
		t.Fatal(err)
	}
	if goVersion != "go1.27.3" || len(found) != 1 || found["GO-1"] == nil || found["GO-1"].fixed != "v1.2.0" || found["GO-1"].summary != "called" {
		t.Fatalf("read: go %q, found %+v", goVersion, found)
	}
	for _, tc := range []struct {
		name     string
		accepted map[string]string
		fixed    string
		want     int
	}{
		{name: "called, fixable, not accepted", fixed: "v1.2.0", want: 3},
		{name: "called, fixable, accepted", accepted: map[string]string{"GO-1": "why"}, fixed: "v1.2.0", want: 3},
		{name: "called, no fix, not accepted", want: 3},
		{name: "called, no fix, accepted", accepted: map[string]string{"GO-1": "why"}, want: 0},
		{name: "accepted but not found", accepted: map[string]string{"GO-1": "why", "GO-9": "gone"}, want: 3},
	} {
		found["GO-1"].fixed = tc.fixed
		if got := report(io.Discard, found, tc.accepted, goVersion, "file:///db"); got != tc.want {
			t.Errorf("%s: exit %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestReadAcceptedNeedsAReason(t *testing.T) {
	path := filepath.Join(t.TempDir(), "accepted.txt")
	if err := os.WriteFile(path, []byte("# comment\n\nGO-1 kubelet code\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := readAccepted(path)
	if err != nil || got["GO-1"] != "kubelet code" || len(got) != 1 {
		t.Fatalf("readAccepted: %v, %v", got, err)
	}
	if err := os.WriteFile(path, []byte("GO-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readAccepted(path); err == nil || !strings.Contains(err.Error(), "no reason") {
		t.Fatalf("an ID without a reason: %v", err)
	}
}
