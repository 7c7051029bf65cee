{{/* The chart's name in labels and object names: nameOverride, else the chart's. */}}
{{- define "slurmscale.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 50 | trimSuffix "-" -}}
{{- end -}}

{{/*
Names: fullnameOverride; else <release> when it already says the name, else <release>-<name>.
At most 50 characters, so `<fullname>-autoscaler`, a Service's name, stays a DNS label (63).
*/}}
{{- define "slurmscale.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "slurmscale.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Where every namespaced object goes: namespaceOverride, else the release's namespace. */}}
{{- define "slurmscale.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride -}}
{{- end -}}

{{- define "slurmscale.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
app.kubernetes.io/name: {{ include "slurmscale.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Selector labels of one component: (dict "root" . "component" "exporter"). */}}
{{- define "slurmscale.selectorLabels" -}}
app.kubernetes.io/name: {{ include "slurmscale.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/*
Pod-spec fields both components set the same way from their own values, (dict "root" .
"component" "exporter"): the PriorityClass (the component's, else the top-level one) and the
topology spread constraints, where an entry without labelSelector selects the component's own
pods (values cannot name them: the labels carry the release name).
*/}}
{{- define "slurmscale.podScheduling" -}}
{{- $c := index .root.Values .component -}}
{{- with ($c.priorityClassName | default .root.Values.priorityClassName) }}
priorityClassName: {{ . | quote }}
{{- end }}
{{- with $c.topologySpreadConstraints }}
topologySpreadConstraints:
{{- range . }}
{{- $constraint := deepCopy . }}
{{- if not (hasKey $constraint "labelSelector") }}
{{- $_ := set $constraint "labelSelector" (dict "matchLabels" (include "slurmscale.selectorLabels" (dict "root" $.root "component" $.component) | fromYaml)) }}
{{- end }}
  - {{ toYaml $constraint | nindent 4 | trim }}
{{- end }}
{{- end }}
{{- end -}}

{{/* repository@digest when a digest is set (the tag is then only a label), else repository:tag. */}}
{{- define "slurmscale.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{/* The Token slurm-operator keeps (mode slinkyToken), and the Secret it writes it to. */}}
{{- define "slurmscale.tokenName" -}}
{{- .Values.slurm.tokenName | default (include "slurmscale.fullname" .) -}}
{{- end -}}

{{/*
The context the exporter's Slurm credentials are rendered in: the release's, with slurm.user
replaced by exporter.slurmUser when that is set (and, in mode slinkyToken, a Token of its own).
Only these two modes can: a token given in mode token is one user's.
*/}}
{{- define "slurmscale.exporterValues" -}}
{{- $v := deepCopy .Values -}}
{{- with .Values.exporter.slurmUser -}}
{{- if $.Values.slurm.clusters -}}
{{- fail "exporter.slurmUser does not apply with slurm.clusters: give each cluster's entry the user and credentials the exporter reads with" -}}
{{- end -}}
{{- if eq $.Values.slurm.auth.mode "token" -}}
{{- fail "exporter.slurmUser needs slurm.auth.mode jwtKey or slinkyToken: a token given in mode token is one user's" -}}
{{- end -}}
{{- $_ := set $v.slurm "user" . -}}
{{- $_ := set $v.slurm "tokenName" (printf "%s-exporter" (include "slurmscale.fullname" $)) -}}
{{- end -}}
{{- toYaml $v -}}
{{- end -}}

{{- define "slurmscale.secretName" -}}
{{- if eq .Values.slurm.auth.mode "slinkyToken" -}}
{{- printf "%s-jwt-%s" (include "slurmscale.tokenName" .) .Values.slurm.user -}}
{{- else -}}
{{- .Values.slurm.auth.existingSecret | default (printf "%s-slurm-auth" (include "slurmscale.fullname" .)) -}}
{{- end -}}
{{- end -}}

{{/* The Secret's key the mounted file is named after. */}}
{{- define "slurmscale.secretKey" -}}
{{- if eq .Values.slurm.auth.mode "slinkyToken" -}}SLURM_JWT{{- else -}}{{ .Values.slurm.auth.secretKey }}{{- end -}}
{{- end -}}

{{/* Environment shared by both components: where Slurm is and how to authenticate (with
slurm.clusters, the file that says so for each cluster). */}}
{{- define "slurmscale.slurmEnv" -}}
{{- if .Values.slurm.clusters -}}
- name: SLURMSCALE_CONFIG
  value: /etc/slurmscale/clusters/clusters.yaml
{{- else -}}
{{ include "slurmscale.oneCluster" . }}
{{- end }}
- name: SLURMSCALE_LOG
  value: {{ .Values.log.level | quote }}
- name: SLURMSCALE_LOG_FORMAT
  value: {{ .Values.log.format | quote }}
- name: SLURMSCALE_GENERICNODE_GROUP
  value: {{ .Values.genericNode.group | quote }}
- name: SLURMSCALE_GENERICNODE_VERSION
  value: {{ .Values.genericNode.version | quote }}
- name: SLURMSCALE_GENERICNODE_PLURAL
  value: {{ .Values.genericNode.plural | quote }}
{{- end -}}

{{/* One cluster, from slurm.url and slurm.auth. */}}
{{- define "slurmscale.oneCluster" -}}
- name: SLURM_REST_URL
  value: {{ required "slurm.url is required (the slurmrestd base URL)" .Values.slurm.url | quote }}
- name: SLURM_CLUSTER
  value: {{ .Values.slurm.cluster | quote }}
- name: SLURM_USER
  value: {{ .Values.slurm.user | quote }}
- name: SLURM_API_VERSION
  value: {{ .Values.slurm.apiVersion | quote }}
- name: SLURM_TIMEOUT
  value: {{ .Values.slurm.timeout | quote }}
{{- with .Values.slurm.kubernetesJobs }}
- name: SLURMSCALE_KUBERNETES_JOBS
  value: {{ join "," . | quote }}
{{- end }}
{{- with .Values.slurm.maxRequestsPerSecond }}
- name: SLURM_MAX_REQUESTS_PER_SECOND
  value: {{ . | quote }}
{{- end }}
{{- if eq .Values.slurm.auth.mode "jwtKey" }}
- name: SLURM_JWT_KEY_FILE
  value: /var/run/secrets/slurm/{{ .Values.slurm.auth.secretKey }}
- name: SLURM_JWT_ALGORITHM
  value: {{ .Values.slurm.auth.algorithm | quote }}
- name: SLURM_JWT_LIFETIME
  value: {{ .Values.slurm.auth.lifetime | quote }}
{{- else }}
- name: SLURMSCALE_JWT_FILE
  value: /var/run/secrets/slurm/{{ include "slurmscale.secretKey" . }}
{{- end }}
{{- if .Values.slurm.caSecret }}
- name: SLURM_CA_FILE
  value: /var/run/secrets/slurm-ca/ca.crt
{{- end }}
{{- end -}}

{{/* The Secret (read-only, for the pod's fsGroup) and, when given, the CA. */}}
{{- define "slurmscale.volumes" -}}
{{- if .Values.slurm.clusters -}}
- name: slurm-clusters
  configMap:
    name: {{ include "slurmscale.fullname" . }}-clusters
{{- else -}}
- name: slurm-auth
  secret:
    secretName: {{ include "slurmscale.secretName" . }}
    defaultMode: 0440
    items:
      - key: {{ include "slurmscale.secretKey" . }}
        path: {{ include "slurmscale.secretKey" . }}
{{- if .Values.slurm.caSecret }}
- name: slurm-ca
  secret:
    secretName: {{ .Values.slurm.caSecret }}
    items:
      - key: ca.crt
        path: ca.crt
{{- end }}
{{- end }}
{{- with .Values.webConfig.existingSecret }}
- name: web-config
  secret:
    secretName: {{ . }}
    defaultMode: 0440
{{- end }}
{{- with .Values.extraVolumes }}
{{ tpl (toYaml .) $ }}
{{- end }}
{{- end -}}

{{- define "slurmscale.volumeMounts" -}}
{{- if .Values.slurm.clusters -}}
- name: slurm-clusters
  mountPath: /etc/slurmscale/clusters
  readOnly: true
{{- else -}}
- name: slurm-auth
  mountPath: /var/run/secrets/slurm
  readOnly: true
{{- if .Values.slurm.caSecret }}
- name: slurm-ca
  mountPath: /var/run/secrets/slurm-ca
  readOnly: true
{{- end }}
{{- end }}
{{- if .Values.webConfig.existingSecret }}
- name: web-config
  mountPath: /etc/slurmscale/web
  readOnly: true
{{- end }}
{{- with .Values.extraVolumeMounts }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* TLS and basic auth for /metrics: the flag, and the probes' scheme. */}}
{{- define "slurmscale.webEnv" -}}
{{- if .Values.webConfig.existingSecret }}
- name: SLURMSCALE_WEB_CONFIG_FILE
  value: /etc/slurmscale/web/{{ .Values.webConfig.file }}
{{- end }}
{{- end -}}

{{- define "slurmscale.probeScheme" -}}
{{- if and .Values.webConfig.existingSecret .Values.webConfig.tls }}HTTPS{{ else }}HTTP{{ end }}
{{- end -}}

{{/*
The ServiceAccount a component runs as: serviceAccount.names.<component> when set (one made
elsewhere, with serviceAccount.create=false), else <fullname>-<component>.
*/}}
{{- define "slurmscale.serviceAccountName" -}}
{{- $set := index (.root.Values.serviceAccount.names | default dict) .component | default "" -}}
{{- $set | default (printf "%s-%s" (include "slurmscale.fullname" .root) .component) -}}
{{- end }}
