#!/usr/bin/env bash
# The container a user runs, under a real kubelet: the GitHub workflow
# .github/workflows/kind.yml runs this on a runner with a Docker engine (this
# repository's own CI has none). It builds the image (make image), creates a
# kind cluster (kind's own default node image, pinned by digest in the kind
# release go.mod's tool line names), loads the image, and then:
#
#  1. as the second scheduler: the chart packaged as make release packages
#     it (make chart), installed with the ServiceMonitor on; helm test; pods
#     through every plugin of the chart's default profile (a CELPolicy rule,
#     LoadAware without metrics-server (fail-open), an ElasticQuota whose
#     status.used counts the pods, a PodGroup gang, ConfirmBinder's binding,
#     AdmissionFeedback, and Explain, read back with kubectl berth explain);
#     /metrics of the leader, with the token of the Secret the
#     ServiceMonitor's authorization names;
#  2. in place of the control plane's kube-scheduler: manifests/control-plane
#     (the static Pod with Berth's image, its config, its RBAC), the kubelet
#     restarts the scheduler, and a default-scheduler pod is scheduled by it.
#
# make kind-e2e runs it with KIND, KUBECTL, HELM, PROM_CRDS and CHART (make
# chart's package of this commit) set to what it built (kind from hack/tools/kind, kubectl and helm as the suites use
# them). Needs docker, go, curl. Leaves the cluster for inspection when
# KEEP=1.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${KIND:?}" "${KUBECTL:?}" "${HELM:?}" "${PROM_CRDS:?}" "${CHART:?}"

cluster=${CLUSTER:-berth-e2e}
image_repo=berth-e2e/berth
image_tag=ci
image="$image_repo:$image_tag"
bin=$PWD/bin
log() { printf '>> [%s] %s\n' "$(date -u +%H:%M:%S)" "$*"; }

kind=$KIND kubectl=$KUBECTL helm=$HELM
log "building the image $image (make image)"
make --no-print-directory image IMAGE="$image"

cleanup() {
  if [[ ${KEEP:-} != 1 ]]; then "$kind" delete cluster --name "$cluster" >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT

log "creating the kind cluster $cluster (one control-plane node, one worker)"
cat > "$bin/kind-e2e.yaml" <<'EOF'
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
nodes:
- role: control-plane
- role: worker
EOF
"$kind" create cluster --name "$cluster" --config "$bin/kind-e2e.yaml" --wait 3m
"$kind" load docker-image "$image" --name "$cluster"
export KUBECONFIG="$bin/kind-e2e.kubeconfig"
"$kind" get kubeconfig --name "$cluster" > "$KUBECONFIG"

# dump: what a failure needs to be read from the job's log.
dump() {
  log "state at failure"
  "$kubectl" get pods -A -o wide || true
  "$kubectl" -n berth-system logs deploy/berth-scheduler --tail=100 || true
  "$kubectl" -n kube-system logs "kube-scheduler-$cluster-control-plane" --tail=100 || true
  "$kubectl" get events -A --sort-by=.lastTimestamp | tail -40 || true
}
trap 'dump; cleanup' ERR
# fail MESSAGE: a check that failed (an explicit exit fires no ERR trap).
fail() {
  echo "FAIL: $*" >&2
  dump
  exit 1
}

log "1. as the second scheduler, from the packaged chart"
"$kubectl" apply --server-side -k manifests/crds
"$kubectl" apply --server-side -f "$PROM_CRDS/monitoring.coreos.com_servicemonitors.yaml"
"$kubectl" wait --for=condition=Established crd/servicemonitors.monitoring.coreos.com crd/elasticquotas.scheduling.x-k8s.io crd/podgroups.scheduling.x-k8s.io --timeout 60s
"$helm" install berth-scheduler "$CHART" --namespace berth-system --create-namespace \
  --set image.repository="$image_repo" --set image.tag="$image_tag" --set image.pullPolicy=Never \
  --set replicaCount=2 --set metrics.serviceMonitor.enabled=true --wait --timeout 5m
"$helm" test berth-scheduler --namespace berth-system --timeout 3m

log "pods through every plugin of the chart's default profile"
# Pods that keep running (so that the quota's used stays): the pause image
# every kind node holds for its sandboxes (the scheduler's image has no
# long-running command).
pause=$(docker exec "$cluster-worker" crictl images -o json | grep -o '"registry.k8s.io/pause:[^"]*"' | head -1 | tr -d '"')
[[ -n $pause ]] || fail "no pause image on the kind node"
"$kubectl" apply -f - <<'EOF'
apiVersion: v1
kind: Namespace
metadata: {name: e2e-team}
---
apiVersion: scheduling.x-k8s.io/v1alpha1
kind: ElasticQuota
metadata: {name: team, namespace: e2e-team}
spec:
  min: {cpu: "1", memory: 1Gi}
  max: {cpu: "2", memory: 2Gi}
---
apiVersion: scheduling.x-k8s.io/v1alpha1
kind: PodGroup
metadata: {name: gang, namespace: e2e-team}
spec: {minMember: 2}
EOF
for i in 1 2; do
  "$kubectl" apply -f - <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: gang-$i
  namespace: e2e-team
  labels: {scheduling.x-k8s.io/pod-group: gang}
spec:
  schedulerName: berth-scheduler
  containers:
  - {name: c, image: $pause, imagePullPolicy: Never, resources: {requests: {cpu: 100m, memory: 64Mi}}}
EOF
done
"$kubectl" apply -f - <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: explained
  namespace: e2e-team
  annotations: {explain.berth.dev/request: "true"}
spec:
  schedulerName: berth-scheduler
  containers:
  - {name: c, image: $pause, imagePullPolicy: Never, resources: {requests: {cpu: 100m, memory: 64Mi}}}
EOF
"$kubectl" -n e2e-team wait --for=condition=PodScheduled pod/gang-1 pod/gang-2 pod/explained --timeout 2m
# ElasticQuota's status writer runs every 2 s: three pods of 100m.
for _ in $(seq 30); do
  [[ $("$kubectl" -n e2e-team get elasticquota team -o jsonpath='{.status.used.cpu}') == 300m ]] && break
  sleep 2
done
[[ $("$kubectl" -n e2e-team get elasticquota team -o jsonpath='{.status.used.cpu}') == 300m ]] \
  || fail "ElasticQuota team's status.used.cpu is not 300m"
out=$("$bin/kubectl-berth" explain explained -n e2e-team)
echo "$out"
grep -q "$("$kubectl" -n e2e-team get pod explained -o jsonpath='{.spec.nodeName}')" <<<"$out" \
  || fail "kubectl berth explain does not name the pod's node"

log "/metrics through the ServiceMonitor's path (its Service, its token)"
secret=$("$kubectl" -n berth-system get servicemonitor berth-scheduler -o jsonpath='{.spec.endpoints[0].authorization.credentials.name}')
token=$("$kubectl" -n berth-system get secret "$secret" -o jsonpath='{.data.token}' | base64 -d)
# The leader's pod (the standby has scheduled nothing): the Service's
# endpoint that holds the Lease, named by the Lease's holder (hostname_uuid).
leader=$("$kubectl" -n berth-system get lease berth-scheduler -o jsonpath='{.spec.holderIdentity}')
leader=${leader%%_*}
[[ -n $leader ]] || fail "no holder of the Lease berth-system/berth-scheduler"
"$kubectl" -n berth-system port-forward "pod/$leader" 10259:10259 >/dev/null 2>&1 &
forward=$!
metrics=""
for _ in $(seq 30); do
  metrics=$(curl -sfk -H "Authorization: Bearer $token" https://127.0.0.1:10259/metrics) && break
  sleep 2
done
code=$(curl -sk -o /dev/null -w '%{http_code}' https://127.0.0.1:10259/metrics || true)
kill "$forward" 2>/dev/null || true
[[ $code == 401 || $code == 403 ]] || fail "an anonymous scrape got $code, not 401/403"
grep -q '^berth_build_info' <<<"$metrics" || fail "no berth_build_info on the leader's /metrics"
grep -q '^scheduler_schedule_attempts_total' <<<"$metrics" || fail "no scheduler_schedule_attempts_total on the leader's /metrics"
log "/metrics served with the ServiceMonitor's token, berth_ series present"
"$helm" uninstall berth-scheduler --namespace berth-system --wait

log "2. in place of the control plane's kube-scheduler (kubeadm's static Pod)"
"$kubectl" apply -f manifests/control-plane/rbac.yaml
node="$cluster-control-plane"
docker exec "$node" mkdir -p /etc/kubernetes/berth
docker cp manifests/control-plane/scheduler-config.yaml "$node:/etc/kubernetes/berth/scheduler-config.yaml"
sed "s|image: ghcr.io/berth-scheduler/berth:.*|image: $image|; s|imagePullPolicy: .*|imagePullPolicy: Never|" \
  manifests/control-plane/kube-scheduler.yaml > "$bin/kind-e2e-kube-scheduler.yaml"
docker cp "$bin/kind-e2e-kube-scheduler.yaml" "$node:/etc/kubernetes/manifests/kube-scheduler.yaml"
for _ in $(seq 60); do
  if [[ $("$kubectl" -n kube-system get pod "kube-scheduler-$node" -o jsonpath='{.spec.containers[0].image}' 2>/dev/null) == "$image" ]] &&
    "$kubectl" -n kube-system wait --for=condition=Ready "pod/kube-scheduler-$node" --timeout 5s >/dev/null 2>&1; then
    break
  fi
  sleep 5
done
"$kubectl" -n kube-system get pod "kube-scheduler-$node" -o jsonpath='{.spec.containers[0].image}' | grep -qx "$image" \
  || fail "the kubelet did not restart the scheduler with $image"
"$kubectl" run e2e-default --image "$pause" --image-pull-policy Never
"$kubectl" wait --for=condition=PodScheduled pod/e2e-default --timeout 2m
"$kubectl" -n kube-system logs "kube-scheduler-$node" | grep -m1 "Berth" || true
log "done: the image ran as the second scheduler and as the control plane's"
