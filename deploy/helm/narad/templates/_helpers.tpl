{{/* The release's broker name: narad, or the release name when it is not narad. */}}
{{- define "narad.fullname" -}}
{{- if contains "narad" .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-narad" .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "narad.natsName" -}}
{{- printf "%s-nats" (include "narad.fullname" .) -}}
{{- end -}}

{{- define "narad.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: narad
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{- define "narad.selector" -}}
app.kubernetes.io/name: narad
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "narad.natsSelector" -}}
app.kubernetes.io/name: narad-nats
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "narad.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The NATS servers' client URLs, comma-separated. */}}
{{- define "narad.natsURLs" -}}
{{- if .Values.nats.enabled -}}
{{- $nats := include "narad.natsName" . -}}
{{- $urls := list -}}
{{- range $i := until (int .Values.nats.replicas) -}}
{{- $urls = append $urls (printf "nats://%s-%d.%s:4222" $nats $i $nats) -}}
{{- end -}}
{{- join "," $urls -}}
{{- else -}}
{{- required "nats.external.urls: with nats.enabled false, name the NATS servers" (join "," .Values.nats.external.urls) -}}
{{- end -}}
{{- end -}}

{{/* The initial Raft voters: the first .Values.voters pods. */}}
{{- define "narad.peers" -}}
{{- $name := include "narad.fullname" . -}}
{{- $peers := list -}}
{{- range $i := until (int .Values.voters) -}}
{{- $peers = append $peers (printf "%s-%d=%s-%d.%s:7950" $name $i $name $i $name) -}}
{{- end -}}
{{- join "," $peers -}}
{{- end -}}

{{/* The node's config file: the chart's settings, then .Values.config over them. */}}
{{- define "narad.config" -}}
{{- $base := dict "cluster" .Values.clusterName "data" "/var/lib/narad/node" "http" (printf "0.0.0.0:%d" 7942) "peers" (include "narad.peers" .) "join" true "nats" (include "narad.natsURLs" .) "nats-creds" "/etc/narad/nats/node.nk" -}}
{{- if .Values.tls.httpSecret -}}
{{- $_ := set $base "http-tls-cert" "/etc/narad/tls/http/tls.crt" -}}
{{- $_ := set $base "http-tls-key" "/etc/narad/tls/http/tls.key" -}}
{{- end -}}
{{- if .Values.tls.natsSecret -}}
{{- $_ := set $base "nats-tls-ca" "/etc/narad/tls/nats/ca.crt" -}}
{{- $_ := set $base "nats-tls-cert" "/etc/narad/tls/nats/tls.crt" -}}
{{- $_ := set $base "nats-tls-key" "/etc/narad/tls/nats/tls.key" -}}
{{- end -}}
{{- if .Values.tls.insecureRaft -}}
{{- $_ := set $base "insecure-raft" true -}}
{{- else -}}
{{- $_ := set $base "raft-tls-ca" "/etc/narad/tls/raft/ca.crt" -}}
{{- $_ := set $base "raft-tls-cert" "/etc/narad/tls/raft/tls.crt" -}}
{{- $_ := set $base "raft-tls-key" "/etc/narad/tls/raft/tls.key" -}}
{{- end -}}
{{- toYaml (mergeOverwrite $base .Values.config) -}}
{{- end -}}

{{- define "narad.scheme" -}}
{{- if .Values.tls.httpSecret }}HTTPS{{ else }}HTTP{{ end -}}
{{- end -}}

{{/* Raft's certificate Secret, or a refusal that says how to make one. */}}
{{- define "narad.raftSecret" -}}
{{- if not .Values.tls.raftSecret -}}
{{- fail "tls.raftSecret: Raft runs over mutual TLS and needs a Secret of ca.crt, tls.crt, tls.key (narad cert create-ca --dir certs; narad cert create-node --dir certs --name pods '*.narad' ...; kubectl create secret generic narad-raft-tls --from-file=ca.crt=certs/ca.crt --from-file=tls.crt=certs/pods.crt --from-file=tls.key=certs/pods.key), or tls.raftCertManager.enabled; tls.insecureRaft=true runs it over plain TCP" -}}
{{- end -}}
{{- .Values.tls.raftSecret -}}
{{- end -}}
