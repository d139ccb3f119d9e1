package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/berth-scheduler/berth/internal/sandbox"
	"github.com/berth-scheduler/berth/internal/spclient/clientset/versioned"
)

// cluster is the soak's substrate: the control plane, the real
// kube-controller-manager, KWOK's kubelets, metrics-server when it can run,
// and the Berth replicas, each of which reaches the API server through a
// proxy of its own (the outage, partition and slow-API faults act on them).
type cluster struct {
	cp       *sandbox.ControlPlane
	cm       *sandbox.ControllerManager
	kwok     *sandbox.KWOK
	ms       *sandbox.MetricsServer
	replicas []*replica
	c        kubernetes.Interface
	sp       versioned.Interface
	scrape   *http.Client
	// sinceLeaseFault: the faults' record (set once they exist).
	sinceLeaseFault func() time.Duration
}

// replica is one Berth scheduler process, restarted when it exits, as a
// kubelet restarts a static pod's container.
type replica struct {
	name, bin, config, dir string
	port                   int
	args                   []string
	env                    []string
	proxy                  *sandbox.Proxy

	mu       sync.Mutex
	proc     *sandbox.Process
	starts   int
	exits    []exitRecord
	samples  []sample
	stopping bool
	// killed: the next exit is the leader-kill fault's SIGKILL.
	killed bool
	// paused: SIGSTOPped by the leader-pause fault.
	paused bool
	// ledUntil: the time (seconds since the start) of its last sample as
	// the leader, of any process start (-inf before).
	ledUntil float64
}

func (r *replica) pause() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.paused = true
	return r.proc.SignalStop()
}

// resume sends SIGCONT to the process paused (a restart since is not paused).
func (r *replica) resume() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.paused {
		return nil
	}
	r.paused = false
	return r.proc.SignalCont()
}

// exitRecord is why a replica's process ended.
type exitRecord struct {
	At     time.Duration `json:"at"`
	Cause  string        `json:"cause"` // killed, lost-lease, panic, other
	Log    string        `json:"log"`
	Detail string        `json:"detail,omitempty"`
	// LeaseFaultAgo: the time since a fault that can cost the lease
	// began or ended.
	LeaseFaultAgo time.Duration `json:"leaseFaultAgo"`
}

// sample is one scrape of a replica's /metrics.
type sample struct {
	At         float64 `json:"atSeconds"`
	RSS        float64 `json:"rssBytes"`
	Goroutines float64 `json:"goroutines"`
	Leader     bool    `json:"leader"`
	Start      int     `json:"start"`
	// Pending is scheduler_pending_pods by queue; Attempts is
	// scheduler_schedule_attempts_total by result (all profiles): what the
	// leader was doing when a bound was missed.
	Pending  map[string]float64 `json:"pending,omitempty"`
	Attempts map[string]float64 `json:"attempts,omitempty"`
}

func (r *replica) logPath(start int) string {
	return filepath.Join(r.dir, fmt.Sprintf("%s-%d.log", r.name, start))
}

func (r *replica) start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.starts++
	args := append([]string{"--config=" + r.config}, r.args...)
	p, err := sandbox.StartProcessEnv(r.bin, args, r.env, r.logPath(r.starts))
	if err != nil {
		return err
	}
	r.proc = p
	return nil
}

// current is the running process and its start number.
func (r *replica) current() (*sandbox.Process, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.proc, r.starts
}

// klogFatal is a klog.Fatal line (severity F, then MMDD).
var klogFatal = regexp.MustCompile(`^F\d{4} `)

// exitCause reads a replica's log: upstream exits with "leaderelection
// lost" when it cannot renew its lease (an outage); a Go panic prints
// "panic:" and goroutine stacks; klog.Fatal an F line; anything else
// (os.Exit, a signal nobody sent) is "other".
func exitCause(path string) (string, string) {
	f, err := os.Open(path)
	if err != nil {
		return "other", err.Error()
	}
	defer func() { _ = f.Close() }()
	var tail []string
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	panicLine, fatalLine := "", ""
	for s.Scan() {
		line := s.Text()
		if panicLine == "" && (strings.HasPrefix(line, "panic:") || strings.HasPrefix(line, "fatal error:") || strings.Contains(line, "Observed a panic")) {
			panicLine = line
		}
		if fatalLine == "" && klogFatal.MatchString(line) {
			fatalLine = line
		}
		tail = append(tail, line)
		if len(tail) > 30 {
			tail = tail[1:]
		}
	}
	switch {
	case panicLine != "":
		return "panic", panicLine
	case strings.Contains(strings.ToLower(strings.Join(tail, "\n")), "leaderelection lost"):
		return "lost-lease", ""
	case fatalLine != "":
		return "fatal", fatalLine
	default:
		return "other", strings.Join(tail[max(0, len(tail)-5):], "\n")
	}
}

// scrapeMetrics reads RSS, goroutines and leadership from a replica's
// /metrics (served with delegated authentication: the admin's client
// certificate).
func (cl *cluster) scrapeMetrics(ctx context.Context, r *replica) (sample, error) {
	// The process start the scrape reads: one that changed under the
	// request may have answered for the process before it.
	_, start := r.current()
	out, err := cl.scrapeMetricsOnce(ctx, r)
	if _, now := r.current(); err == nil && now != start {
		err = fmt.Errorf("%s restarted during its scrape", r.name)
	}
	out.Start = start
	return out, err
}

func (cl *cluster) scrapeMetricsOnce(ctx context.Context, r *replica) (sample, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/metrics", r.port), nil)
	if err != nil {
		return sample{}, err
	}
	resp, err := cl.scrape.Do(req)
	if err != nil {
		return sample{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return sample{}, fmt.Errorf("%s: %s", req.URL, resp.Status)
	}
	out := sample{Pending: map[string]float64{}, Attempts: map[string]float64{}}
	s := bufio.NewScanner(resp.Body)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		line := s.Text()
		switch {
		case strings.HasPrefix(line, "process_resident_memory_bytes "):
			out.RSS = lastFloat(line)
		case strings.HasPrefix(line, "go_goroutines "):
			out.Goroutines = lastFloat(line)
		case strings.HasPrefix(line, "leader_election_master_status{"):
			out.Leader = lastFloat(line) == 1
		case strings.HasPrefix(line, "scheduler_pending_pods{"):
			out.Pending[label(line, "queue")] += lastFloat(line)
		case strings.HasPrefix(line, "scheduler_schedule_attempts_total{"):
			out.Attempts[label(line, "result")] += lastFloat(line)
		}
	}
	return out, s.Err()
}

// label is the value of a metric line's label name ("" if it has none).
func label(line, name string) string {
	_, rest, ok := strings.Cut(line, name+`="`)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, `"`)
	return v
}

func lastFloat(line string) float64 {
	f := strings.Fields(line)
	v, _ := strconv.ParseFloat(f[len(f)-1], 64)
	return v
}

// scrapeClient authenticates as the sandbox's admin with its client
// certificate; the replicas serve self-signed certificates.
func scrapeClient(cp *sandbox.ControlPlane) (*http.Client, error) {
	cert, err := tls.X509KeyPair(cp.Config.CertData, cp.Config.KeyData)
	if err != nil {
		return nil, fmt.Errorf("the admin's client certificate: %w", err)
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
		Certificates:       []tls.Certificate{cert},
		InsecureSkipVerify: true, //nolint:gosec // the replicas' self-signed serving certificates
	}}}, nil
}
