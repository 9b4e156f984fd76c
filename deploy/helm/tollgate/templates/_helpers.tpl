{{/* Chart name, truncated to the 63 characters a DNS label allows. */}}
{{- define "tollgate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name: "<release>-<chart>", or just the release when it already contains the chart name. */}}
{{- define "tollgate.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Suffixed names stay within 63 characters. */}}
{{- define "tollgate.suffixed" -}}
{{- $base := include "tollgate.fullname" .root | trunc (int (sub 62 (len .suffix))) | trimSuffix "-" }}
{{- printf "%s-%s" $base .suffix }}
{{- end }}

{{- define "tollgate.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "tollgate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tollgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "tollgate.labels" -}}
helm.sh/chart: {{ include "tollgate.chart" . }}
{{ include "tollgate.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: tollgate
{{- end }}

{{- define "tollgate.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "tollgate.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "tollgate.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* ConfigMap holding main.yaml (created by the chart). */}}
{{- define "tollgate.mainConfigMapName" -}}
{{- include "tollgate.fullname" . }}
{{- end }}

{{/* ConfigMap holding upstreams.yaml: the user's, or the chart's. */}}
{{- define "tollgate.upstreamsConfigMapName" -}}
{{- if .Values.upstreams.existingConfigMap }}
{{- .Values.upstreams.existingConfigMap }}
{{- else }}
{{- include "tollgate.suffixed" (dict "root" . "suffix" "upstreams") }}
{{- end }}
{{- end }}

{{/* Secret holding the masterkey: the user's, or the chart's. */}}
{{- define "tollgate.masterkeySecretName" -}}
{{- if .Values.masterkey.existingSecret }}
{{- .Values.masterkey.existingSecret }}
{{- else }}
{{- include "tollgate.suffixed" (dict "root" . "suffix" "masterkey") }}
{{- end }}
{{- end }}

{{- define "tollgate.tokenServiceName" -}}
{{- include "tollgate.suffixed" (dict "root" . "suffix" "token") }}
{{- end }}

{{- define "tollgate.metricsServiceName" -}}
{{- include "tollgate.suffixed" (dict "root" . "suffix" "metrics") }}
{{- end }}

{{/* Label a client pod needs to reach the token API when networkPolicy.enabled and tokenFrom is empty. */}}
{{- define "tollgate.tokenClientLabel" -}}
{{- include "tollgate.suffixed" (dict "root" . "suffix" "client") }}
{{- end }}

{{/*
terminationGracePeriodSeconds: the shutdown sequence (readiness delay, then drain) must fit inside
it, or the kubelet kills the pod mid-drain. Empty means delay + grace + 5 s of slack.
*/}}
{{- define "tollgate.terminationGracePeriodSeconds" -}}
{{- $needed := add (int .Values.config.shutdownDelaySeconds) (int .Values.config.shutdownGraceSeconds) }}
{{- if kindIs "string" .Values.terminationGracePeriodSeconds }}
{{- if .Values.terminationGracePeriodSeconds }}
{{- fail "terminationGracePeriodSeconds must be a number of seconds" }}
{{- end }}
{{- add $needed 5 }}
{{- else }}
{{- $given := int .Values.terminationGracePeriodSeconds }}
{{- if lt $given (int $needed) }}
{{- fail (printf "terminationGracePeriodSeconds (%d) is shorter than config.shutdownDelaySeconds + config.shutdownGraceSeconds (%d): the kubelet would kill pods while they drain" $given (int $needed)) }}
{{- end }}
{{- $given }}
{{- end }}
{{- end }}

{{/*
main.yaml, rendered from .Values.config. File paths are relative to main.yaml's directory (the
/etc/tollgate projected volume), so the same file works wherever that directory is reproduced;
upstreams.yaml is found beside main.yaml by default.
*/}}
{{- define "tollgate.mainYaml" -}}
{{- $c := .Values.config }}
{{- $main := dict
  "proxy_address_http" (printf "0.0.0.0:%d" (int .Values.ports.proxy))
  "config_address" (printf "0.0.0.0:%d" (int .Values.ports.token))
  "admin_address" (printf "0.0.0.0:%d" (int .Values.ports.admin))
  "log_level" $c.logLevel
  "access_log" $c.accessLog
  "token_param" $c.tokenParam
  "max_token_minutes" (int $c.maxTokenMinutes)
  "https_port" (int $c.httpsPort)
  "trusted_proxies" $c.trustedProxies
  "upstream_connect_timeout_seconds" $c.timeouts.upstreamConnectSeconds
  "upstream_response_timeout_seconds" $c.timeouts.upstreamResponseSeconds
  "keepalive_timeout_seconds" $c.timeouts.keepaliveSeconds
  "client_header_timeout_seconds" $c.timeouts.clientHeaderSeconds
  "shutdown_delay_seconds" $c.shutdownDelaySeconds
  "shutdown_grace_seconds" $c.shutdownGraceSeconds
}}
{{- if .Values.masterkey.enabled }}
{{- $_ := set $main "masterkey_file" "masterkey" }}
{{- end }}
{{- if .Values.tls.enabled }}
{{- $_ := set $main "proxy_address_tls" (printf "0.0.0.0:%d" (int .Values.ports.proxyTls)) }}
{{- $_ := set $main "tls_certificate" "tls.crt" }}
{{- $_ := set $main "tls_key_file" "tls.key" }}
{{- end }}
{{- if $c.rateLimitRedis }}
{{- $_ := set $main "rate_limit_redis" $c.rateLimitRedis }}
{{- end }}
{{- toYaml (mergeOverwrite $main (deepCopy $c.extra)) }}
{{- end }}
