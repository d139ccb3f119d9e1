package main

import (
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/google/pprof/profile"
)

// split is where a profile's scheduling-cycle CPU went: by the framework
// call it ran under (the outermost frameworkImpl method on the stack: the
// extension point as the scheduling cycle calls it) and by what ran at the
// leaf (the first frame that is not the runtime or the standard library;
// allocation and the GC assists it triggers apart), in CPU seconds; plus
// the runtime's background mark workers for the whole process.
type split struct {
	cycle, gcBackground float64
	phase, leaf         map[string]float64
}

func readSplit(path string) (*split, error) {
	p, idx, err := openCPUProfile(path)
	if err != nil {
		return nil, err
	}
	sp := &split{phase: map[string]float64{}, leaf: map[string]float64{}}
	for _, s := range p.Sample {
		v := float64(s.Value[idx]) / 1e9
		fns := frames(s)
		if !inCycle(s) {
			if slices.Contains(fns, "runtime.gcBgMarkWorker") {
				sp.gcBackground += v
			}
			continue
		}
		sp.cycle += v
		sp.phase[phaseOf(fns)] += v
		sp.leaf[leafOf(fns)] += v
	}
	return sp, nil
}

// frames lists a sample's function names, leaf first.
func frames(s *profile.Sample) []string {
	var out []string
	for _, loc := range s.Location {
		for _, line := range loc.Line {
			if line.Function != nil {
				out = append(out, line.Function.Name)
			}
		}
	}
	return out
}

const frameworkImpl = "k8s.io/kubernetes/pkg/scheduler/framework/runtime.(*frameworkImpl)."

func phaseOf(fns []string) string {
	phase := ""
	for _, fn := range fns { // leaf to root: the outermost wins
		if rest, ok := strings.CutPrefix(fn, frameworkImpl); ok {
			phase, _, _ = strings.Cut(rest, ".")
		}
	}
	if phase != "" {
		return phase
	}
	for _, fn := range fns {
		if !stdlib(fn) {
			return "outside the framework: " + short(fn)
		}
	}
	return "runtime"
}

func leafOf(fns []string) string {
	switch {
	case slices.Contains(fns, "runtime.gcAssistAlloc"):
		return "GC assists (runtime.gcAssistAlloc)"
	case slices.Contains(fns, "runtime.mallocgc"):
		return "allocation (runtime.mallocgc)"
	}
	for _, fn := range fns {
		if stdlib(fn) {
			continue
		}
		switch {
		case strings.HasPrefix(fn, "github.com/berth-scheduler/berth/"):
			pkg, _, _ := strings.Cut(strings.TrimPrefix(fn, "github.com/berth-scheduler/berth/"), ".")
			return "Berth " + pkg
		case strings.Contains(fn, "pkg/scheduler/framework/plugins/"):
			pkg, _, _ := strings.Cut(fn[strings.Index(fn, "plugins/")+len("plugins/"):], ".")
			return "upstream plugin " + pkg
		case strings.HasPrefix(fn, frameworkImpl) || strings.Contains(fn, "pkg/scheduler/framework/runtime."):
			return "framework runtime (" + short(fn) + ")"
		case strings.Contains(fn, "pkg/scheduler/framework."):
			return "framework types (" + short(fn) + ")"
		case strings.Contains(fn, "k8s.io/klog") || strings.Contains(fn, "go-logr"):
			return "logging"
		case strings.Contains(fn, "prometheus") || strings.Contains(fn, "component-base/metrics"):
			return "metrics"
		case strings.Contains(fn, "cel-go"):
			return "cel-go"
		}
		return short(fn)
	}
	return "runtime: " + short(fns[0])
}

// stdlib says whether fn is the runtime's or the standard library's: its
// package path has no domain ("runtime.mapaccess1_faststr",
// "internal/runtime/maps.newarray", not "k8s.io/...").
func stdlib(fn string) bool {
	fn, _, _ = strings.Cut(fn, "[") // a generic's type arguments name other packages
	first, _, path := strings.Cut(fn, "/")
	return !path || !strings.Contains(first, ".")
}

// short is a function's name without its package path (and without a
// generic's type arguments).
func short(fn string) string {
	name, _, generic := strings.Cut(fn, "[")
	name = name[strings.LastIndex(name, "/")+1:]
	if generic {
		name += "[…]" + fn[strings.LastIndex(fn, "]")+1:]
	}
	return name
}

// splitReport prints, for each round in dir, the two cases' cycle CPU per
// pod side by side, then the median over rounds of each row.
func splitReport(w io.Writer, dir, base, other string, pods float64) error {
	find := func(name string) ([]string, error) {
		m, err := filepath.Glob(filepath.Join(dir, name+"_*-cpu.prof"))
		sort.Strings(m)
		return m, err
	}
	bs, err := find(base)
	if err != nil {
		return err
	}
	others, err := find(other)
	if err != nil {
		return err
	}
	if len(bs) == 0 || len(bs) != len(others) {
		return fmt.Errorf("%d %s and %d %s CPU profiles in %s: want as many of each", len(bs), base, len(others), other, dir)
	}
	type pair struct{ b, o *split }
	var rounds []pair
	for i := range bs {
		b, err := readSplit(bs[i])
		if err != nil {
			return err
		}
		o, err := readSplit(others[i])
		if err != nil {
			return err
		}
		rounds = append(rounds, pair{b, o})
	}
	ms := func(v float64) float64 { return v / pods * 1e3 }
	rows := func(get func(*split) map[string]float64) []string {
		seen := map[string]bool{}
		var keys []string
		for _, r := range rounds {
			for _, m := range []map[string]float64{get(r.b), get(r.o)} {
				for k := range m {
					if !seen[k] {
						seen[k] = true
						keys = append(keys, k)
					}
				}
			}
		}
		// Largest difference first; equal ones by name (map order varies).
		diff := func(k string) float64 {
			var d []float64
			for _, r := range rounds {
				d = append(d, get(r.o)[k]-get(r.b)[k])
			}
			return median(d)
		}
		sort.SliceStable(keys, func(i, j int) bool {
			di, dj := diff(keys[i]), diff(keys[j])
			return di > dj || di == dj && keys[i] < keys[j]
		})
		return keys
	}
	line := func(label string, get func(*split) float64) {
		var b, o, d []float64
		for _, r := range rounds {
			b, o, d = append(b, ms(get(r.b))), append(o, ms(get(r.o))), append(d, ms(get(r.o)-get(r.b)))
		}
		fmt.Fprintf(w, "| %s | %.3f | %.3f | %+.3f (%+.3f to %+.3f) |\n", label, median(b), median(o), median(d), slices.Min(d), slices.Max(d))
	}
	// table prints the first n rows, then the rest in one.
	table := func(n int, prefix string, get func(*split) map[string]float64) {
		keys := rows(get)
		for _, k := range keys[:min(n, len(keys))] {
			line(prefix+k, func(s *split) float64 { return get(s)[k] })
		}
		if len(keys) > n {
			rest := keys[n:]
			line(fmt.Sprintf("the other %d", len(rest)), func(s *split) float64 {
				sum := 0.0
				for _, k := range rest {
					sum += get(s)[k]
				}
				return sum
			})
		}
	}
	fmt.Fprintf(w, "%d rounds; CPU ms per measured pod, median over rounds; the difference is the median of each round's difference (so not the difference of the medians), with its least and greatest.\n\n", len(rounds))
	fmt.Fprintf(w, "| | %s | %s | difference |\n| --- | --- | --- | --- |\n", base, other)
	line("**scheduling cycle**", func(s *split) float64 { return s.cycle })
	table(6, "under ", func(s *split) map[string]float64 { return s.phase })
	fmt.Fprintf(w, "\n| at the leaf | %s | %s | difference |\n| --- | --- | --- | --- |\n", base, other)
	table(20, "", func(s *split) map[string]float64 { return s.leaf })
	fmt.Fprintf(w, "\n| outside the cycle | %s | %s | difference |\n| --- | --- | --- | --- |\n", base, other)
	line("GC background mark workers (whole process)", func(s *split) float64 { return s.gcBackground })
	return nil
}
