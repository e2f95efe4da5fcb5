{{- define "mcpgw.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The release's full name; <= 57 characters so that "-admin" still fits 63. */}}
{{- define "mcpgw.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 57 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "mcpgw.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 57 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 57 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "mcpgw.adminServiceName" -}}
{{- printf "%s-admin" (include "mcpgw.fullname" .) -}}
{{- end -}}

{{- define "mcpgw.selectorLabels" -}}
app.kubernetes.io/name: {{ include "mcpgw.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "mcpgw.labels" -}}
{{ include "mcpgw.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end -}}

{{- define "mcpgw.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "mcpgw.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "mcpgw.secretName" -}}
{{- if .Values.existingSecret -}}{{ .Values.existingSecret }}{{- else -}}{{ include "mcpgw.fullname" . }}{{- end -}}
{{- end -}}

{{- define "mcpgw.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}
{{- end -}}

{{/*
mcpgw.checks fails the render when values contradict each other, with the
fix; values.schema.json checks each value on its own.
*/}}
{{- define "mcpgw.checks" -}}
{{- $listen := toString (.Values.config.listen | default "") -}}
{{- if not (hasSuffix (printf ":%v" .Values.mcpPort) $listen) -}}
{{- fail (printf "config.listen is %q but mcpPort is %v: the Service and the probes would miss the MCP listener; set config.listen: 0.0.0.0:%v (or change mcpPort)" $listen .Values.mcpPort .Values.mcpPort) -}}
{{- end -}}
{{- $admin := "" -}}
{{- with .Values.config.admin }}{{ $admin = toString (.listen | default "") }}{{ end -}}
{{- if not (hasSuffix (printf ":%v" .Values.adminPort) $admin) -}}
{{- fail (printf "config.admin.listen is %q but adminPort is %v: the probes, metrics and helm test use the admin listener; set config.admin.listen: 0.0.0.0:%v" $admin .Values.adminPort .Values.adminPort) -}}
{{- end -}}
{{- if hasPrefix "127.0.0.1:" $admin -}}
{{- fail "config.admin.listen is on loopback, where the kubelet's probes cannot reach it; set config.admin.listen: 0.0.0.0:PORT (restrict it with networkPolicy.adminFrom)" -}}
{{- end -}}
{{- if .Values.redis.enabled -}}
{{- if not (or .Values.sessionKeys.existingSecret .Values.sessionKeys.keys) -}}
{{- fail "redis.enabled needs sessionKeys.existingSecret or sessionKeys.keys: the replicas must share the key ring that seals session ids (one key per line, e.g. `openssl rand -base64 32`)" -}}
{{- end -}}
{{- if not (or .Values.redis.addr .Values.redis.url) -}}
{{- fail "redis.enabled needs redis.addr (host:port) or redis.url" -}}
{{- end -}}
{{- with .Values.config.sessions -}}
{{- if or .redis .key_file -}}
{{- fail "redis.enabled writes config.sessions.redis and config.sessions.key_file itself; remove them from config (or turn redis.enabled off and set them by hand)" -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if and .Values.httpRoute.enabled (not .Values.httpRoute.parentRefs) -}}
{{- fail "httpRoute.enabled needs httpRoute.parentRefs: the Gateway(s) to attach to, e.g. [{name: gateway, namespace: gateway-system}]" -}}
{{- end -}}
{{- end -}}

{{/* The helm test pod's labels: not the selector labels, so that no Service, PDB or NetworkPolicy counts it as a gateway pod. */}}
{{- define "mcpgw.testLabels" -}}
app.kubernetes.io/name: {{ include "mcpgw.name" . }}-test
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: test
{{- end -}}

{{/*
mcpgw.config is the config.yaml the pods read: .Values.config, plus with
redis.enabled the fleet's sessions.redis and sessions.key_file.
*/}}
{{- define "mcpgw.config" -}}
{{- $cfg := deepCopy .Values.config -}}
{{- if .Values.redis.enabled -}}
{{- $r := dict -}}
{{- if .Values.redis.url }}{{ $_ := set $r "url" .Values.redis.url }}{{ else }}{{ $_ := set $r "addr" .Values.redis.addr }}{{ end -}}
{{- with .Values.redis.keyPrefix }}{{ $_ := set $r "key_prefix" . }}{{ end -}}
{{- if .Values.redis.passwordSecret }}{{ $_ := set $r "password_file" "/etc/mcpgw/redis/password" }}{{ end -}}
{{- $s := default (dict) (get $cfg "sessions") -}}
{{- $_ := set $s "redis" $r -}}
{{- $_ := set $s "key_file" "/etc/mcpgw/session-keys/keys" -}}
{{- $_ := set $cfg "sessions" $s -}}
{{- end -}}
{{- /* The admin listener serves only the Host names it knows (DNS-rebinding
protection); the helm test pod and in-cluster clients name the admin
Service, so its names are added to config.admin.allowed_hosts. */ -}}
{{- if kindIs "map" (get $cfg "admin") -}}
{{- $a := get $cfg "admin" -}}
{{- $svc := include "mcpgw.adminServiceName" . -}}
{{- $own := list $svc (printf "%s.%s" $svc .Release.Namespace) (printf "%s.%s.svc" $svc .Release.Namespace) -}}
{{- $_ := set $a "allowed_hosts" (concat (default (list) (get $a "allowed_hosts")) $own | uniq) -}}
{{- $_ := set $cfg "admin" $a -}}
{{- end -}}
{{- toYaml $cfg -}}
{{- end -}}

{{- define "mcpgw.sessionKeysSecret" -}}
{{- default (printf "%s-session-keys" (include "mcpgw.fullname" .)) .Values.sessionKeys.existingSecret -}}
{{- end -}}
