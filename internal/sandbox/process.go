package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Process is a program the sandbox runs (bin/scheduler, metrics-server), as
// a process of its own, in a process group of its own: a Ctrl-C meant for
// the caller reaches the caller, which then stops its processes in order.
type Process struct {
	cmd *exec.Cmd
	log *os.File
	// exited is closed when the process has ended.
	exited chan struct{}
	// stopped: Stop or Kill ran.
	stopped bool
}

// StartSchedulerProcess runs bin --config=configFile with serving off,
// logging to logPath.
func StartSchedulerProcess(bin, configFile, logPath string, extraArgs ...string) (*Process, error) {
	args := append([]string{"--config=" + configFile, "--secure-port=0"}, extraArgs...)
	return startProcess(exec.Command(bin, args...), logPath)
}

// StartProcess runs bin with exactly args, logging to logPath.
func StartProcess(bin string, args []string, logPath string) (*Process, error) {
	return startProcess(exec.Command(bin, args...), logPath)
}

// StartProcessEnv runs bin with exactly args and env added to the
// caller's environment, logging to logPath.
func StartProcessEnv(bin string, args, env []string, logPath string) (*Process, error) {
	cmd := exec.Command(bin, args...)
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	return startProcess(cmd, logPath)
}

// StartProcessAs runs bin with exactly args as uid:gid (the caller must be
// root), logging to logPath: a static Pod's command as the kubelet would run it.
func StartProcessAs(bin string, args []string, uid, gid uint32, logPath string) (*Process, error) {
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	p, err := startProcess(cmd, logPath)
	if err != nil {
		return nil, fmt.Errorf("as %d:%d: %w", uid, gid, err)
	}
	return p, nil
}

func startProcess(cmd *exec.Cmd, logPath string) (*Process, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	return startCmd(cmd, logFile)
}

// startWithLog runs bin with args, logging to an open file.
func startWithLog(bin string, args []string, logFile *os.File) (*Process, error) {
	return startCmd(exec.Command(bin, args...), logFile)
}

func startCmd(cmd *exec.Cmd, logFile *os.File) (*Process, error) {
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", cmd.Path, err)
	}
	p := &Process{cmd: cmd, log: logFile, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Stop sends SIGTERM and waits for the process to exit.
func (p *Process) Stop() { p.signal(syscall.SIGTERM) }

// Kill ends the process with SIGKILL, as a crash or an OOM kill would, and
// waits for it. Stop after Kill does nothing.
func (p *Process) Kill() { p.signal(syscall.SIGKILL) }

// StopWithin sends SIGTERM and, if the process has not exited within
// grace, SIGKILL; it waits for the exit.
func (p *Process) StopWithin(grace time.Duration) {
	if p.stopped {
		return
	}
	t := time.AfterFunc(grace, func() { _ = p.cmd.Process.Signal(syscall.SIGKILL) })
	defer t.Stop()
	p.signal(syscall.SIGTERM)
}

func (p *Process) signal(sig syscall.Signal) {
	if p.stopped {
		return
	}
	p.stopped = true
	_ = p.cmd.Process.Signal(sig)
	// A process paused with SIGSTOP (SignalStop) acts on no signal but
	// SIGKILL until it runs again.
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	<-p.exited
	_ = p.log.Close()
}
