//go:build !amd64 && !arm64

package noderecord

// prefetch does nothing where the package has no prefetch instruction.
func prefetch(addr uintptr) {}
