package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// ControllerManager is the real kube-controller-manager (built by make
// envtest-bin at the Kubernetes version go.mod pins) running against a
// ControlPlane: the Deployment, ReplicaSet, Job and StatefulSet controllers
// create and replace pods as in production, the garbage collector deletes
// what an owner's deletion orphans, PodGC removes pods of deleted nodes, and
// the node lifecycle controller taints nodes whose kubelet (KWOK's) stops
// reporting.
type ControllerManager struct {
	*Process
	logPath string
}

// ControllerManagerOptions tune the controller manager for a sandbox.
type ControllerManagerOptions struct {
	// Controllers is kube-controller-manager's --controllers; empty means
	// every controller on by default ("*").
	Controllers []string
	// NodeMonitorGracePeriod is how long a node may go without a heartbeat
	// (its Lease) before the node lifecycle controller marks it Unknown;
	// zero keeps upstream's default (50s).
	NodeMonitorGracePeriod time.Duration
	// ExtraArgs are more flags, "--name=value".
	ExtraArgs []string
}

// StartControllerManager runs bin for cp, without serving (secure port 0)
// or leader election (one instance per sandbox), and waits until its
// ServiceAccount controller has created the default namespace's
// ServiceAccount: the controllers are then running.
func StartControllerManager(ctx context.Context, cp *ControlPlane, bin string, o ControllerManagerOptions) (*ControllerManager, error) {
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("kube-controller-manager binary: %w (make envtest-bin builds it)", err)
	}
	controllers := "*"
	if len(o.Controllers) > 0 {
		controllers = strings.Join(o.Controllers, ",")
	}
	args := []string{
		"--kubeconfig=" + cp.Kubeconfig,
		"--secure-port=0",
		"--leader-elect=false",
		"--controllers=" + controllers,
		// A thousand nodes and a churning workload: upstream's 20 QPS
		// makes the ReplicaSet controller the bottleneck of a soak.
		"--kube-api-qps=200",
		"--kube-api-burst=400",
		// The token controller fills kubernetes.io/service-account-token
		// Secrets (the chart's metrics token) with tokens the API server
		// accepts.
		"--service-account-private-key-file=" + cp.ServiceAccountSigningKey(),
	}
	if o.NodeMonitorGracePeriod > 0 {
		args = append(args, "--node-monitor-grace-period="+o.NodeMonitorGracePeriod.String())
	}
	args = append(args, o.ExtraArgs...)
	logPath := filepath.Join(cp.Dir, "kube-controller-manager.log")
	p, err := StartProcess(bin, args, logPath)
	if err != nil {
		return nil, err
	}
	cm := &ControllerManager{Process: p, logPath: logPath}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if p.Exited() {
			return false, fmt.Errorf("kube-controller-manager exited; the end of its log:\n%s", logTail(logPath))
		}
		_, err := cp.Client.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, nil
	})
	if err != nil {
		p.Stop()
		return nil, fmt.Errorf("waiting for kube-controller-manager's controllers: %w (log: %s)", err, logPath)
	}
	return cm, nil
}

// LogPath is the controller manager's log.
func (cm *ControllerManager) LogPath() string { return cm.logPath }
