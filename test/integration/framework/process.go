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

// Pid is the process id.
func (p *SchedulerProcess) Pid() int { return p.cmd.Process.Pid }

// Stop sends SIGTERM and waits for the process to exit.
func (p *SchedulerProcess) Stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	_ = p.cmd.Wait()
	_ = p.log.Close()
}
