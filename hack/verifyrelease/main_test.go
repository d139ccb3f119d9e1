package main

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeDist writes files into a temp dir and a checksums.txt of them, then
// applies tamper (which may change files after the sums were taken).
func writeDist(t *testing.T, files map[string]string, tamper func(dir string)) string {
	t.Helper()
	dir := t.TempDir()
	var sums []string
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256([]byte(body))
		sums = append(sums, hex.EncodeToString(sum[:])+"  "+name)
	}
	if err := os.WriteFile(filepath.Join(dir, "checksums.txt"), []byte(strings.Join(sums, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if tamper != nil {
		tamper(dir)
	}
	return dir
}

func TestCheckSums(t *testing.T) {
	files := map[string]string{"a.tar.gz": "a", "sub/b.yaml": "m"}
	for _, tc := range []struct {
		name   string
		tamper func(dir string)
		want   string // "" for no error
	}{
		{name: "intact"},
		{name: "a file changed after its sum", tamper: func(dir string) {
			_ = os.WriteFile(filepath.Join(dir, "a.tar.gz"), []byte("b"), 0o644)
		}, want: "a.tar.gz: sha256"},
		{name: "a file the sums do not list", tamper: func(dir string) {
			_ = os.WriteFile(filepath.Join(dir, "extra.tgz"), []byte("x"), 0o644)
		}, want: "does not list extra.tgz"},
		{name: "a listed file missing", tamper: func(dir string) {
			_ = os.Remove(filepath.Join(dir, "sub", "b.yaml"))
		}, want: "lists sub/b.yaml, which is not in"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := checkSums(writeDist(t, files, tc.tamper))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("checkSums: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("checkSums: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

func TestCheckSBOM(t *testing.T) {
	const binSum = "3fd9"
	const good = `{"bomFormat":"CycloneDX","specVersion":"1.6","metadata":{"component":{"name":"scheduler","version":"v0.1.0"},
"properties":[{"name":"cdx:gomod:binary:hash:SHA-256","value":"3fd9"}]},
"components":[{"purl":"pkg:golang/k8s.io/api@v0.37.2?goarch=arm64&goos=linux&type=module","hashes":[{"alg":"SHA-256","content":"00"}]}]}`
	for _, tc := range []struct {
		name, body, version, want string
	}{
		{name: "the binary's SBOM", body: good, version: "v0.1.0"},
		{name: "another version's", body: good, version: "v0.2.0", want: "not a CycloneDX SBOM of v0.2.0"},
		{name: "not CycloneDX", body: `{"spdxVersion":"SPDX-2.3"}`, version: "v0.1.0", want: "not a CycloneDX SBOM"},
		{name: "no modules", body: strings.Replace(good, "k8s.io/api", "example.com/x", 1), version: "v0.1.0", want: "not the binary's modules"},
		{name: "another binary's", body: strings.Replace(good, `"value":"3fd9"`, `"value":"abcd"`, 1), version: "v0.1.0", want: "not of this archive's binary"},
		{name: "the build machine's platform", body: strings.Replace(good, "goarch=arm64", "goarch=amd64", 1), version: "v0.1.0", want: "is not for linux/arm64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "x.sbom.cdx.json")
			if err := os.WriteFile(p, []byte(tc.body), 0o644); err != nil {
				t.Fatal(err)
			}
			err := checkSBOM(p, tc.version, "linux", "arm64", binSum)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("checkSBOM: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("checkSBOM: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

func TestCheckKrewNeedsEveryArchiveSum(t *testing.T) {
	dir := t.TempDir()
	manifest := "spec:\n  version: v0.1.0\n  platforms:\n  - uri: https://x/v0.1.0/kubectl-berth_v0.1.0_linux_amd64.tar.gz\n    sha256: " + strings.Repeat("a", 64) + "\n"
	if err := os.WriteFile(filepath.Join(dir, "berth.yaml"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	sums := map[string]string{"kubectl-berth_v0.1.0_linux_amd64.tar.gz": strings.Repeat("a", 64)}
	if err := checkKrew(dir, "v0.1.0", sums); err != nil {
		t.Fatalf("checkKrew: %v", err)
	}
	sums["kubectl-berth_v0.1.0_darwin_arm64.tar.gz"] = strings.Repeat("b", 64)
	if err := checkKrew(dir, "v0.1.0", sums); err == nil || !strings.Contains(err.Error(), "darwin_arm64") {
		t.Fatalf("checkKrew with an archive the manifest lacks: %v", err)
	}
}
