{{/*
openlaked.toml, the same for every pod: each pod's ordinal replaces self_id through
OPENLAKE_SELF_ID, and the credentials come from the Secret through the environment.
*/}}
{{- define "openlake.config" -}}
{{- if not (or .Values.kv.enabled .Values.s3.enabled) }}
{{- fail "kv.enabled and s3.enabled are both false: openlaked would serve nothing" }}
{{- end }}
{{- $drives := int (include "openlake.driveCount" .) -}}
{{- $fullname := include "openlake.fullname" . -}}
{{- $headless := include "openlake.headless" . -}}
# openlaked's config from the {{ .Chart.Name }} chart {{ .Chart.Version }}, release {{ .Release.Name }}
# (keys: docs/configuration.md). It holds no secret: openlaked takes rpc_secret, admin_token
# and the S3 key pair from OPENLAKE_* variables (the Secret), and self_id from OPENLAKE_SELF_ID
# (the pod's ordinal).
self_id = 0
mode = {{ if .Values.s3.enabled }}"storage"{{ else }}"kv"{{ end }}
rpc_addr = "0.0.0.0:{{ .Values.ports.rpc }}"
admin_addr = "0.0.0.0:{{ .Values.ports.admin }}"
kv_socket = "/run/openlake/kv/kv-{{ .Values.ports.rpc }}.sock"
{{- with .Values.config.cores }}
cores = [{{ range $i, $c := . }}{{ if $i }}, {{ end }}{{ $c }}{{ end }}]
{{- end }}
{{- if .Values.s3.enabled }}
{{- if lt $drives 1 }}
{{- fail "s3.enabled needs at least one drive (drives.count or drives.hostPaths)" }}
{{- end }}
s3_addr = "0.0.0.0:{{ .Values.ports.s3 }}"
region = {{ .Values.s3.region | quote }}
data_dirs = [{{ range $i := until $drives }}{{ if $i }}, {{ end }}"{{ $.Values.drives.mountPath }}/d{{ $i }}"{{ end }}]
set_drive_count = {{ .Values.drives.setDriveCount }}
default_parity_count = {{ .Values.drives.parityCount }}
heal_interval_secs = {{ .Values.config.healIntervalSecs }}
{{- /* One entry per pod, by its stable name. mode "kv" allows at most one entry, so none. */}}
{{- range $i := until (int .Values.replicas) }}

[[nodes]]
id = {{ $i }}
rpc_addr = "{{ $fullname }}-{{ $i }}.{{ $headless }}.{{ $.Release.Namespace }}.svc.{{ $.Values.clusterDomain }}:{{ $.Values.ports.rpc }}"
disk_count = {{ $drives }}
{{- end }}
{{- end }}
{{- if .Values.kv.enabled }}

[kv_slab]
{{- if .Values.kv.cpuRamFrac }}
cpu_ram_frac = {{ .Values.kv.cpuRamFrac }}
{{- else }}
capacity_gb = {{ .Values.kv.capacityGb }}
{{- end }}
segment_mb = {{ .Values.kv.segmentMb }}
reserve_ttl_secs = {{ .Values.kv.reserveTtlSecs }}
{{- end }}
{{- end }}
