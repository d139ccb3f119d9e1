package mutant

// Name is a planted fault.
type Name string

// The planted faults, each a bug a scheduler plugin could ship with, and the
// soak invariant that must catch it (docs/soak.md, "Planted bugs").
const (
	// ConfirmBinderSkips: ConfirmBinder binds without confirming the node
	// still fits (a stale cache after a paused leader wakes).
	ConfirmBinderSkips Name = "confirmbinder-skips-check"
	// QuotaIgnoresMax: ElasticQuota admits a pod over its namespace's max.
	QuotaIgnoresMax Name = "elasticquota-ignores-max"
	// ReclaimIgnoresMin: reclaim takes victims from a namespace at or below
	// its min.
	ReclaimIgnoresMin Name = "reclaim-ignores-min"
	// PreemptsHigherPriority: a preemptor takes a victim of its own
	// namespace whatever the victim's priority.
	PreemptsHigherPriority Name = "preempts-higher-priority"
	// GangOneShort: Coscheduling releases a gang when one member short of
	// minMember is placed.
	GangOneShort Name = "coscheduling-one-short"
	// ForgetsRefusals: AdmissionFeedback records no refusal.
	ForgetsRefusals Name = "admissionfeedback-forgets"
	// SchedulesWithoutLease: the replica schedules without leader
	// election (two replicas bind at once, as a leader that keeps binding
	// after losing its lease would).
	SchedulesWithoutLease Name = "schedules-without-lease"
	// ExplainForgetsPending: Explain takes a pending pod's explanation
	// from its budget and never writes it (the pod that asked is left
	// without one, and nothing is logged as refused).
	ExplainForgetsPending Name = "explain-forgets-pending"
)

// All lists every planted fault, in the order `make soak-mutants` runs them.
var All = []Name{ConfirmBinderSkips, QuotaIgnoresMax, ReclaimIgnoresMin, PreemptsHigherPriority, GangOneShort, ForgetsRefusals, SchedulesWithoutLease, ExplainForgetsPending}
