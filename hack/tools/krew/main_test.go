package main

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// archives writes one fake archive per platform ("os/arch"), holding its
// platform's name, and returns their paths.
func archives(t *testing.T, version string, platforms ...string) []string {
	t.Helper()
	dir := t.TempDir()
	var paths []string
	for _, p := range platforms {
		goos, goarch, _ := strings.Cut(p, "/")
		path := filepath.Join(dir, "kubectl-berth_"+version+"_"+goos+"_"+goarch+".tar.gz")
		if err := os.WriteFile(path, []byte(p), 0o600); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, path)
	}
	return paths
}

// The manifest's content; krew's own validate-krew-manifest and an install
// with krew check it against krew's rules in make release.
func TestBuildNamesEachArchiveWithItsSum(t *testing.T) {
	platforms := []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64", "windows/amd64"}
	p, err := build("v0.1.0", "https://github.com/berth-scheduler/berth/releases/download", archives(t, "v0.1.0", platforms...))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Spec.Platforms) != len(platforms) {
		t.Fatalf("%d platforms, want %d", len(p.Spec.Platforms), len(platforms))
	}
	for _, pl := range p.Spec.Platforms {
		goos, goarch := pl.Selector.MatchLabels["os"], pl.Selector.MatchLabels["arch"]
		if (goos == "windows") != (pl.Bin == "kubectl-berth.exe") {
			t.Errorf("%s/%s: bin %q", goos, goarch, pl.Bin)
		}
		if !strings.HasPrefix(pl.URI, "https://github.com/berth-scheduler/berth/releases/download/v0.1.0/kubectl-berth_v0.1.0_"+goos+"_"+goarch) {
			t.Errorf("uri %q", pl.URI)
		}
		sum := sha256.Sum256([]byte(goos + "/" + goarch))
		if want := hex.EncodeToString(sum[:]); pl.Sha256 != want {
			t.Errorf("%s: sha256 %s, want %s", pl.URI, pl.Sha256, want)
		}
	}
	for _, cmd := range []string{"explain", "snapshot", "simulate", "validate"} {
		if !strings.Contains(p.Spec.Description, cmd) {
			t.Errorf("the description leaves out %s", cmd)
		}
	}
	if !strings.Contains(p.Spec.Caveats, "kubectl_complete-berth") {
		t.Error("the caveats leave out the completion shim")
	}
}

func TestBuildRefusesAnotherVersionsArchive(t *testing.T) {
	if _, err := build("v0.1.0", "https://example.com", archives(t, "v0.2.0", "linux/amd64")); err == nil {
		t.Error("an archive of another version was accepted")
	}
	if _, err := build("v0.1.0", "https://example.com", nil); err == nil {
		t.Error("a manifest without archives was written")
	}
}
