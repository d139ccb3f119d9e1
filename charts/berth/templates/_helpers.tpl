{{/* app.kubernetes.io/name: the chart's name, or nameOverride. */}}
{{- define "berth.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Base name of every namespaced object (Helm's convention):
fullnameOverride, else the release name when it holds the chart's name
(release berth-scheduler: berth-scheduler), else <release>-<name>. */}}
{{- define "berth.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "berth.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Prefix of the cluster-scoped objects' names (ClusterRoles and their
bindings): <fullname>:<namespace>, so that releases of one name in two
namespaces do not take each other's. */}}
{{- define "berth.clusterName" -}}
{{- printf "%s:%s" (include "berth.fullname" .) .Release.Namespace -}}
{{- end -}}

{{/* The Deployment's selector (Helm's standard pair): the chart's name and
the release. */}}
{{- define "berth.selectorLabels" -}}
app.kubernetes.io/name: {{ include "berth.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* helm.sh/chart's value: name-version, a label value ('+' is not). */}}
{{- define "berth.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Every object's labels: Helm's standard set (helm.sh/chart and
managed-by, which hack/render-chart.sh leaves out of the kustomize base) and
commonLabels. The pod template has the selector's, commonLabels and podLabels
only (a chart upgrade alone must not roll the pods). */}}
{{- define "berth.labels" -}}
{{ include "berth.selectorLabels" . }}
helm.sh/chart: {{ include "berth.chart" . }}
app.kubernetes.io/version: {{ include "berth.appVersion" . | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: berth
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The metrics Service's name, which is also Prometheus' job label the
alerts select: <fullname>-metrics within a Service name's 63 characters. */}}
{{- define "berth.metricsServiceName" -}}
{{- printf "%s-metrics" (include "berth.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "berth.serviceAccountName" -}}
{{- default (include "berth.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{- define "berth.leaseName" -}}
{{- default (include "berth.fullname" .) .Values.leaderElection.resourceName -}}
{{- end -}}

{{/* The Lease's namespace; refuses the control plane scheduler's lease. */}}
{{- define "berth.leaseNamespace" -}}
{{- $ns := default .Release.Namespace .Values.leaderElection.resourceNamespace -}}
{{- if and (eq $ns "kube-system") (eq (include "berth.leaseName" .) "kube-scheduler") -}}
{{- fail "leaderElection: kube-system/kube-scheduler is the control plane scheduler's lease; a second scheduler taking it would stop the control plane's (set leaderElection.resourceName)" -}}
{{- end -}}
{{- $ns -}}
{{- end -}}

{{/* The appVersion as a label value and an image tag: a version built
from an untagged commit carries build metadata ("v0.1.0-dev+abc1234"),
and "+" is allowed in neither; joined with "-", as make image tags it. */}}
{{- define "berth.appVersion" -}}
{{- .Chart.AppVersion | replace "+" "-" -}}
{{- end -}}

{{- define "berth.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ default (include "berth.appVersion" .) .Values.image.tag }}
{{- end -}}
{{- end -}}

{{/* The first profile's schedulerName: its own, else .Values.schedulerName
(the name pods set, helm test's pod among them). */}}
{{- define "berth.schedulerName" -}}
{{- $first := first (default (list dict) .Values.profiles) -}}
{{- default .Values.schedulerName $first.schedulerName -}}
{{- end -}}

{{/* The KubeSchedulerConfiguration of the ConfigMap. */}}
{{- define "berth.config" -}}
{{- $profiles := list -}}
{{- range $i, $p := .Values.profiles -}}
{{- if eq $i 0 -}}
{{- $p = merge (dict "schedulerName" (include "berth.schedulerName" $)) $p -}}
{{- end -}}
{{- $profiles = append $profiles $p -}}
{{- end -}}
{{- $cfg := dict
  "apiVersion" "kubescheduler.config.k8s.io/v1"
  "kind" "KubeSchedulerConfiguration"
  "leaderElection" (dict "leaderElect" true "resourceNamespace" (include "berth.leaseNamespace" .) "resourceName" (include "berth.leaseName" .))
  "clientConnection" (dict "qps" .Values.clientConnection.qps "burst" .Values.clientConnection.burst)
  "profiles" $profiles -}}
{{- toYaml (mergeOverwrite $cfg (deepCopy .Values.extraConfig)) -}}
{{- end -}}
