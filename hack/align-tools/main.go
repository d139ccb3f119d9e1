// Command align-tools raises the requirements of the tools modules under
// hack/tools to the versions Berth's own module builds with, wherever the
// tool's version is older, so that a tool (KWOK, Helm, ...) compiles the Kubernetes libraries and everything else the two share from
// the same sources: a cold build then compiles them once, not once per
// module. A requirement the tool already has at a newer version stays as it
// is (lowering it could lower the tool itself), so what a tool shares
// depends on it being no newer than Berth: where a tool needs newer shared
// modules (golang.org/x/..., protobuf, Prometheus' libraries), raise them in
// Berth's go.mod first (go get), then run this. Not every tool survives
// newer libraries (metrics-server v0.8.0 panicked at start-up on Kubernetes
// 0.37; v0.9.0 runs): run the suites after aligning.
//
//	go run ./hack/align-tools hack/tools/kwok hack/tools/helm ...
//
// hack/update-k8s.sh says to run it after moving Berth to a new Kubernetes
// release.
package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: go run ./hack/align-tools DIR...")
		os.Exit(2)
	}
	berth, err := effectiveVersions("go.mod")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, dir := range os.Args[1:] {
		// Raising one module can bring others into the graph at older
		// versions: go round until nothing is left to raise.
		for round := 0; ; round++ {
			raised, err := align(dir, berth)
			if err != nil {
				fmt.Fprintf(os.Stderr, "%s: %v\n", dir, err)
				os.Exit(1)
			}
			if raised == 0 {
				break
			}
			if round == 4 {
				fmt.Fprintf(os.Stderr, "%s: still raising modules after %d rounds\n", dir, round+1)
				os.Exit(1)
			}
		}
	}
}

// effectiveVersions reads a go.mod: each required module's version, or its
// replacement's where a replace directive pins it (Kubernetes' staging
// modules are required at v0.0.0 and replaced by their tags).
func effectiveVersions(path string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f, err := modfile.Parse(path, data, nil)
	if err != nil {
		return nil, err
	}
	v := map[string]string{}
	for _, r := range f.Require {
		v[r.Mod.Path] = r.Mod.Version
	}
	for _, r := range f.Replace {
		if r.New.Version != "" && r.New.Path == r.Old.Path {
			v[r.Old.Path] = r.New.Version
		}
	}
	return v, nil
}

// align raises dir's modules that are older than Berth's to Berth's version
// and says how many it raised.
func align(dir string, berth map[string]string) (int, error) {
	// The modules of the packages the module builds (its tools and its
	// own packages), not its whole module graph: tidy drops the rest.
	list := exec.Command("go", "list", "-e", "-deps", "-f", "{{with .Module}}{{if not .Main}}{{.Path}} {{.Version}}{{end}}{{end}}", "tool", "./...")
	list.Dir = dir
	list.Stderr = io.Discard // "./..." matches nothing where the module has no code of its own
	out, err := list.Output()
	if err != nil {
		return 0, fmt.Errorf("go list -deps tool ./...: %w", err)
	}
	seen := map[string]bool{}
	var raise []string
	for _, line := range strings.Split(string(out), "\n") {
		path, version, ok := strings.Cut(line, " ")
		if !ok || seen[path] {
			continue
		}
		seen[path] = true
		want, ok := berth[path]
		if !ok || want == "v0.0.0" || semver.Compare(want, version) <= 0 {
			continue
		}
		raise = append(raise, path+"@"+want)
	}
	sort.Strings(raise)
	if len(raise) == 0 {
		fmt.Printf("%s: nothing older than Berth's module\n", dir)
		return 0, nil
	}
	fmt.Printf("%s: raising %d modules to Berth's versions: %s\n", dir, len(raise), strings.Join(raise, " "))
	get := exec.Command("go", append([]string{"get"}, raise...)...)
	get.Dir, get.Stdout, get.Stderr = dir, os.Stdout, os.Stderr
	if err := get.Run(); err != nil {
		return 0, fmt.Errorf("go get: %w", err)
	}
	tidy := exec.Command("go", "mod", "tidy")
	tidy.Dir, tidy.Stdout, tidy.Stderr = dir, os.Stdout, os.Stderr
	if err := tidy.Run(); err != nil {
		return 0, fmt.Errorf("go mod tidy in %s: %w", filepath.Clean(dir), err)
	}
	return len(raise), nil
}
