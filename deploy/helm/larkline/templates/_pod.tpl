{{/* the pod spec of a larkline container: args, config, secrets, probes */}}
{{- define "larkline.podSpec" -}}
{{- $root := .root -}}
securityContext:
  runAsNonRoot: true
  runAsUser: 65532
  runAsGroup: 65532
  fsGroup: 65532
containers:
  - name: larkline
    image: {{ include "larkline.image" $root }}
    imagePullPolicy: {{ $root.Values.image.pullPolicy }}
    args: {{ toJson .args }}
    env:
      - name: LARKLINE_CONFIG
        value: /etc/larkline/larkline.yaml
    {{- if .probes }}
    ports:
      - name: http
        containerPort: 8080
      {{- if has "api" .roles }}
      - name: api
        containerPort: 8081
      {{- end }}
      {{- if has "ingest" .roles }}
      - name: webhook
        containerPort: 8082
      {{- end }}
    livenessProbe:
      httpGet: {path: /livez, port: http}
      periodSeconds: 10
      failureThreshold: 6
    readinessProbe:
      httpGet: {path: /readyz, port: http}
      periodSeconds: 5
      failureThreshold: 3
    startupProbe:
      httpGet: {path: /livez, port: http}
      periodSeconds: 5
      failureThreshold: 60
    {{- end }}
    {{- with .resources }}
    resources:
      {{- toYaml . | nindent 6 }}
    {{- end }}
    securityContext:
      allowPrivilegeEscalation: false
      readOnlyRootFilesystem: true
      capabilities: {drop: [ALL]}
    volumeMounts:
      - {name: config, mountPath: /etc/larkline/larkline.yaml, subPath: larkline.yaml, readOnly: true}
      - {name: secrets, mountPath: /etc/larkline/secrets, readOnly: true}
      - {name: state, mountPath: /var/lib/larkline}
      - {name: tmp, mountPath: /tmp}
volumes:
  - name: config
    configMap: {name: {{ include "larkline.fullname" $root }}-config}
  - name: secrets
    secret: {secretName: {{ include "larkline.secretName" $root }}}
  - name: state
    emptyDir: {}
  - name: tmp
    emptyDir: {}
{{- end -}}
