package main

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func archives(t *testing.T, version string, platforms ...string) []string {
	t.Helper()
	dir := t.TempDir()
	var paths []string
	for _, p := range platforms {
		path := filepath.Join(dir, "kubectl-berth_"+version+"_"+strings.ReplaceAll(p, "/", "_")+".tar.gz")
		if err := os.WriteFile(path, []byte(p), 0o600); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, path)
	}
	return paths
}

func TestBuildFollowsKrewRules(t *testing.T) {
	platforms := []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64", "windows/amd64"}
	m, err := build("v0.1.0", "https://github.com/berth-scheduler/berth/releases/download", archives(t, "v0.1.0", platforms...))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Spec.Platforms) != len(platforms) {
		t.Fatalf("%d platforms, want %d", len(m.Spec.Platforms), len(platforms))
	}
	for _, p := range m.Spec.Platforms {
		if p.Selector.MatchLabels["os"] == "windows" && p.Bin != "kubectl-berth.exe" {
			t.Errorf("windows bin %q", p.Bin)
		}
		if !strings.HasPrefix(p.URI, "https://github.com/berth-scheduler/berth/releases/download/v0.1.0/kubectl-berth_v0.1.0_") {
			t.Errorf("uri %q", p.URI)
		}
		if !sha256RE.MatchString(p.Sha256) {
			t.Errorf("sha256 %q", p.Sha256)
		}
	}
	// Each archive's sum is of its own bytes (the test wrote the platform).
	for _, p := range m.Spec.Platforms {
		sum := sha256.Sum256([]byte(p.Selector.MatchLabels["os"] + "/" + p.Selector.MatchLabels["arch"]))
		if want := hex.EncodeToString(sum[:]); p.Sha256 != want {
			t.Errorf("%s: sha256 %s, want %s", p.URI, p.Sha256, want)
		}
	}
}

func TestValidateRefuses(t *testing.T) {
	good := func() *Manifest {
		m, err := build("v0.1.0", "https://example.com", archives(t, "v0.1.0", "linux/amd64"))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	for name, tc := range map[string]struct {
		edit func(*Manifest)
		want string
	}{
		"no leading v":       {func(m *Manifest) { m.Spec.Version = "0.1.0" }, "semantic version"},
		"short sum":          {func(m *Manifest) { m.Spec.Platforms[0].Sha256 = "abc" }, "sha256"},
		"upper-case sum":     {func(m *Manifest) { m.Spec.Platforms[0].Sha256 = strings.ToUpper(m.Spec.Platforms[0].Sha256) }, "sha256"},
		"http":               {func(m *Manifest) { m.Spec.Platforms[0].URI = "http://example.com/a.tar.gz" }, "https"},
		"no selector":        {func(m *Manifest) { m.Spec.Platforms[0].Selector.MatchLabels = nil }, "os and arch"},
		"unknown key":        {func(m *Manifest) { m.Spec.Platforms[0].Selector.MatchLabels["distro"] = "debian" }, "distro"},
		"bin not installed":  {func(m *Manifest) { m.Spec.Platforms[0].Bin = "other" }, "not among the files"},
		"bin with a path":    {func(m *Manifest) { m.Spec.Platforms[0].Bin = "./bin/kubectl-berth" }, "file name"},
		"two-line short":     {func(m *Manifest) { m.Spec.ShortDescription = "a\nb" }, "one non-empty line"},
		"twice the platform": {func(m *Manifest) { m.Spec.Platforms = append(m.Spec.Platforms, m.Spec.Platforms[0]) }, "a second platform"},
		"no platforms":       {func(m *Manifest) { m.Spec.Platforms = nil }, "no platforms"},
	} {
		m := good()
		tc.edit(m)
		err := validate(m)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", name, err, tc.want)
		}
	}
	if _, err := build("v0.1.0", "https://example.com", archives(t, "v0.2.0", "linux/amd64")); err == nil {
		t.Error("an archive of another version was accepted")
	}
}
