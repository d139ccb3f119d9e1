// Command berth-krew writes the krew plugin manifest of kubectl-berth
// (dist/berth.yaml in the release, published flat so that checksums.txt
// covers it; plugins/berth.yaml in krew's index) from the release's
// archives, one platform per archive named
// kubectl-berth_<version>_<os>_<arch>.tar.gz, each with its sha256 and the
// URI it is published at. The manifest is krew's own type
// (sigs.k8s.io/krew/pkg/index); make release then checks it with krew's
// own validate-krew-manifest and installs it with krew itself (this
// module's tools), so no rule of krew's is written again here.
//
//	berth-krew -version v0.1.0 -base-url URL -out dist/berth.yaml dist/kubectl-berth_*.tar.gz
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/krew/pkg/constants"
	"sigs.k8s.io/krew/pkg/index"
	"sigs.k8s.io/yaml"
)

var archiveRE = regexp.MustCompile(`^kubectl-berth_(v[^_]+)_([a-z0-9]+)_([a-z0-9]+)\.tar\.gz$`)

const (
	shortDescription = "Explain, snapshot and simulate Berth scheduler decisions"
	description      = `kubectl berth works with Berth, a kube-scheduler distribution with
scheduling plugins (CEL rules, load-aware placement, elastic quotas, gangs,
binding confirmation, admission feedback, explanations).

  explain POD     why the scheduler placed POD on its node, or why it fits
                  nowhere, plugin by plugin (Berth's Explain plugin)
  snapshot FILE   what the scheduler reads from a cluster, in one file
                  (optionally anonymized, for a bug report)
  simulate        replay a snapshot offline under one or two scheduler
                  configurations: what would land differently, where a
                  drained node's pods would go, whether more nodes would
                  place the pending pods
  validate CONFIG check a KubeSchedulerConfiguration offline, as the
                  scheduler's start-up does
`
	// caveats: krew prints them after the install. kubectl 1.26 and later
	// completes a plugin through kubectl_complete-<name> on the PATH.
	caveats = `Shell completion of kubectl berth (kubectl 1.26 and later) needs a
kubectl_complete-berth executable on your PATH, for example:

  cat > ~/.local/bin/kubectl_complete-berth <<'SH'
  #!/bin/sh
  exec kubectl-berth __complete "$@"
  SH
  chmod +x ~/.local/bin/kubectl_complete-berth

explain and snapshot read the cluster with your kubeconfig; snapshot needs
get and list on what the scheduler reads (the ClusterRole in Berth's
manifests/snapshot-reader.yaml).
`
)

// build returns the manifest for the archives (paths), of version, published
// under baseURL.
func build(version, baseURL string, archives []string) (*index.Plugin, error) {
	p := &index.Plugin{
		TypeMeta:   metav1.TypeMeta{APIVersion: constants.CurrentAPIVersion, Kind: constants.PluginKind},
		ObjectMeta: metav1.ObjectMeta{Name: "berth"},
		Spec: index.PluginSpec{
			Version:          version,
			Homepage:         "https://github.com/berth-scheduler/berth",
			ShortDescription: shortDescription,
			Description:      description,
			Caveats:          caveats,
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
		sum, err := sha256File(a)
		if err != nil {
			return nil, err
		}
		bin := "kubectl-berth"
		if match[2] == "windows" {
			bin += ".exe"
		}
		p.Spec.Platforms = append(p.Spec.Platforms, index.Platform{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"os": match[2], "arch": match[3]}},
			URI:      strings.TrimSuffix(baseURL, "/") + "/" + version + "/" + filepath.Base(a),
			Sha256:   sum,
			Files:    []index.FileOperation{{From: bin, To: "."}, {From: "LICENSE", To: "."}},
			Bin:      bin,
		})
	}
	if len(p.Spec.Platforms) == 0 {
		return nil, fmt.Errorf("no archives")
	}
	sort.Slice(p.Spec.Platforms, func(i, j int) bool { return p.Spec.Platforms[i].URI < p.Spec.Platforms[j].URI })
	return p, nil
}

// sha256File is the hex sha256 of a file, as krew checks a download.
func sha256File(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func main() {
	version := flag.String("version", "", "the release's version (v0.1.0)")
	baseURL := flag.String("base-url", "https://github.com/berth-scheduler/berth/releases/download", "where the release's archives are published: <base-url>/<version>/<archive>")
	out := flag.String("out", "", "the manifest to write")
	flag.Parse()
	p, err := build(*version, *baseURL, flag.Args())
	if err == nil {
		var raw []byte
		if raw, err = yaml.Marshal(p); err == nil {
			if err = os.MkdirAll(filepath.Dir(*out), 0o755); err == nil {
				err = os.WriteFile(*out, raw, 0o644) //nolint:gosec // a published manifest
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "berth-krew:", err)
		os.Exit(1)
	}
}
