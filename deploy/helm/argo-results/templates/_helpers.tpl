{{/*
The chart's name, app.kubernetes.io/name: nameOverride or argo-results.
*/}}
{{- define "argo-results.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The prefix of the objects' names: fullnameOverride, or the release name when it contains
the chart's name, or <release>-<name> (as argo-helm's charts name theirs).
*/}}
{{- define "argo-results.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The namespace of the namespaced objects.
*/}}
{{- define "argo-results.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
helm.sh/chart: <chart>-<version>.
*/}}
{{- define "argo-results.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The image's tag: image.tag or the chart's appVersion.
*/}}
{{- define "argo-results.tag" -}}
{{- default .Chart.AppVersion .Values.image.tag -}}
{{- end -}}

{{/*
The image: [registry/]repository:tag, or [registry/]repository@digest when image.digest is
set.
*/}}
{{- define "argo-results.image" -}}
{{- $repository := .Values.image.repository -}}
{{- if .Values.image.registry -}}
{{- $repository = printf "%s/%s" (trimSuffix "/" .Values.image.registry) $repository -}}
{{- end -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" $repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repository (include "argo-results.tag" .) -}}
{{- end -}}
{{- end -}}

{{/*
The selector labels: app.kubernetes.io/name alone, as deploy/base selects its pods (a
Deployment's selector cannot change, so the chart's and the base's are the same). One
release per namespace.
*/}}
{{- define "argo-results.selectorLabels" -}}
app.kubernetes.io/name: {{ include "argo-results.name" . }}
{{- end -}}

{{/*
The labels of every object and pod: the selector labels, then the recommended ones.
*/}}
{{- define "argo-results.labels" -}}
{{ include "argo-results.selectorLabels" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: server
app.kubernetes.io/part-of: argo-results
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ regexReplaceAll "[^-A-Za-z0-9_.]" (include "argo-results.tag" .) "_" | trunc 63 | trimSuffix "-" | quote }}
helm.sh/chart: {{ include "argo-results.chart" . }}
{{- end -}}

{{/*
The server's ServiceAccount.
*/}}
{{- define "argo-results.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "argo-results.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
The pods' priorityClassName: priorityClassName, or the chart's class when it creates one.
*/}}
{{- define "argo-results.priorityClassName" -}}
{{- if .Values.priorityClassName -}}
{{- .Values.priorityClassName -}}
{{- else if .Values.priorityClass.create -}}
{{- include "argo-results.fullname" . -}}
{{- end -}}
{{- end -}}

{{/*
The ConfigMap of the server's flags.
*/}}
{{- define "argo-results.configMapName" -}}
{{- printf "%s-config" (include "argo-results.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The ConfigMap's data, as JSON (keys sorted): config without its null entries, every value a
string. The pods' checksum/config annotation is its sha256, so that a change of a flag rolls
the Deployment, as the hash in the name of deploy/base's generated ConfigMap does.
*/}}
{{- define "argo-results.configData" -}}
{{- $data := dict -}}
{{- range $key, $value := .Values.config -}}
{{- if not (kindIs "invalid" $value) -}}
{{- if or (kindIs "map" $value) (kindIs "slice" $value) -}}
{{- fail (printf "config.%s: a flag's value is a string, not %s" $key (kindOf $value)) -}}
{{- end -}}
{{- $_ := set $data $key (toString $value) -}}
{{- end -}}
{{- end -}}
{{- toJson $data -}}
{{- end -}}

{{/*
The port of the listen address of flag $flag (host:port) in config: the container's port.
Called with (list $ "ARGO_RESULTS_LISTEN").
*/}}
{{- define "argo-results.listenPort" -}}
{{- $root := index . 0 -}}
{{- $flag := index . 1 -}}
{{- $address := toString (required (printf "config.%s is required: the container's port is its port" $flag) (index $root.Values.config $flag)) -}}
{{- $port := regexFind "[0-9]+$" $address -}}
{{- if not $port -}}
{{- fail (printf "config.%s: %q has no port" $flag $address) -}}
{{- end -}}
{{- $port -}}
{{- end -}}
