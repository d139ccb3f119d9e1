package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Restart stops the process (SIGTERM, then waits) and runs the same command
// again, appending to the same log: a container restart, as the soak's
// faults do to kube-controller-manager and KWOK. The Process then stands for
// the new one.
func (p *Process) Restart() error {
	p.signal(syscall.SIGTERM)
	cmd := exec.Command(p.cmd.Path, p.cmd.Args[1:]...)
	cmd.Env = p.cmd.Env
	logPath := p.log.Name()
	logFile, err := os.OpenFile(logPath, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(logFile, "\n==== restarted at %s ====\n", time.Now().Format(time.RFC3339))
	np, err := startCmd(cmd, logFile)
	if err != nil {
		return err
	}
	*p = *np
	return nil
}

// SignalStop pauses the process (SIGSTOP), as a leader frozen by a long GC
// pause, a VM migration or a starved cgroup is; SignalCont resumes it.
func (p *Process) SignalStop() error { return p.cmd.Process.Signal(syscall.SIGSTOP) }

// SignalCont resumes a process SignalStop paused.
func (p *Process) SignalCont() error { return p.cmd.Process.Signal(syscall.SIGCONT) }

// RestartAPIServer restarts kube-apiserver with the same flags (its watches
// end; clients re-list, and after an etcd compaction get 410 Gone), and
// waits until it is ready again.
func (e *ControlPlane) RestartAPIServer(ctx context.Context) error {
	return e.restart(ctx, "kube-apiserver", "--cert-dir="+e.env.ControlPlane.APIServer.CertDir, &e.apiServer)
}

// RestartEtcd restarts etcd with the same flags and data (the API server's
// watches on it break and resume), and waits until the API server is ready
// again.
func (e *ControlPlane) RestartEtcd(ctx context.Context) error {
	return e.restart(ctx, "etcd", "--data-dir="+e.env.ControlPlane.Etcd.DataDir, &e.etcd)
}

// restart stops the process named name whose command line holds marker
// (envtest's, or the one a previous restart started: held in *mine), starts
// the same command, and waits for the API server's /readyz.
func (e *ControlPlane) restart(ctx context.Context, name, marker string, mine **Process) error {
	var argv []string
	if *mine != nil {
		argv = append([]string{(*mine).cmd.Path}, (*mine).cmd.Args[1:]...)
		(*mine).StopWithin(30 * time.Second)
	} else {
		pid, cmdline, err := findProcess(name, marker)
		if err != nil {
			return err
		}
		argv = cmdline
		gone := func(context.Context) (bool, error) {
			_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
			return os.IsNotExist(err), nil
		}
		if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
			return fmt.Errorf("stopping %s (pid %d): %w", name, pid, err)
		}
		// A loaded API server drains its watches for minutes: after 30 s
		// it is killed, as a kubelet kills a container past its grace.
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, gone); err != nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, gone); err != nil {
				return fmt.Errorf("%s (pid %d) did not stop, even killed: %w", name, pid, err)
			}
		}
	}
	logFile, err := os.OpenFile(filepath.Join(e.Dir, name+"-restarted.log"), os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	p, err := startWithLog(argv[0], argv[1:], logFile)
	if err != nil {
		return err
	}
	*mine = p
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if p.Exited() {
			return false, fmt.Errorf("%s exited after its restart (log %s)", name, logFile.Name())
		}
		raw, err := e.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(raw) == "ok", nil
	})
}

// findProcess finds this sandbox's process named name by a flag only its
// command line holds (envtest does not expose the processes it started).
func findProcess(name, marker string) (int, []string, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, nil, err
	}
	for _, d := range entries {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err != nil || len(raw) == 0 {
			continue
		}
		argv := strings.Split(string(bytes.TrimRight(raw, "\x00")), "\x00")
		if filepath.Base(argv[0]) != name {
			continue
		}
		for _, a := range argv[1:] {
			if a == marker {
				return pid, argv, nil
			}
		}
	}
	return 0, nil, fmt.Errorf("no %s process with %s", name, marker)
}
