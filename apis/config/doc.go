// Package config holds the internal types of Berth's plugin args. The
// scheduler decodes a profile's pluginConfig[].args into the versioned types
// in package v1, defaults and converts them to these, and hands them to the
// plugin's New.
//
// +k8s:deepcopy-gen=package
package config
