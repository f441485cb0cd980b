{{/* Chart name, fullname and labels, as `helm create` names them. */}}
{{- define "slaprobe.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "slaprobe.fullname" -}}
{{- if contains .Chart.Name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "slaprobe.selectorLabels" -}}
app.kubernetes.io/name: {{ include "slaprobe.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "slaprobe.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "slaprobe.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: {{ if eq .Values.mode "sidecar" }}inference{{ else }}prober{{ end }}
{{- end }}

{{- define "slaprobe.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{- define "slaprobe.apiKeySecret" -}}
{{- if .Values.apiKey.existingSecret }}{{ .Values.apiKey.existingSecret }}{{ else if .Values.apiKey.value }}{{ include "slaprobe.fullname" . }}-api-key{{ end }}
{{- end }}

{{/* Where the API key file is mounted, and what each target's http_client_config points at. */}}
{{- define "slaprobe.apiKeyFile" -}}/etc/slaprobe/secrets/api-key{{- end }}

{{/*
slaprobe's config: .Values.config with the targets the mode implies, each given the API key file.
*/}}
{{- define "slaprobe.config" -}}
{{- if not (has .Values.mode (list "deployment" "sidecar")) }}
{{- fail (printf "mode=%q; expected deployment or sidecar" .Values.mode) }}
{{- end }}
{{- $cfg := deepCopy (.Values.config | default dict) }}
{{- if hasKey $cfg "targets" }}
{{- fail "config.targets: set targets at the top level of the values (deployment mode), not inside config" }}
{{- end }}
{{- $auth := dict }}
{{- if include "slaprobe.apiKeySecret" . }}
{{- $auth = dict "http_client_config" (dict "authorization" (dict "type" "Bearer" "credentials_file" (include "slaprobe.apiKeyFile" .))) }}
{{- end }}
{{- $targets := list }}
{{- if eq .Values.mode "sidecar" }}
{{- $targets = append $targets (merge (dict "name" (include "slaprobe.fullname" .) "url" (printf "http://127.0.0.1:%d" (int .Values.vllm.port))) $auth) }}
{{- else }}
{{- range .Values.targets }}
{{- $targets = append $targets (merge (deepCopy .) $auth) }}
{{- end }}
{{- end }}
{{- $_ := set $cfg "targets" $targets }}
{{- toYaml $cfg }}
{{- end }}
