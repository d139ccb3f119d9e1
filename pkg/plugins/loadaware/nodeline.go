package loadaware

import (
	"time"
	"unsafe"

	v1 "k8s.io/api/core/v1"

	"github.com/berth-scheduler/berth/internal/noderecord"
)

// A node's line (noderecord.Line) holds its record's data in one cache line
// read in the order the framework visits the nodes, instead of the
// nodeRecord it was made from (a heap object the CPU cannot prefetch):
//
//	word 0  the address of the Node object (held by the nodeRecord stored with the line)
//	word 1  bits 8..63: the source's version (low 56 bits); bits 0..7: lineStored, lineOK, lineInvalid
//	word 2  the sample's timestamp, Unix nanoseconds
//	word 3  the sample's CPU (milli), word 4 its memory (bytes)
//	word 5  the pending CPU estimate (milli), word 6 the pending memory (bytes)
//
// A valid sample whose timestamp Unix nanoseconds cannot hold (before 1678 or
// after 2262), or that carries a monotonic clock reading (the sources give
// wall-clock times only, newSample included; a test's time.Now() has one),
// is not put in a line: its line stays unmarked and readers use the record.
type nodeLine noderecord.Line

const (
	lineStored uint64 = 1 << iota
	lineOK
	lineInvalid
	lineFlags       = 8
	lineVersionMask = uint64(1)<<(64-lineFlags) - 1
)

// lineOf is r's line, unmarked when the line cannot hold r's timestamp. A
// timestamp is read only from a valid sample (classify): the line keeps
// none for a node without one.
func lineOf(r *nodeRecord) noderecord.Line {
	var ts int64
	if r.ok && !r.smp.invalid {
		ts = r.smp.timestamp.UnixNano()
		if !time.Unix(0, ts).Equal(r.smp.timestamp) || r.smp.timestamp != r.smp.timestamp.Round(0) {
			return noderecord.Line{}
		}
	}
	flags := lineStored
	if r.ok {
		flags |= lineOK
	}
	if r.smp.invalid {
		flags |= lineInvalid
	}
	return noderecord.Line{
		uint64(uintptr(unsafe.Pointer(r.node))),
		(r.version&lineVersionMask)<<lineFlags | flags,
		uint64(ts),
		uint64(r.smp.cpuMilli), uint64(r.smp.memBytes),
		uint64(r.pend.cpuMilli), uint64(r.pend.memBytes),
	}
}

// valid reports whether the line is of a record built from node at the
// source's version.
func (l *nodeLine) valid(node *v1.Node, version uint64) bool {
	return l[1]&lineStored != 0 && uintptr(l[0]) == uintptr(unsafe.Pointer(node)) &&
		l[1]>>lineFlags == version&lineVersionMask
}

// data is the record's sample, whether there is one, and the pending
// estimates. The sample's timestamp is left zero: stale judges its age.
func (l *nodeLine) data() (sample, bool, estimate) {
	smp := sample{
		cpuMilli: int64(l[3]),
		memBytes: int64(l[4]),
		invalid:  l[1]&lineInvalid != 0,
	}
	return smp, l[1]&lineOK != 0, estimate{cpuMilli: int64(l[5]), memBytes: int64(l[6])}
}

// stale reports whether the line's sample (there and valid) was taken
// before the bound unixNanoBound made of a time.
func (l *nodeLine) stale(staleNs int64, staleAll bool) bool {
	return staleAll || int64(l[2]) < staleNs
}
