#!/usr/bin/env bash
# Generates deep-copy, conversion and defaulting code for the plugin args under
# apis/config with k8s.io/code-generator, at the version go.mod pins (tool lines).
set -euo pipefail
cd "$(dirname "$0")/.."

header=hack/boilerplate.go.txt
go tool deepcopy-gen --go-header-file "$header" --output-file zz_generated.deepcopy.go \
  ./apis/config ./apis/config/v1
go tool defaulter-gen --go-header-file "$header" --output-file zz_generated.defaults.go \
  ./apis/config/v1
go tool conversion-gen --go-header-file "$header" --output-file zz_generated.conversion.go \
  ./apis/config/v1
