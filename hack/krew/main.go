// Command krew writes the krew plugin manifest of kubectl-berth
// (dist/berth.yaml in the release, published flat so that checksums.txt
// covers it; plugins/berth.yaml in krew's index) from the release's
// archives: one
// platform per archive named kubectl-berth_<version>_<os>_<arch>.tar.gz,
// each with its sha256 and the URI it is published at, and checks it
// against krew's rules before writing it (make release runs it).
//
//	go run ./hack/krew -version v0.1.0 -base-url URL -out dist/berth.yaml dist/kubectl-berth_*.tar.gz
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/berth-scheduler/berth/hack/internal/filehash"
)

// Manifest is krew's Plugin (krew.googlecontainertools.github.com/v1alpha2),
// the fields a plugin's manifest uses.
type Manifest struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Metadata   Metadata `json:"metadata"`
	Spec       Spec     `json:"spec"`
}

type Metadata struct {
	Name string `json:"name"`
}

type Spec struct {
	Version          string     `json:"version"`
	Homepage         string     `json:"homepage"`
	ShortDescription string     `json:"shortDescription"`
	Description      string     `json:"description"`
	Platforms        []Platform `json:"platforms"`
}

type Platform struct {
	Selector Selector   `json:"selector"`
	URI      string     `json:"uri"`
	Sha256   string     `json:"sha256"`
	Files    []FileOper `json:"files"`
	Bin      string     `json:"bin"`
}

type Selector struct {
	MatchLabels map[string]string `json:"matchLabels"`
}

type FileOper struct {
	From string `json:"from"`
	To   string `json:"to"`
}

var archiveRE = regexp.MustCompile(`^kubectl-berth_(v[^_]+)_([a-z0-9]+)_([a-z0-9]+)\.tar\.gz$`)

// build returns the manifest for the archives (paths), of version, published
// under baseURL.
func build(version, baseURL string, archives []string) (*Manifest, error) {
	m := &Manifest{
		APIVersion: "krew.googlecontainertools.github.com/v1alpha2",
		Kind:       "Plugin",
		Metadata:   Metadata{Name: "berth"},
		Spec: Spec{
			Version:          version,
			Homepage:         "https://github.com/berth-scheduler/berth",
			ShortDescription: "Explain Berth scheduler decisions",
			Description: "kubectl berth explain POD prints why the Berth scheduler placed a pod on its node,\n" +
				"or why it fits nowhere, per scheduler plugin, from the explanation Berth's\n" +
				"Explain plugin wrote on the pod.\n",
		},
	}
	for _, a := range archives {
		match := archiveRE.FindStringSubmatch(filepath.Base(a))
		if match == nil {
			return nil, fmt.Errorf("%s: not kubectl-berth_<version>_<os>_<arch>.tar.gz", a)
		}
		if match[1] != version {
			return nil, fmt.Errorf("%s: version %s, the manifest's is %s", a, match[1], version)
		}
		sum, err := filehash.SHA256(a)
		if err != nil {
			return nil, err
		}
		bin := "kubectl-berth"
		if match[2] == "windows" {
			bin += ".exe"
		}
		m.Spec.Platforms = append(m.Spec.Platforms, Platform{
			Selector: Selector{MatchLabels: map[string]string{"os": match[2], "arch": match[3]}},
			URI:      strings.TrimSuffix(baseURL, "/") + "/" + version + "/" + filepath.Base(a),
			Sha256:   sum,
			Files:    []FileOper{{From: bin, To: "."}, {From: "LICENSE", To: "."}},
			Bin:      bin,
		})
	}
	sort.Slice(m.Spec.Platforms, func(i, j int) bool { return m.Spec.Platforms[i].URI < m.Spec.Platforms[j].URI })
	return m, validate(m)
}

var (
	versionRE = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)
	sha256RE  = regexp.MustCompile(`^[0-9a-f]{64}$`)
	nameRE    = regexp.MustCompile(`^[\w-]+$`)
)

// validate applies krew's rules for a plugin manifest (krew's
// internal/index/validation.ValidatePlugin: apiVersion and kind, a name of
// word characters and dashes, a one-line short description, a semantic
// version with a leading v, at least one platform, each with a uri, a sha256
// of 64 lowercase hex digits, a bin, file operations with from and to, and a
// selector on os and arch only), and Berth's own on top: https URIs, one
// platform per os/arch, bin among the files, .exe on windows only.
func validate(m *Manifest) error {
	var errs []error
	if m.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || m.Kind != "Plugin" {
		errs = append(errs, fmt.Errorf("apiVersion/kind %s/%s is not krew's Plugin", m.APIVersion, m.Kind))
	}
	if !nameRE.MatchString(m.Metadata.Name) {
		errs = append(errs, fmt.Errorf("name %q", m.Metadata.Name))
	}
	if !versionRE.MatchString(m.Spec.Version) {
		errs = append(errs, fmt.Errorf("version %q is not a semantic version with a leading v", m.Spec.Version))
	}
	if m.Spec.ShortDescription == "" || strings.ContainsAny(m.Spec.ShortDescription, "\r\n") {
		errs = append(errs, fmt.Errorf("shortDescription %q must be one non-empty line", m.Spec.ShortDescription))
	}
	if len(m.Spec.Platforms) == 0 {
		errs = append(errs, errors.New("no platforms"))
	}
	seen := map[string]bool{}
	for i, p := range m.Spec.Platforms {
		where := fmt.Sprintf("platform %d", i)
		goos, goarch := p.Selector.MatchLabels["os"], p.Selector.MatchLabels["arch"]
		if goos == "" || goarch == "" {
			errs = append(errs, fmt.Errorf("%s: selector needs os and arch", where))
		}
		for k := range p.Selector.MatchLabels {
			if k != "os" && k != "arch" {
				errs = append(errs, fmt.Errorf("%s: selector key %q (krew knows os and arch)", where, k))
			}
		}
		key := goos + "/" + goarch
		if seen[key] {
			errs = append(errs, fmt.Errorf("%s: a second platform for %s", where, key))
		}
		seen[key] = true
		if !strings.HasPrefix(p.URI, "https://") {
			errs = append(errs, fmt.Errorf("%s: uri %q is not https", where, p.URI))
		}
		if !sha256RE.MatchString(p.Sha256) {
			errs = append(errs, fmt.Errorf("%s: sha256 %q is not 64 lowercase hex digits", where, p.Sha256))
		}
		if p.Bin == "" || strings.ContainsAny(p.Bin, `/\`) {
			errs = append(errs, fmt.Errorf("%s: bin %q must be a file name", where, p.Bin))
		}
		if (goos == "windows") != strings.HasSuffix(p.Bin, ".exe") {
			errs = append(errs, fmt.Errorf("%s: bin %q: .exe on windows and only there", where, p.Bin))
		}
		installed := false
		for _, f := range p.Files {
			if f.From == "" || f.To == "" {
				errs = append(errs, fmt.Errorf("%s: a file operation needs from and to", where))
			}
			installed = installed || f.From == p.Bin
		}
		if !installed {
			errs = append(errs, fmt.Errorf("%s: bin %q is not among the files", where, p.Bin))
		}
	}
	return errors.Join(errs...)
}

func main() {
	version := flag.String("version", "", "the release's version (v0.1.0)")
	baseURL := flag.String("base-url", "https://github.com/berth-scheduler/berth/releases/download", "where the release's archives are published: <base-url>/<version>/<archive>")
	out := flag.String("out", "", "the manifest to write")
	flag.Parse()
	m, err := build(*version, *baseURL, flag.Args())
	if err == nil {
		var raw []byte
		if raw, err = yaml.Marshal(m); err == nil {
			if err = os.MkdirAll(filepath.Dir(*out), 0o755); err == nil {
				err = os.WriteFile(*out, raw, 0o644) //nolint:gosec // a published manifest
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "krew:", err)
		os.Exit(1)
	}
}
