{{/*
Names. The StatefulSet's name is cut to 52 characters: its pods carry the label
controller-revision-hash = "<statefulset>-<10 characters>", which must fit in 63, and
"<fullname>-headless" then fits too.
*/}}
{{- define "openlake.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 52 | trimSuffix "-" -}}
{{- end }}

{{- define "openlake.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end }}

{{/* The headless Service that gives each pod its stable DNS name. */}}
{{- define "openlake.headless" -}}
{{- include "openlake.fullname" . }}-headless
{{- end }}

{{- define "openlake.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end }}

{{- define "openlake.selectorLabels" -}}
app.kubernetes.io/name: {{ include "openlake.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "openlake.labels" -}}
helm.sh/chart: {{ include "openlake.chart" . }}
{{ include "openlake.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "openlake.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end }}

{{/* The Secret the credentials come from: the user's, or the one this chart makes. */}}
{{- define "openlake.secretName" -}}
{{- default (include "openlake.fullname" .) .Values.auth.existingSecret -}}
{{- end }}

{{/*
One key of the chart's Secret, base64-encoded and quoted, from a dict: "given" (the auth.* value),
"old" (the data of the Secret as it stands, {} when there is none), "key", and "fresh" (a random
value). The given value wins, then the one already stored, so an upgrade keeps what it made.
*/}}
{{- define "openlake.credential" -}}
{{- if .given -}}
{{- .given | toString | b64enc | quote -}}
{{- else if index .old .key -}}
{{- index .old .key | quote -}}
{{- else -}}
{{- .fresh | b64enc | quote -}}
{{- end -}}
{{- end }}

{{/* Drives per pod: one per host path when those are given, else drives.count. */}}
{{- define "openlake.driveCount" -}}
{{- if .Values.drives.hostPaths }}{{ len .Values.drives.hostPaths }}{{ else }}{{ int .Values.drives.count }}{{ end -}}
{{- end }}

{{/*
The memory a pod requests and is limited to when resources does not say: the KV slab (which is
charged to the pod as it fills) plus memoryOverheadGb. Empty with kv.cpuRamFrac, whose size
depends on the node.
*/}}
{{- define "openlake.memory" -}}
{{- if not (and .Values.kv.enabled .Values.kv.cpuRamFrac) -}}
{{- $slab := 0 -}}
{{- if .Values.kv.enabled }}{{ $slab = int (ceil .Values.kv.capacityGb) }}{{ end -}}
{{- printf "%dGi" (add $slab .Values.memoryOverheadGb) -}}
{{- end -}}
{{- end }}
