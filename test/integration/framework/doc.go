// Package framework is what only Berth's integration suites need on top of
// internal/sandbox (which brings up the control plane, metrics-server and
// the stand-ins for kubelets and controllers, and is shared with make demo):
// Berth's scheduler in-process, built from a KubeSchedulerConfiguration file
// through upstream's app.Setup and app.Run — the code path of the binary —
// with test-only plugins (TestHold) beside Berth's, and readers of its
// metrics registry.
package framework
