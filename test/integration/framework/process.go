package framework

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// SchedulerProcess is bin/scheduler running as a process of its own, as
// operators run it.
type SchedulerProcess struct {
	cmd *exec.Cmd
	log *os.File
	// exited is closed when the process ends, if a goroutine waits for it.
	exited chan struct{}
	// stopped: Stop or Kill ran (the process is waited for once).
	stopped bool
}

// StartSchedulerProcess runs bin --config=configFile with serving off,
// logging to logPath. It gets its own process group, so that a Ctrl-C meant
// for the caller reaches the caller, which then stops it in order.
func StartSchedulerProcess(bin, configFile, logPath string, extraArgs ...string) (*SchedulerProcess, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	args := append([]string{"--config=" + configFile, "--secure-port=0"}, extraArgs...)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	return &SchedulerProcess{cmd: cmd, log: logFile}, nil
}

// StartProcessAs runs bin with exactly args as uid:gid (the caller must be
// root), logging to logPath, in a process group of its own: a static Pod's
// command as the kubelet would run it.
func StartProcessAs(bin string, args []string, uid, gid uint32, logPath string) (*SchedulerProcess, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting %s as %d:%d: %w", bin, uid, gid, err)
	}
	p := &SchedulerProcess{cmd: cmd, log: logFile, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// Exited reports whether the process has ended (only for StartProcessAs).
func (p *SchedulerProcess) Exited() bool {
	if p.exited == nil {
		return false
	}
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// Pid is the process id.
func (p *SchedulerProcess) Pid() int { return p.cmd.Process.Pid }

// Stop sends SIGTERM and waits for the process to exit.
func (p *SchedulerProcess) Stop() { p.signal(syscall.SIGTERM) }

// Kill ends the process with SIGKILL, as a crash or an OOM kill would, and
// waits for it. Stop after Kill does nothing.
func (p *SchedulerProcess) Kill() { p.signal(syscall.SIGKILL) }

func (p *SchedulerProcess) signal(sig syscall.Signal) {
	if p.stopped {
		return
	}
	p.stopped = true
	_ = p.cmd.Process.Signal(sig)
	if p.exited != nil {
		<-p.exited
	} else {
		_ = p.cmd.Wait()
	}
	_ = p.log.Close()
}
