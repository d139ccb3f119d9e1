{{/* Base name of every object: nameOverride, else the release name. */}}
{{- define "berth.name" -}}
{{- default .Release.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The Deployment's selector: the name alone, as manifests/second-scheduler
had it before the chart (a selector cannot change on a live Deployment). */}}
{{- define "berth.selectorLabels" -}}
app.kubernetes.io/name: {{ include "berth.name" . }}
{{- end -}}

{{/* helm.sh/chart's value: name-version, a label value ('+' is not). */}}
{{- define "berth.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Every object's labels: Helm's standard set (helm.sh/chart and
managed-by, which hack/render-chart.sh leaves out of the kustomize base),
never on the pod template (a chart upgrade alone must not roll the pods). */}}
{{- define "berth.labels" -}}
{{ include "berth.selectorLabels" . }}
helm.sh/chart: {{ include "berth.chart" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ include "berth.appVersion" . | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: berth
{{- end -}}

{{- define "berth.serviceAccountName" -}}
{{- default (include "berth.name" .) .Values.serviceAccount.name -}}
{{- end -}}

{{- define "berth.leaseName" -}}
{{- default (include "berth.name" .) .Values.leaderElection.resourceName -}}
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
