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

{{/*
Labels of the pod template: without the chart and app versions, so that upgrading the chart changes
no pod (a changed pod template restarts every pod); a new image or config rolls the pods by itself.
*/}}
{{- define "tollgate.podLabels" -}}
{{ include "tollgate.selectorLabels" . }}
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

{{/*
Where upstreams.yaml comes from, as a projected-volume source: "secret" or "configMap", its name and
key. A Secret and a ConfigMap are projected the same way, so hot reload works for both.
*/}}
{{- define "tollgate.upstreamsSource" -}}
{{- $u := .Values.upstreams }}
{{- if and $u.existingSecret $u.existingConfigMap }}
{{- fail "upstreams.existingSecret and upstreams.existingConfigMap are both set: pick one" }}
{{- end }}
{{- if $u.existingSecret }}
{{- dict "kind" "secret" "name" $u.existingSecret "key" $u.existingSecretKey | toJson }}
{{- else if $u.existingConfigMap }}
{{- dict "kind" "configMap" "name" $u.existingConfigMap "key" $u.existingConfigMapKey | toJson }}
{{- else }}
{{- dict "kind" (ternary "secret" "configMap" (eq (toString $u.createSecret) "true")) "name" (include "tollgate.suffixed" (dict "root" . "suffix" "upstreams")) "key" "upstreams.yaml" | toJson }}
{{- end }}
{{- end }}

{{/* Name of the ConfigMap or Secret holding upstreams.yaml. */}}
{{- define "tollgate.upstreamsConfigMapName" -}}
{{- (include "tollgate.upstreamsSource" . | fromJson).name }}
{{- end }}

{{/*
upstreams.yaml keys that carry credentials (basic users' passwords, API keys, a masterkey). Inline
upstreams.config holding any of them must go to a Secret, never to a ConfigMap.
*/}}
{{- define "tollgate.upstreamsCredentialKeys" -}}
{{- $found := list }}
{{- $json := "" }}
{{- if kindIs "string" .Values.upstreams.config }}
{{- $json = .Values.upstreams.config | fromYaml | toJson }}
{{- else }}
{{- $json = .Values.upstreams.config | toJson }}
{{- end }}
{{- range list "creds" "data" "password" "password_hash" "keys" "key" "masterkey" "master_key" }}
{{- if regexMatch (printf "\"%s\"\\s*:" .) $json }}
{{- $found = append $found . }}
{{- end }}
{{- end }}
{{- join ", " $found }}
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
main.yaml keys the chart owns. Listen addresses and TLS files must match the container ports, probes
and Services; upstreams_conf the projected volume; secrets must never land in the main.yaml ConfigMap.
*/}}
{{- define "tollgate.checkConfigExtra" -}}
{{- $owned := dict
  "proxy_address_http" "ports.proxy"
  "proxy_address_tls" "tls.enabled and ports.proxyTls"
  "config_address" "ports.token"
  "admin_address" "ports.admin"
  "tls_certificate" "tls.secretName"
  "tls_key_file" "tls.secretName"
  "upstreams_conf" "upstreams.*"
  "masterkey" "masterkey.existingSecret or masterkey.value (it would sit in a ConfigMap)"
  "master_key" "masterkey.existingSecret or masterkey.value (it would sit in a ConfigMap)"
  "masterkey_file" "masterkey.*"
  "rate_limit_redis" "config.rateLimitRedis, or config.rateLimitRedisSecret for a URL with a password"
  "oidc_providers" "oidc.providers (client secrets from oidc.providers.<name>.clientSecret)"
  "session_secret_file" "oidc.sessionSecret.existingSecret"
  "session_max_age_seconds" "config.sessionMaxAgeSeconds"
}}
{{- range $key := keys .Values.config.extra | sortAlpha }}
{{- if hasKey $owned $key }}
{{- fail (printf "config.extra.%s is not allowed: the chart sets it; use %s" $key (get $owned $key)) }}
{{- end }}
{{- end }}
{{- end }}

{{/* The Redis URL may carry a password: only a credential-free one may go into main.yaml. */}}
{{- define "tollgate.checkRateLimitRedis" -}}
{{- if and .Values.config.rateLimitRedis (regexMatch "^[a-z]+://[^/]*@" .Values.config.rateLimitRedis) }}
{{- fail "config.rateLimitRedis carries credentials and would sit in a ConfigMap: put the URL in a Secret and set config.rateLimitRedisSecret.name" }}
{{- end }}
{{- end }}

{{/*
Pods that must stay available through voluntary disruptions: "" when no PDB is rendered. "auto"
renders one whenever more than one pod runs; true with a single pod is refused, since such a PDB
blocks every node drain.
*/}}
{{- define "tollgate.pdbEnabled" -}}
{{- $pods := ternary (int .Values.autoscaling.minReplicas) (int .Values.replicaCount) (eq (toString .Values.autoscaling.enabled) "true") }}
{{- $mode := toString .Values.podDisruptionBudget.enabled }}
{{- $on := false }}
{{- if eq $mode "true" }}
{{- if le $pods 1 }}
{{- fail "podDisruptionBudget.enabled is true with a single pod: the PodDisruptionBudget would block every node drain. Run 2 or more replicas, or set podDisruptionBudget.enabled to auto or false" }}
{{- end }}
{{- $on = true }}
{{- else if and (eq $mode "auto") (gt $pods 1) }}
{{- $on = true }}
{{- end }}
{{- if $on }}
{{- $pdb := .Values.podDisruptionBudget }}
{{- if not (kindIs "string" $pdb.maxUnavailable) }}
{{- if le (int $pdb.maxUnavailable) 0 }}
{{- fail "podDisruptionBudget.maxUnavailable must be at least 1: 0 blocks every node drain" }}
{{- end }}
{{- else if and (not $pdb.maxUnavailable) (not (kindIs "string" $pdb.minAvailable)) }}
{{- if ge (int $pdb.minAvailable) $pods }}
{{- fail (printf "podDisruptionBudget.minAvailable (%d) must be below the pod count (%d): otherwise no pod may ever be evicted and node drains block" (int $pdb.minAvailable) $pods) }}
{{- end }}
{{- end }}
{{- true }}
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
  "client_send_timeout_seconds" $c.timeouts.clientSendSeconds
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
{{- $_ := set $main "workers" ($c.workers | default (ternary "auto" 1 (hasKey ((.Values.resources | default dict).limits | default dict) "cpu"))) }}
{{- if and $c.rateLimitRedis (not $c.rateLimitRedisSecret.name) }}
{{- $_ := set $main "rate_limit_redis" $c.rateLimitRedis }}
{{- end }}
{{- $kube := dict }}
{{- if and .Values.kubernetes.enabled .Values.kubernetes.upstreamsFromApi }}
{{- $_ := set $kube "upstreams_configmap" (include "tollgate.upstreamsConfigMapName" .) }}
{{- end }}
{{- $ic := .Values.ingressController }}
{{- if $ic.enabled }}
{{- $_ := set $kube "ingress_class" $ic.className }}
{{- with $ic.watchNamespaces }}{{ $_ := set $kube "watch_namespaces" . }}{{ end }}
{{- if $ic.publishAddress }}
{{- $_ := set $kube "publish_address" $ic.publishAddress }}
{{- else }}
{{- $_ := set $kube "publish_service" (include "tollgate.publishService" .) }}
{{- end }}
{{- end }}
{{- $gw := .Values.gatewayAPI }}
{{- if $gw.enabled }}
{{- $_ := set $kube "gateway_class" $gw.className }}
{{- if and $ic.enabled $ic.watchNamespaces $gw.watchNamespaces (ne (toJson $ic.watchNamespaces) (toJson $gw.watchNamespaces)) }}
{{- fail "gatewayAPI.watchNamespaces and ingressController.watchNamespaces are one main.yaml key (kubernetes.watch_namespaces): list the same namespaces in both, or in one only" }}
{{- end }}
{{- with $gw.watchNamespaces }}{{ $_ := set $kube "watch_namespaces" . }}{{ end }}
{{- with $gw.gatewayNames }}{{ $_ := set $kube "gateway_names" . }}{{ end }}
{{- if not (hasKey $kube "publish_address") }}{{- if not (hasKey $kube "publish_service") }}
{{- if $gw.publishAddress }}
{{- $_ := set $kube "publish_address" $gw.publishAddress }}
{{- else if $ic.publishAddress }}
{{- $_ := set $kube "publish_address" $ic.publishAddress }}
{{- else }}
{{- $_ := set $kube "publish_service" (include "tollgate.publishService" .) }}
{{- end }}
{{- end }}{{- end }}
{{- end }}
{{- if $kube }}
{{- $_ := set $main "kubernetes" $kube }}
{{- end }}
{{- $main = mergeOverwrite $main (include "tollgate.oidcMain" . | fromYaml) }}
{{- include "tollgate.checkConfigExtra" . }}
{{- include "tollgate.checkRateLimitRedis" . }}
{{- toYaml (mergeOverwrite $main (deepCopy $c.extra)) }}
{{- end }}

{{/* The chart-managed masterkey (see templates/secret.yaml for why it is never generated). */}}
{{- define "tollgate.masterkeyValue" -}}
{{- if .Values.masterkey.value }}
{{- .Values.masterkey.value }}
{{- else }}
{{- $existing := (lookup "v1" "Secret" .Release.Namespace (include "tollgate.masterkeySecretName" .)).data | default dict }}
{{- if hasKey $existing "masterkey" }}
{{- index $existing "masterkey" | b64dec }}
{{- else }}
{{- fail "masterkey.existingSecret or masterkey.value is required (or masterkey.enabled=false): the chart does not generate a key, since every render without a cluster would make a different one" }}
{{- end }}
{{- end }}
{{- end }}

{{/* upstreams.yaml from upstreams.config (YAML given as a map, or as a string kept verbatim). */}}
{{- define "tollgate.upstreamsYaml" -}}
{{- if kindIs "string" .Values.upstreams.config }}
{{- .Values.upstreams.config }}
{{- else }}
{{- toYaml .Values.upstreams.config }}
{{- end }}
{{- end }}

{{/* Label of the `helm test` pod; the NetworkPolicy admits it on every port. */}}
{{- define "tollgate.testLabel" -}}
{{- include "tollgate.suffixed" (dict "root" . "suffix" "test") }}
{{- end }}

{{/*
How many proxy processes main.yaml's `workers` gives the pod (docs/workers.md): a number as written;
`auto` (or empty with a CPU limit) is the CPU limit rounded up, as Tollgate counts it; `auto` without
a CPU limit depends on the node, unknown here, and counts as 1.
*/}}
{{- define "tollgate.workerCount" -}}
{{- $limits := (.Values.resources | default dict).limits | default dict -}}
{{- $w := .Values.config.workers | default (ternary "auto" 1 (hasKey $limits "cpu")) -}}
{{- if ne (toString $w) "auto" -}}
{{- int $w -}}
{{- else if hasKey $limits "cpu" -}}
{{- $cpu := toString $limits.cpu -}}
{{- if hasSuffix "m" $cpu -}}
{{- max 1 (div (add (int (trimSuffix "m" $cpu)) 999) 1000) -}}
{{- else -}}
{{- max 1 (int (ceil (float64 $cpu))) -}}
{{- end -}}
{{- else -}}
1
{{- end -}}
{{- end }}

{{/* A memory quantity in Mi ("256Mi", "1Gi"), or "" for any other form. */}}
{{- define "tollgate.mebibytes" -}}
{{- $q := toString . -}}
{{- if regexMatch "^[0-9]+Gi$" $q -}}
{{- mul (int (trimSuffix "Gi" $q)) 1024 -}}
{{- else if regexMatch "^[0-9]+Mi$" $q -}}
{{- int (trimSuffix "Mi" $q) -}}
{{- end -}}
{{- end }}

{{/*
The container's resources: `resources` as given, its memory request and limit raised by
`memoryPerExtraWorker` for every worker beyond the first (each is a whole Node process), so the pod
is not OOM-killed exactly when it is busiest (docs/workers.md#memory).
*/}}
{{- define "tollgate.resources" -}}
{{- $r := deepCopy (.Values.resources | default dict) -}}
{{- $extra := sub (int (include "tollgate.workerCount" .)) 1 -}}
{{- $per := .Values.memoryPerExtraWorker | default dict -}}
{{- if gt (int $extra) 0 -}}
{{- range $kind, $add := dict "requests" $per.request "limits" $per.limit -}}
{{- $section := index $r $kind | default dict -}}
{{- if and $add (hasKey $section "memory") -}}
{{- $base := include "tollgate.mebibytes" $section.memory -}}
{{- $step := include "tollgate.mebibytes" $add -}}
{{- if and $base $step -}}
{{- $_ := set $section "memory" (printf "%dMi" (add (int $base) (mul (int $step) $extra))) -}}
{{- $_ := set $r $kind $section -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $request := include "tollgate.mebibytes" (((index $r "requests") | default dict).memory | default "") -}}
{{- $limit := include "tollgate.mebibytes" (((index $r "limits") | default dict).memory | default "") -}}
{{- if and $request $limit (gt (int $request) (int $limit)) -}}
{{- fail (printf "resources: the memory request (%sMi with %s workers) exceeds the limit (%sMi): raise resources.limits.memory or memoryPerExtraWorker.limit" $request (include "tollgate.workerCount" .) $limit) -}}
{{- end -}}
{{- if $r -}}
{{- toYaml $r -}}
{{- end -}}
{{- end }}

{{/* `namespace/name` of the Service whose address Ingress status announces (docs/ingress.md#status). */}}
{{- define "tollgate.publishService" -}}
{{- .Values.ingressController.publishService | default (printf "%s/%s" .Release.Namespace (include "tollgate.fullname" .)) }}
{{- end }}

{{/* True when the pods talk to the API: the provider, the Ingress controller, or the Gateway API. */}}
{{- define "tollgate.usesApi" -}}
{{- or .Values.kubernetes.enabled .Values.ingressController.enabled .Values.gatewayAPI.enabled }}
{{- end }}

{{/*
OpenID Connect (docs/deployment.md#openid-connect). The session secrets and each provider's client
secret come from Secrets the user made, projected into /etc/tollgate under the file names below; the
chart never makes a session secret up, since every replica must open every session with the same one
and a render without a cluster cannot know it.
*/}}
{{- define "tollgate.oidcSessionSecretPath" -}}
session-secrets
{{- end }}

{{- define "tollgate.oidcCaPath" -}}
{{- printf "oidc-%s-ca.crt" . }}
{{- end }}

{{- define "tollgate.oidcClientSecretPath" -}}
{{- printf "oidc-%s-client-secret" . }}
{{- end }}

{{/* main.yaml's oidc_providers, session_secret_file and session_max_age_seconds; nothing without providers. */}}
{{- define "tollgate.oidcMain" -}}
{{- $o := .Values.oidc | default dict }}
{{- if $o.providers }}
{{- if not ($o.sessionSecret | default dict).existingSecret }}
{{- fail "oidc.providers needs oidc.sessionSecret.existingSecret: a Secret holding the session secrets (one a line, each >= 32 bytes) that every replica shares. The chart does not generate one, since every render would make a different one and replicas would not open each other's sessions" }}
{{- end }}
{{- $providers := dict }}
{{- range $name, $p := $o.providers }}
{{- $provider := dict "issuer" $p.issuer "client_id" $p.clientId "client_secret_file" (include "tollgate.oidcClientSecretPath" $name) }}
{{- with $p.scopes }}{{ $_ := set $provider "scopes" . }}{{ end }}
{{- with $p.groupsClaim }}{{ $_ := set $provider "groups_claim" . }}{{ end }}
{{- with $p.subjectClaim }}{{ $_ := set $provider "subject_claim" . }}{{ end }}
{{- if hasKey $p "passAccessToken" }}{{ $_ := set $provider "pass_access_token" $p.passAccessToken }}{{ end }}
{{- with $p.redirectUrl }}{{ $_ := set $provider "redirect_url" . }}{{ end }}
{{- if hasKey $p "requireVerifiedEmail" }}{{ $_ := set $provider "require_verified_email" $p.requireVerifiedEmail }}{{ end }}
{{- with $p.cookieDomain }}{{ $_ := set $provider "cookie_domain" . }}{{ end }}
{{- with $p.postLogoutRedirectUrl }}{{ $_ := set $provider "post_logout_redirect_url" . }}{{ end }}
{{- if ($p.caCertificate | default dict).configMap }}{{ $_ := set $provider "ca_file" (include "tollgate.oidcCaPath" $name) }}{{ end }}
{{- $_ := set $providers $name $provider }}
{{- end }}
{{- toYaml (dict
  "oidc_providers" $providers
  "session_secret_file" (include "tollgate.oidcSessionSecretPath" .)
  "session_max_age_seconds" (int .Values.config.sessionMaxAgeSeconds)) }}
{{- end }}
{{- end }}

{{/* Projected-volume sources of the OpenID Connect secrets, for the config volume (mode 0440). */}}
{{- define "tollgate.oidcSecretSources" -}}
{{- $o := .Values.oidc | default dict }}
{{- if $o.providers }}
- secret:
    name: {{ $o.sessionSecret.existingSecret }}
    items:
      - key: {{ $o.sessionSecret.existingSecretKey | default "session-secrets" }}
        path: {{ include "tollgate.oidcSessionSecretPath" . }}
        mode: 288 # 0440
{{- range $name, $p := $o.providers }}
- secret:
    name: {{ $p.clientSecret.existingSecret }}
    items:
      - key: {{ $p.clientSecret.key | default "client-secret" }}
        path: {{ include "tollgate.oidcClientSecretPath" $name }}
        mode: 288 # 0440
{{- with ($p.caCertificate | default dict).configMap }}
- configMap:
    name: {{ . }}
    items:
      - key: {{ $p.caCertificate.key | default "ca.crt" }}
        path: {{ include "tollgate.oidcCaPath" $name }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
