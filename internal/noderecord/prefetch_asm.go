//go:build amd64 || arm64

package noderecord

// prefetch asks the CPU to bring the cache line at addr into its caches
// without waiting for it (PREFETCHT0, PRFM PLDL1KEEP): a hint, which never
// faults, whatever addr is.
//
//go:noescape
func prefetch(addr uintptr)
