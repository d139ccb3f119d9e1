package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// Netns is a network namespace with a veth pair to the host's: a process run
// in it (Command) has an address of its own, NSIP, that the host reaches
// over the pair and that an EndpointSlice accepts (validation refuses
// loopback and link-local addresses, so a server on 127.0.0.1 cannot be an
// APIService's endpoint). The host's end has HostIP. The addresses come from
// 198.18.0.0/15, the range reserved for benchmarking networks (RFC 2544),
// never the machine's own.
//
// Creating one needs root and iproute2's ip (make envtest-bin checks for it).
type Netns struct {
	Name   string
	HostIP string
	NSIP   string
}

// ErrNoNetns: this machine cannot create network namespaces (not root, or
// no ip command).
var ErrNoNetns = errors.New("network namespaces need root and iproute2's ip command")

// CanCreateNetns reports why a network namespace cannot be created (nil if it can).
func CanCreateNetns() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: running as uid %d", ErrNoNetns, os.Geteuid())
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("%w: %w", ErrNoNetns, err)
	}
	return nil
}

const netnsPrefix = "berth-sandbox-"

// CreateNetns creates a network namespace named after this process, with a
// /30 of 198.18.0.0/15 that no interface of the host has. Namespaces left by
// sandboxes whose process is gone (killed before Delete) are removed first.
func CreateNetns() (*Netns, error) {
	if err := CanCreateNetns(); err != nil {
		return nil, err
	}
	removeStaleNetns()
	used, err := ipOut("-o", "-4", "addr", "show")
	if err != nil {
		return nil, err
	}
	pid := os.Getpid()
	for i := range 256 * 64 {
		third, fourth := (pid+i/64)%256, (i%64)*4
		host := fmt.Sprintf("198.18.%d.%d", third, fourth+1)
		if strings.Contains(used, " "+host+"/") {
			continue
		}
		n := &Netns{Name: fmt.Sprintf("%s%d-%d", netnsPrefix, pid, i), HostIP: host, NSIP: fmt.Sprintf("198.18.%d.%d", third, fourth+2)}
		if err := n.create(fmt.Sprintf("bs%dh%d", pid, i), fmt.Sprintf("bs%dn%d", pid, i)); err != nil {
			_ = n.Delete()
			return nil, err
		}
		return n, nil
	}
	return nil, fmt.Errorf("no free /30 in 198.18.0.0/15")
}

func (n *Netns) create(hostIf, nsIf string) error {
	if len(hostIf) > 15 || len(nsIf) > 15 {
		return fmt.Errorf("interface names %s, %s are longer than 15 characters", hostIf, nsIf)
	}
	for _, args := range [][]string{
		{"netns", "add", n.Name},
		{"link", "add", hostIf, "type", "veth", "peer", "name", nsIf},
		{"link", "set", nsIf, "netns", n.Name},
		{"addr", "add", n.HostIP + "/30", "dev", hostIf},
		{"link", "set", hostIf, "up"},
		{"-n", n.Name, "addr", "add", n.NSIP + "/30", "dev", nsIf},
		{"-n", n.Name, "link", "set", nsIf, "up"},
		{"-n", n.Name, "link", "set", "lo", "up"},
	} {
		if _, err := ipOut(args...); err != nil {
			return err
		}
	}
	return nil
}

// Command runs bin in the namespace (ip netns exec replaces itself with bin,
// so the process is bin's).
func (n *Netns) Command(bin string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", n.Name, bin}, args...)...)
}

// Delete removes the namespace, and with it both ends of the veth pair.
// Processes still running in it must be stopped first.
func (n *Netns) Delete() error {
	_, err := ipOut("netns", "delete", n.Name)
	return err
}

func removeStaleNetns() {
	list, err := ipOut("netns", "list")
	if err != nil {
		return
	}
	for _, line := range strings.Split(list, "\n") {
		name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		rest, ok := strings.CutPrefix(name, netnsPrefix)
		if !ok {
			continue
		}
		pidText, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || processAlive(pid) {
			continue
		}
		_, _ = ipOut("netns", "delete", name)
	}
}

func processAlive(pid int) bool {
	return syscall.Kill(pid, 0) == nil
}

func ipOut(args ...string) (string, error) {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}
