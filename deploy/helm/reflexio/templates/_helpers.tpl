{{/* Names and labels. */}}
{{- define "reflexio.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "reflexio.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "reflexio.selectorLabels" -}}
app.kubernetes.io/name: {{ include "reflexio.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "reflexio.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "reflexio.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "reflexio.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{- define "reflexio.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "reflexio.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "reflexio.envConfigMap" -}}{{ include "reflexio.fullname" . }}-env{{- end -}}
{{- define "reflexio.instanceConfigMap" -}}{{ include "reflexio.fullname" . }}-instance{{- end -}}
{{- define "reflexio.codeLocationHost" -}}{{ include "reflexio.fullname" . }}-code-location{{- end -}}

{{/* PostgreSQL: the host, and the Secret holding the key postgresql-password (the name K8sRunLauncher expects). */}}
{{- define "reflexio.postgresql.host" -}}
{{- if .Values.postgresql.enabled -}}
{{- include "reflexio.fullname" . }}-postgresql
{{- else -}}
{{- required "postgresql.host is required when postgresql.enabled is false" .Values.postgresql.host -}}
{{- end -}}
{{- end -}}

{{- define "reflexio.postgresql.secretName" -}}
{{- default (printf "%s-postgresql" (include "reflexio.fullname" .)) .Values.postgresql.existingSecret -}}
{{- end -}}

{{/* The lake: on object storage (s3://...) or a directory on a volume. */}}
{{- define "reflexio.lake.remote" -}}
{{- if contains "://" .Values.lake.uri -}}true{{- end -}}
{{- end -}}

{{- define "reflexio.lake.claimName" -}}
{{- default (printf "%s-lake" (include "reflexio.fullname" .)) .Values.lake.persistence.existingClaim -}}
{{- end -}}

{{/* The Secret with AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY; empty when credentials come from a pod role. */}}
{{- define "reflexio.s3.secretName" -}}
{{- if not (include "reflexio.lake.remote" .) -}}
{{- else if .Values.lake.s3.existingSecret -}}
{{- .Values.lake.s3.existingSecret -}}
{{- else if or .Values.lake.s3.accessKeyId .Values.lake.s3.secretAccessKey -}}
{{- include "reflexio.fullname" . }}-s3
{{- end -}}
{{- end -}}

{{/* Secrets loaded whole as environment by the processes that touch the lake or call a model. */}}
{{- define "reflexio.envSecrets" -}}
{{- $names := list -}}
{{- with include "reflexio.s3.secretName" . }}{{ $names = append $names . }}{{ end -}}
{{- range .Values.extraEnvSecrets }}{{ $names = append $names . }}{{ end -}}
{{- toJson $names -}}
{{- end -}}

{{/* Container environment of every pod that loads the Dagster instance; lake=true adds the lake's and the model's
   Secrets, env is a list of extra variables. */}}
{{- define "reflexio.containerEnv" -}}
env:
  - name: DAGSTER_PG_PASSWORD
    valueFrom:
      secretKeyRef:
        name: {{ include "reflexio.postgresql.secretName" .ctx }}
        key: postgresql-password
{{- with .env }}
{{- toYaml . | nindent 2 }}
{{- end }}
envFrom:
  - configMapRef:
      name: {{ include "reflexio.envConfigMap" .ctx }}
{{- if .lake }}
{{- range include "reflexio.envSecrets" .ctx | fromJsonArray }}
  - secretRef:
      name: {{ . }}
{{- end }}
{{- end }}
{{- end -}}

{{/* Volumes: the instance's dagster.yaml (over the one baked into the image), the cache, and the lake volume. */}}
{{- define "reflexio.volumeMounts" -}}
volumeMounts:
  - name: instance
    mountPath: {{ .ctx.Values.dagster.home }}/dagster.yaml
    subPath: dagster.yaml
{{- if .workspace }}
  - name: instance
    mountPath: /opt/dagster/workspace.yaml
    subPath: workspace.yaml
{{- end }}
{{- if .lake }}
  - name: cache
    mountPath: /var/cache/reflexio
{{- if not (include "reflexio.lake.remote" .ctx) }}
  - name: lake
    mountPath: {{ .ctx.Values.lake.uri }}
{{- end }}
{{- end }}
{{- end -}}

{{- define "reflexio.volumes" -}}
volumes:
  - name: instance
    configMap:
      name: {{ include "reflexio.instanceConfigMap" .ctx }}
{{- if .lake }}
  - name: cache
    emptyDir:
      sizeLimit: {{ .ctx.Values.lake.cacheSizeLimit }}
{{- if not (include "reflexio.lake.remote" .ctx) }}
  - name: lake
    persistentVolumeClaim:
      claimName: {{ include "reflexio.lake.claimName" .ctx }}
{{- end }}
{{- end }}
{{- end -}}

{{/* Pod settings of the image's processes: its unprivileged user (owning mounted volumes), image pull secrets. */}}
{{- define "reflexio.podCommon" -}}
securityContext:
  runAsNonRoot: true
  runAsUser: 10001
  runAsGroup: 10001
  fsGroup: 10001
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{- define "reflexio.containerSecurityContext" -}}
securityContext:
  allowPrivilegeEscalation: false
  capabilities:
    drop: [ALL]
{{- end -}}

{{/* Pods restart when the configuration they load changes. */}}
{{- define "reflexio.configChecksum" -}}
checksum/config: {{ include (print .Template.BasePath "/configmaps.yaml") . | sha256sum }}
{{- end -}}

{{/*
REFLEXIO_ALLOWED_HOSTS: the Host names the service answers besides loopback (serving/hosts.py, against DNS
rebinding): its Services' in-cluster names (short, .namespace, .namespace.svc, .namespace.svc.cluster.local) and
serving.allowedHosts (an ingress hostname, "*.example.com").
*/}}
{{- define "reflexio.allowedHosts" -}}
{{- $fullname := include "reflexio.fullname" . -}}
{{- $ns := .Release.Namespace -}}
{{- $names := list (printf "%s-serving" $fullname) -}}
{{- range .Values.serving.replicaGroups }}{{ $names = append $names (printf "%s-serving-%s" $fullname .name) }}{{ end -}}
{{- $hosts := list -}}
{{- range $names }}
{{- $hosts = concat $hosts (list . (printf "%s.%s" . $ns) (printf "%s.%s.svc" . $ns) (printf "%s.%s.svc.cluster.local" . $ns)) -}}
{{- end -}}
{{- join "," (concat $hosts (.Values.serving.allowedHosts | default list)) -}}
{{- end -}}
