package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestSlugAsGitHub(t *testing.T) {
	for heading, want := range map[string]string{
		"Replacing the control plane's kube-scheduler (kubeadm)": "replacing-the-control-planes-kube-scheduler-kubeadm",
		"`kubectl berth`":        "kubectl-berth",
		"Why is my pod pending?": "why-is-my-pod-pending",
		"Berth won't start":      "berth-wont-start",
		"3a. Quota max":          "3a-quota-max",
		"snake_case and Ünïcode": "snake_case-and-ünïcode",
	} {
		if got := Slug(heading); got != want {
			t.Errorf("Slug(%q) = %q, want %q", heading, got, want)
		}
	}
}

func TestCheckFindsMissingFilesAndAnchors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("README.md", "# Top\n## Install\n## Install\n[ok](docs/a.md#usage) [ok](#install-1) [ok](docs) [site](https://example.com/x)\n[gone](docs/b.md) [bad anchor](docs/a.md#nope) [bad here](#nope)\n```\n# not a heading\n```\n[code](#not-a-heading)\n#not-a-heading-either\n[x](#not-a-heading-either) `[in code](#nowhere)`\n")
	write("docs/a.md", "# A\n## Usage\n[up](../README.md#top)\n")
	problems, err := check(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 5 {
		t.Fatalf("want 5 problems (a missing file, two missing anchors, an anchor inside a code block, a # without a space), got %d:\n%q", len(problems), problems)
	}
}
