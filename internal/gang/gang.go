// Package gang lets a plugin ask which members of a pod's gang (a
// scheduler-plugins PodGroup, as Coscheduling sees it) are still to be
// placed, without depending on the Coscheduling plugin: ElasticQuota admits a
// gang only if all of them fit the namespace's quota.
package gang

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/berth-scheduler/berth/internal/perclient"
)

// Members is what Coscheduling publishes for one cluster.
type Members interface {
	// ToPlace returns, for a pod of a gang that has fewer than minMember
	// members placed, the gang's key and the members still needed to reach
	// minMember (pod first); ok is false for a pod of no gang, or one whose
	// gang needs no member but pod.
	ToPlace(pod *v1.Pod) (group string, pods []*v1.Pod, ok bool)
}

var sources perclient.Registry[Members]

// Provide publishes m for client's cluster until ctx ends.
func Provide(ctx context.Context, client kubernetes.Interface, m Members) error {
	_, err := sources.Get(ctx, client, nil, func() (Members, error) { return m, nil })
	return err
}

// For returns the Members published for client's cluster, or nil when no
// profile of the scheduler enables Coscheduling.
func For(client kubernetes.Interface) Members {
	m, _ := sources.Lookup(client)
	return m
}
