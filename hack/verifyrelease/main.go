// Command verifyrelease checks a release directory (make release's dist/)
// as a user would before trusting it: every checksum in checksums.txt holds
// and it lists every file; each archive holds its binary and the LICENSE and
// nothing else; each binary was built for the platform its archive names
// (its own build information) and, where this machine runs it, prints the
// release's version; each SBOM is CycloneDX for that version naming the
// Kubernetes modules linked in; the chart carries the version; and the krew
// manifest names every kubectl-berth archive with its sha256.
//
//	go run ./hack/verifyrelease -version v0.1.0 dist
package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/berth-scheduler/berth/hack/internal/filehash"
)

// archive is one release archive, read whole.
type archive struct {
	path, binary, os, arch string
	files                  map[string][]byte
}

var archiveRE = regexp.MustCompile(`^(berth-scheduler|kubectl-berth)_(v[^_]+)_([a-z0-9]+)_([a-z0-9]+)\.tar\.gz$`)

// check returns every fault of dir as a release of version.
func check(dir, version, goVersion string) (int, error) {
	var errs []error
	sums, err := checkSums(dir)
	if err != nil {
		return 0, err
	}
	paths, _ := filepath.Glob(filepath.Join(dir, "*.tar.gz"))
	if len(paths) == 0 {
		return 0, fmt.Errorf("no archives in %s", dir)
	}
	for _, p := range paths {
		if err := checkArchive(p, version, goVersion); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, checkChart(dir, version), checkKrew(dir, version, sums))
	return len(paths), errors.Join(errs...)
}

// checkSums verifies checksums.txt (sha256sum's format) against dir's files
// and returns the sums by file.
func checkSums(dir string) (map[string]string, error) {
	f, err := os.Open(filepath.Join(dir, "checksums.txt"))
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	sums := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok || len(sum) != 64 {
			return nil, fmt.Errorf("checksums.txt: %q is not sha256sum's <sum>  <file>", sc.Text())
		}
		sums[name] = sum
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	var errs []error
	var present []string
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "checksums.txt" {
			return nil
		}
		present = append(present, rel)
		got, err := filehash.SHA256(p)
		if err != nil {
			return err
		}
		if want, ok := sums[rel]; !ok {
			errs = append(errs, fmt.Errorf("checksums.txt does not list %s", rel))
		} else if got != want {
			errs = append(errs, fmt.Errorf("%s: sha256 %s, checksums.txt says %s", rel, got, want))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for name := range sums {
		if !slices.Contains(present, name) {
			errs = append(errs, fmt.Errorf("checksums.txt lists %s, which is not in %s", name, dir))
		}
	}
	return sums, errors.Join(errs...)
}

func checkArchive(path, version, goVersion string) error {
	m := archiveRE.FindStringSubmatch(filepath.Base(path))
	if m == nil || m[2] != version {
		return fmt.Errorf("%s: not <berth-scheduler|kubectl-berth>_%s_<os>_<arch>.tar.gz", path, version)
	}
	a := archive{path: path, binary: m[1], os: m[3], arch: m[4]}
	if a.os == "windows" {
		a.binary += ".exe"
	}
	var err error
	if a.files, err = readTarGz(path); err != nil {
		return err
	}
	names := make([]string, 0, len(a.files))
	for n := range a.files {
		names = append(names, n)
	}
	sort.Strings(names)
	if want := []string{"LICENSE", a.binary}; !slices.Equal(names, want) {
		return fmt.Errorf("%s holds %v, not %v", path, names, want)
	}
	bin := a.files[a.binary]
	info, err := buildinfo.Read(bytes.NewReader(bin))
	if err != nil {
		return fmt.Errorf("%s: %s has no Go build information: %w", path, a.binary, err)
	}
	if goVersion != "" && info.GoVersion != goVersion {
		return fmt.Errorf("%s: %s was built with %s, not go.mod's toolchain %s", path, a.binary, info.GoVersion, goVersion)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	if settings["GOOS"] != a.os || settings["GOARCH"] != a.arch || settings["CGO_ENABLED"] != "0" || settings["-trimpath"] != "true" {
		return fmt.Errorf("%s: %s was built with GOOS=%s GOARCH=%s CGO_ENABLED=%s -trimpath=%s, not for %s/%s, static, -trimpath",
			path, a.binary, settings["GOOS"], settings["GOARCH"], settings["CGO_ENABLED"], settings["-trimpath"], a.os, a.arch)
	}
	if a.os == runtime.GOOS && a.arch == runtime.GOARCH {
		if err := checkRuns(a, version); err != nil {
			return err
		}
	}
	sum := sha256.Sum256(bin)
	return checkSBOM(path+".sbom.cdx.json", version, a.os, a.arch, hex.EncodeToString(sum[:]))
}

// checkRuns runs a binary this machine can run and looks for the version in
// what it prints.
func checkRuns(a archive, version string) error {
	dir, err := os.MkdirTemp("", "verifyrelease")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	exe := filepath.Join(dir, a.binary)
	if err := os.WriteFile(exe, a.files[a.binary], 0o755); err != nil {
		return err
	}
	arg := "--version"
	if strings.HasPrefix(a.binary, "kubectl-berth") {
		arg = "version"
	}
	out, err := exec.Command(exe, arg).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %s %s: %w (%q)", a.path, a.binary, arg, err, out)
	}
	if !bytes.Contains(out, []byte(version)) {
		return fmt.Errorf("%s: %s %s printed %q, without %s", a.path, a.binary, arg, out, version)
	}
	return nil
}

// sbom is the part of a CycloneDX BOM checked here.
type sbom struct {
	BOMFormat   string `json:"bomFormat"`
	SpecVersion string `json:"specVersion"`
	Metadata    struct {
		Component struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"component"`
		Properties []struct {
			Name  string `json:"name"`
			Value string `json:"value"`
		} `json:"properties"`
	} `json:"metadata"`
	Components []struct {
		PURL   string `json:"purl"`
		Hashes []struct {
			Alg     string `json:"alg"`
			Content string `json:"content"`
		} `json:"hashes"`
	} `json:"components"`
}

// checkSBOM checks the SBOM of the binary whose sha256 is binSum, built
// for goos/goarch: its version, the binary's hash (cyclonedx-gomod's
// cdx:gomod:binary:hash:SHA-256 property), and the modules with their platform.
func checkSBOM(path, version, goos, goarch, binSum string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("the archive's SBOM: %w", err)
	}
	var b sbom
	if err := json.Unmarshal(raw, &b); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if b.BOMFormat != "CycloneDX" || b.SpecVersion == "" || b.Metadata.Component.Version != version {
		return fmt.Errorf("%s: bomFormat %q, specVersion %q, component version %q: not a CycloneDX SBOM of %s",
			path, b.BOMFormat, b.SpecVersion, b.Metadata.Component.Version, version)
	}
	hashOK := false
	for _, p := range b.Metadata.Properties {
		hashOK = hashOK || p.Name == "cdx:gomod:binary:hash:SHA-256" && p.Value == binSum
	}
	if !hashOK {
		return fmt.Errorf("%s: no binary hash property of %s: the SBOM is not of this archive's binary", path, binSum)
	}
	platform := "goarch=" + goarch + "&goos=" + goos
	k8s, hashed := 0, 0
	for _, c := range b.Components {
		if !strings.Contains(c.PURL, platform) {
			return fmt.Errorf("%s: component %s is not for %s/%s", path, c.PURL, goos, goarch)
		}
		if strings.HasPrefix(c.PURL, "pkg:golang/k8s.io/") {
			k8s++
		}
		if len(c.Hashes) > 0 {
			hashed++
		}
	}
	if k8s == 0 || hashed == 0 {
		return fmt.Errorf("%s: %d components, %d of k8s.io modules, %d with hashes: not the binary's modules", path, len(b.Components), k8s, hashed)
	}
	return nil
}

func checkChart(dir, version string) error {
	path := filepath.Join(dir, "berth-"+strings.TrimPrefix(version, "v")+".tgz")
	files, err := readTarGz(path)
	if err != nil {
		return fmt.Errorf("the chart: %w", err)
	}
	var meta struct {
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(files["berth/Chart.yaml"], &meta); err != nil {
		return fmt.Errorf("%s: berth/Chart.yaml: %w", path, err)
	}
	if meta.Version != strings.TrimPrefix(version, "v") || meta.AppVersion != version {
		return fmt.Errorf("%s: version %q, appVersion %q; the release is %s", path, meta.Version, meta.AppVersion, version)
	}
	return nil
}

func checkKrew(dir, version string, sums map[string]string) error {
	raw, err := os.ReadFile(filepath.Join(dir, "berth.yaml"))
	if err != nil {
		return fmt.Errorf("the krew manifest: %w", err)
	}
	var m struct {
		Spec struct {
			Version   string `json:"version"`
			Platforms []struct {
				URI    string `json:"uri"`
				Sha256 string `json:"sha256"`
			} `json:"platforms"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(raw, &m); err != nil {
		return fmt.Errorf("berth.yaml: %w", err)
	}
	var errs []error
	if m.Spec.Version != version {
		errs = append(errs, fmt.Errorf("berth.yaml: version %q; the release is %s", m.Spec.Version, version))
	}
	named := map[string]string{}
	for _, p := range m.Spec.Platforms {
		// <base-url>/<version>/<archive>: the release's own directory.
		dir, file, _ := strings.Cut(p.URI[strings.Index(p.URI, "://")+3:], "/"+version+"/")
		if dir == "" || strings.Contains(file, "/") {
			errs = append(errs, fmt.Errorf("berth.yaml: uri %s is not <base-url>/%s/<archive>", p.URI, version))
			continue
		}
		named[file] = p.Sha256
	}
	for name, sum := range sums {
		if strings.HasPrefix(name, "kubectl-berth_") && strings.HasSuffix(name, ".tar.gz") && named[name] != sum {
			errs = append(errs, fmt.Errorf("berth.yaml: %s has sha256 %q, the archive %s", name, named[name], sum))
		}
	}
	if len(named) == 0 {
		errs = append(errs, errors.New("berth.yaml names no platform"))
	}
	return errors.Join(errs...)
}

func readTarGz(path string) (map[string][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	files := map[string][]byte{}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if h.Typeflag != tar.TypeReg {
			return nil, fmt.Errorf("%s: %s is not a regular file", path, h.Name)
		}
		if files[h.Name], err = io.ReadAll(tr); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", path, h.Name, err)
		}
	}
}

func main() {
	version := flag.String("version", "", "the release's version (v0.1.0)")
	goVersion := flag.String("go", "", "the Go every binary must be built with (go.mod's toolchain line, go1.27.3)")
	flag.Parse()
	if *version == "" || flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: verifyrelease -version VERSION [-go GOVERSION] DIST")
		os.Exit(2)
	}
	n, err := check(flag.Arg(0), *version, *goVersion)
	if err != nil {
		fmt.Fprintln(os.Stderr, "verifyrelease:", err)
		os.Exit(1)
	}
	fmt.Printf(">> verifyrelease: %s: %d archives, their binaries and SBOMs, the chart and the krew manifest check out\n", flag.Arg(0), n)
}
