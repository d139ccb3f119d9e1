package elasticquota

import (
	"context"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// writeStatus writes status.used of the quotas whose usage changed since the
// last round. It does nothing until this process schedules (PreFilter ran):
// kube-scheduler runs scheduling cycles only while it holds the lease, so
// replicas waiting for it write nothing.
func (sh *shared) writeStatus(ctx context.Context) {
	sh.mgr.expirePreempted()
	if !sh.active.Load() {
		return
	}
	logger := klog.FromContext(ctx)
	for _, ns := range sh.mgr.takeDirty() {
		used, q := sh.mgr.usedOf(ns)
		if q == nil {
			continue
		}
		eq, err := sh.eqLister.ElasticQuotas(ns).Get(q.name)
		if err != nil {
			continue // deleted meanwhile
		}
		if apiequality.Semantic.DeepEqual(eq.Status.Used, used) {
			continue
		}
		eq = eq.DeepCopy()
		eq.Status.Used = used
		_, err = sh.eqClient.SchedulingV1alpha1().ElasticQuotas(ns).UpdateStatus(ctx, eq, metav1.UpdateOptions{})
		switch {
		case err == nil:
			statusWritesTotal.WithLabelValues("ok").Inc()
		case apierrors.IsNotFound(err):
		default:
			statusWritesTotal.WithLabelValues("error").Inc()
			logger.Error(err, "ElasticQuota: writing status.used failed; retrying next round", "quota", klog.KObj(eq))
			sh.mgr.markDirty(ns)
		}
	}
}
