package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/google/pprof/profile"
)

// dataItems is the harness's JSON (perf-dash format).
type dataItems struct {
	DataItems []struct {
		Data   map[string]float64 `json:"data"`
		Unit   string             `json:"unit"`
		Labels map[string]string  `json:"labels"`
	} `json:"dataItems"`
}

// sample is one test case's measurements in one round.
type sample struct {
	throughput map[string]float64 // Average, Perc50, ...
	heapMaxMB  float64
	// plugins: "Plugin/ExtensionPoint" -> Perc50, Perc99, Average (ms).
	plugins map[string]map[string]float64
	// points: extension point -> Perc50, Average, ... (ms), per cycle.
	points map[string]map[string]float64
	// algorithm: scheduler_scheduling_algorithm_duration_seconds (ms).
	algorithm map[string]float64
	// series: per-second throughput over the measured phase (from the .dat file).
	series [][2]float64
	// cpu: CPU seconds of the measured phase by where they were spent (from the CPU profile).
	cpu map[string]float64
	// pods: the measured pods (from the workload's name).
	pods float64
	// evals: "Plugin/ExtensionPoint" -> calls in the measured phase
	// (berth_bench_plugin_evaluations); attempts: mean attempts per
	// scheduled pod (scheduler_pod_scheduling_attempts).
	evals    map[string]float64
	attempts float64
	// calls: CPU seconds of the measured phase by callKeys, and of its
	// scheduling cycles by cycleClass (calls.go).
	calls map[string]float64
}

// round is one harness run: profile -> workload -> sample.
type round map[string]map[string]*sample

var (
	nameRE = regexp.MustCompile(`^BenchmarkPerfScheduling/([^/]+)/([^/]+)/`)
	// The harness names its per-test files <testcase>_<workload>_berth_<run id>.
	fileRE = regexp.MustCompile(`^([^_]+)_(.+)_berth_(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)(-cpu\.prof|\.dat)$`)
	podsRE = regexp.MustCompile(`_(\d+)[A-Za-z]*Pods$`)
)

// readRounds reads every harness run in dirs: its JSON (one per run), and
// the per-test .dat and CPU profile files of the same run. Runs are ordered
// by time; the k-th JSON of a directory and the k-th run id of its other
// files are the same run.
func readRounds(dirs string) ([]round, error) {
	var rounds []round
	for _, dir := range strings.Split(dirs, ",") {
		files, err := filepath.Glob(filepath.Join(dir, "BenchmarkPerfScheduling_*.json"))
		if err != nil {
			return nil, err
		}
		sort.Strings(files)
		extras, err := runFiles(dir)
		if err != nil {
			return nil, err
		}
		for i, f := range files {
			rs, err := readJSON(f)
			if err != nil {
				return nil, err
			}
			if i < len(extras) && len(rs) == 1 {
				if err := extras[i].addTo(rs[0]); err != nil {
					return nil, err
				}
			}
			rounds = append(rounds, rs...)
		}
	}
	return rounds, nil
}

// runExtras are one run's .dat and CPU profile files by test case and workload.
type runExtras struct {
	dat, prof map[[2]string]string
}

func runFiles(dir string) ([]runExtras, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, nil
		}
		return nil, err
	}
	byRun := map[string]*runExtras{}
	for _, e := range entries {
		m := fileRE.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		r := byRun[m[3]]
		if r == nil {
			r = &runExtras{dat: map[[2]string]string{}, prof: map[[2]string]string{}}
			byRun[m[3]] = r
		}
		k := [2]string{m[1], m[2]}
		if m[4] == ".dat" {
			r.dat[k] = filepath.Join(dir, e.Name())
		} else {
			r.prof[k] = filepath.Join(dir, e.Name())
		}
	}
	ids := make([]string, 0, len(byRun))
	for id := range byRun {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	out := make([]runExtras, len(ids))
	for i, id := range ids {
		out[i] = *byRun[id]
	}
	return out, nil
}

func (x runExtras) addTo(r round) error {
	for k, path := range x.dat {
		if s := r[k[0]][k[1]]; s != nil {
			series, err := readSeries(path)
			if err != nil {
				return err
			}
			s.series = series
		}
	}
	for k, path := range x.prof {
		if s := r[k[0]][k[1]]; s != nil {
			cpu, calls, err := readCPU(path)
			if err != nil {
				return err
			}
			s.cpu, s.calls = cpu, calls
		}
	}
	return nil
}

func readJSON(f string) ([]round, error) {
	raw, err := os.ReadFile(f)
	if err != nil {
		return nil, err
	}
	var d dataItems
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", f, err)
	}
	// A file is one harness run; if it ran a workload several times (go
	// test -count), its k-th run of each workload is round k.
	var fileRounds []round
	seen := map[string]int{}
	get := func(profile, workload, metric string) *sample {
		k := profile + "/" + workload + "/" + metric
		idx := seen[k]
		seen[k]++
		for len(fileRounds) <= idx {
			fileRounds = append(fileRounds, round{})
		}
		r := fileRounds[idx]
		if r[profile] == nil {
			r[profile] = map[string]*sample{}
		}
		s := r[profile][workload]
		if s == nil {
			s = &sample{plugins: map[string]map[string]float64{}, points: map[string]map[string]float64{}, evals: map[string]float64{}}
			if m := podsRE.FindStringSubmatch(workload); m != nil {
				s.pods, _ = strconv.ParseFloat(m[1], 64)
			}
			r[profile][workload] = s
		}
		return s
	}
	for _, it := range d.DataItems {
		m := nameRE.FindStringSubmatch(it.Labels["Name"])
		if m == nil || len(it.Data) == 0 {
			continue
		}
		switch metric := it.Labels["Metric"]; metric {
		case "SchedulingThroughput":
			get(m[1], m[2], metric).throughput = it.Data
		case "heap_memory_usage":
			get(m[1], m[2], metric).heapMaxMB = it.Data["Max"]
		case "scheduler_scheduling_algorithm_duration_seconds":
			get(m[1], m[2], metric).algorithm = it.Data
		case "scheduler_framework_extension_point_duration_seconds":
			ep := it.Labels["extension_point"]
			get(m[1], m[2], metric+ep).points[ep] = it.Data
		case "scheduler_plugin_execution_duration_seconds":
			key := it.Labels["plugin"] + "/" + it.Labels["extension_point"]
			get(m[1], m[2], metric+key).plugins[key] = it.Data
		case "berth_bench_plugin_evaluations":
			// The mean of one observation, in the harness's ms: the count.
			key := it.Labels["plugin"] + "/" + it.Labels["extension_point"]
			get(m[1], m[2], metric+key).evals[key] = it.Data["Average"]
		case "scheduler_pod_scheduling_attempts":
			// A count reported as if seconds: the harness's ms are ×1,000.
			get(m[1], m[2], metric).attempts = it.Data["Average"] / 1000
		}
	}
	return fileRounds, nil
}

// readSeries reads the harness's progress file: per sample the seconds since
// the measured phase started and the observed pods per second (columns 1, 5).
func readSeries(path string) ([][2]float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out [][2]float64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		t, err1 := strconv.ParseFloat(strings.TrimSuffix(fields[0], "s"), 64)
		rate, err2 := strconv.ParseFloat(fields[4], 64)
		if err1 == nil && err2 == nil {
			out = append(out, [2]float64{t, rate})
		}
	}
	return out, sc.Err()
}

// CPU attribution of a profile sample, by the first match along its stack
// from the leaf: the scheduler (upstream's pkg/scheduler, Berth's plugins),
// the API server and etcd client (kube-apiserver runs in the same process),
// or neither (the runtime's GC, informers' decoding, the harness).
const (
	cpuScheduler = "scheduler"
	cpuAPIServer = "apiserver"
	cpuOther     = "other"
	// cpuCycle is the part of the scheduler's CPU spent in scheduling
	// cycles: the scheduling goroutine's cycle and the parallelizer's
	// workers it runs (Filter, Score, plugins' parallel PreFilter work).
	cpuCycle = "cycle"
)

// cycleFrames are functions only a scheduling cycle runs.
var cycleFrames = []string{
	"k8s.io/kubernetes/pkg/scheduler.(*Scheduler).schedulingCycle",
	"k8s.io/kubernetes/pkg/scheduler.(*Scheduler).schedulingAlgorithm",
	"k8s.io/kubernetes/pkg/scheduler.(*Scheduler).findNodesThatPassFilters",
	"k8s.io/kubernetes/pkg/scheduler.prioritizeNodes",
	"k8s.io/client-go/util/workqueue.ParallelizeUntil",
}

var (
	schedulerFrames = []string{"k8s.io/kubernetes/pkg/scheduler", "github.com/berth-scheduler/berth/"}
	apiserverFrames = []string{"k8s.io/apiserver/", "k8s.io/kubernetes/pkg/registry/", "k8s.io/kubernetes/pkg/controlplane", "k8s.io/kubernetes/pkg/kubeapiserver",
		"k8s.io/apiextensions-apiserver/", "k8s.io/kube-aggregator/", "go.etcd.io/", "google.golang.org/grpc", "k8s.io/kubernetes/plugin/pkg/admission"}
)

// readCPU reads a CPU profile: seconds by attribution (scheduler, API
// server, other, cycle), and by callKeys.
func readCPU(path string) (cpu, calls map[string]float64, err error) {
	p, idx, err := openCPUProfile(path)
	if err != nil {
		return nil, nil, err
	}
	cpu, calls = map[string]float64{}, map[string]float64{}
	for _, s := range p.Sample {
		v := float64(s.Value[idx]) / 1e9
		cpu[attribute(s)] += v
		if inCycle(s) {
			cpu[cpuCycle] += v
			calls[cycleClass(s)] += v
		}
		for _, k := range callKeys(s) {
			calls[k] += v
		}
	}
	return cpu, calls, nil
}

// openCPUProfile parses a CPU profile and finds its cpu sample type.
func openCPUProfile(path string) (*profile.Profile, int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", path, err)
	}
	idx := slices.IndexFunc(p.SampleType, func(st *profile.ValueType) bool { return st.Type == "cpu" })
	if idx < 0 {
		return nil, 0, fmt.Errorf("%s: no cpu sample type", path)
	}
	return p, idx, nil
}

// attribute is where a sample's CPU went: the first frame from the leaf
// that belongs to the scheduler or the API server decides.
func attribute(s *profile.Sample) string {
	for _, loc := range s.Location {
		for _, line := range loc.Line {
			if line.Function == nil {
				continue
			}
			name := line.Function.Name
			if hasPrefix(name, schedulerFrames) {
				return cpuScheduler
			}
			if hasPrefix(name, apiserverFrames) {
				return cpuAPIServer
			}
		}
	}
	return cpuOther
}

// inCycle reports whether a sample ran in a scheduling cycle. The
// harness's own workers (creating the pods through the same
// workqueue.ParallelizeUntil the scheduler's parallelizer uses) are not.
func inCycle(s *profile.Sample) bool {
	in := false
	for _, loc := range s.Location {
		for _, line := range loc.Line {
			if line.Function == nil {
				continue
			}
			if strings.HasPrefix(line.Function.Name, harnessFrames) {
				return false
			}
			in = in || hasPrefix(line.Function.Name, cycleFrames)
		}
	}
	return in
}

// harnessFrames are scheduler_perf's functions.
const harnessFrames = "k8s.io/kubernetes/test/integration/"

func hasPrefix(s string, prefixes []string) bool {
	return slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(s, p) })
}
