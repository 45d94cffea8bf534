{{- define "larkline.fullname" -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "larkline.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "larkline.secretName" -}}
{{- .Values.secrets.existingSecret | default (printf "%s-secrets" (include "larkline.fullname" .)) -}}
{{- end -}}

{{- define "larkline.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* the topic and group names of the configuration, with larkline's defaults */}}
{{- define "larkline.names" -}}
{{- $k := .Values.config.kafka | default dict -}}
{{- $t := $k.topics | default dict -}}
{{- $w := .Values.config.windows | default dict -}}
groupPrefix: {{ $k.groupPrefix | default "larkline" }}
partitions: {{ $k.partitions | default 12 }}
replication: {{ $k.replicationFactor | default 3 }}
processorVersion: {{ $w.processorVersion | default "v1" }}
topics:
  evidence: {{ $t.evidence | default "larkline.evidence.v1" }}
  checkpoints: {{ $t.checkpoints | default "larkline.checkpoints.v1" }}
  workspaces: {{ $t.workspaces | default "larkline.workspaces.v1" }}
  windowsClosed: {{ $t.windowsClosed | default "larkline.windows.closed.v1" }}
  deadLetter: {{ $t.deadLetter | default "larkline.deadletter.v1" }}
{{- end -}}
