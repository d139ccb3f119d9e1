package celpolicy

import (
	"os"
	"strings"
	"testing"

	"k8s.io/klog/v2/ktesting"
	"sigs.k8s.io/yaml"

	"github.com/berth-scheduler/berth/apis/config"
	configv1 "github.com/berth-scheduler/berth/apis/config/v1"
)

// TestCookbookCompiles keeps the README's cookbook honest: every rule in it
// must pass validation and compile.
func TestCookbookCompiles(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "## Cookbook\n\n```yaml\n")
	if !ok {
		t.Fatal("README.md has no cookbook yaml block")
	}
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("cookbook block is not closed")
	}
	var v1args configv1.CELPolicyArgs
	if err := yaml.UnmarshalStrict([]byte(block), &v1args); err != nil {
		t.Fatalf("cookbook is not valid CELPolicyArgs: %v", err)
	}
	if len(v1args.Rules) < 6 {
		t.Errorf("cookbook has %d rules, want at least 6", len(v1args.Rules))
	}
	configv1.SetDefaults_CELPolicyArgs(&v1args)
	var args config.CELPolicyArgs
	if err := configv1.Convert_v1_CELPolicyArgs_To_config_CELPolicyArgs(&v1args, &args, nil); err != nil {
		t.Fatal(err)
	}
	_, ctx := ktesting.NewTestContext(t)
	if _, err := New(ctx, &args, nil); err != nil {
		t.Errorf("cookbook rules do not compile: %v", err)
	}
}
