{{/* Names and labels. */}}
{{- define "shoal.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "shoal.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "shoal.selector" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "shoal.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "shoal.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "shoal.image" -}}
{{- $tag := .root.Values.image.tag | default .root.Chart.AppVersion -}}
{{- if .gpu -}}{{- $tag = .root.Values.image.cudaTag | default (printf "%s-cuda" $tag) -}}{{- end -}}
{{- printf "%s:%s" .root.Values.image.repository $tag -}}
{{- end -}}

{{/*
The model token of a model id, as adapters/protocol/subjects.ts modelToken(): letters, digits and
"-" stay, every other character becomes "_" + two upper-case hex digits of its UTF-8 byte. Only
ASCII ids are supported here (the chart fails on others: name the consumer yourself then).
*/}}
{{- define "shoal.modelToken" -}}
{{- $hex := dict " " "20" "!" "21" "\"" "22" "#" "23" "$" "24" "%" "25" "&" "26" "'" "27" "(" "28" ")" "29" "*" "2A" "+" "2B" "," "2C" "." "2E" "/" "2F" ":" "3A" ";" "3B" "<" "3C" "=" "3D" ">" "3E" "?" "3F" "@" "40" "[" "5B" "\\" "5C" "]" "5D" "^" "5E" "_" "5F" "`" "60" "{" "7B" "|" "7C" "}" "7D" "~" "7E" -}}
{{- range $c := splitList "" . -}}
{{- if regexMatch "^[A-Za-z0-9-]$" $c -}}{{ $c }}
{{- else if hasKey $hex $c -}}_{{ get $hex $c }}
{{- else -}}{{ fail (printf "model id %q has a character (%q) the chart cannot encode; use an ASCII id" . $c) }}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* natsNames(prefix): stream-name form (SHOAL) and lower form (shoal) of the subject prefix. */}}
{{- define "shoal.prefixUpper" -}}{{ .Values.nats.subjectPrefix | replace "." "_" | replace "-" "_" | upper }}{{- end -}}
{{- define "shoal.prefixLower" -}}{{ .Values.nats.subjectPrefix | replace "." "_" | replace "-" "_" | lower }}{{- end -}}
{{- define "shoal.jobsStream" -}}{{ include "shoal.prefixUpper" . }}_JOBS{{- end -}}

{{/* Consumer of (root, primitive, model): <lower>_<primitive>_<token>. */}}
{{- define "shoal.consumer" -}}
{{- printf "%s_%s_%s" (include "shoal.prefixLower" .root) .primitive (include "shoal.modelToken" .model) -}}
{{- end -}}

{{/*
Document workers (`shoal worker --documents`): the work-queue stream of document jobs, <UPPER>_DOCUMENTS,
and the durable pull consumer of one pipeline (root, pipeline): <lower>_documents_<token>, the
token escaped as a model token (a name of only A-Z a-z 0-9 - is unchanged; "_" becomes "_5F").
The runs stream and its consumer carry `<prefix>.runs.open` to the document workers.
*/}}
{{- define "shoal.documentsStream" -}}{{ include "shoal.prefixUpper" . }}_DOCUMENTS{{- end -}}
{{- define "shoal.documentsConsumer" -}}
{{- printf "%s_documents_%s" (include "shoal.prefixLower" .root) (include "shoal.modelToken" .pipeline) -}}
{{- end -}}
{{- define "shoal.runsStream" -}}{{ include "shoal.prefixUpper" . }}_RUNS{{- end -}}
{{- define "shoal.runsConsumer" -}}{{ include "shoal.prefixLower" . }}_runs{{- end -}}

{{/* Validates documents.* (fails the install with a message that says what to change). */}}
{{- define "shoal.checkDocuments" -}}
{{- $d := .Values.documents -}}
{{- if not $d.pipelines -}}
{{- fail "documents.pipelines is empty: name at least one pipeline (the built-in one is `documents`)" -}}
{{- end -}}
{{- range $name := $d.pipelines -}}
{{- if not (regexMatch "^[A-Za-z0-9_-]{1,64}$" $name) -}}
{{- fail (printf "documents.pipelines: %q must be 1-64 characters of A-Z a-z 0-9 _ -" $name) -}}
{{- end -}}
{{- end -}}
{{- if ne (len $d.pipelines) (len (uniq $d.pipelines)) -}}
{{- fail "documents.pipelines lists a pipeline twice" -}}
{{- end -}}
{{- if le (int $d.terminationGracePeriodSeconds) (add (div (int $d.drainTimeoutMs) 1000) 10 | int) -}}
{{- fail (printf "documents: terminationGracePeriodSeconds (%v) must exceed drainTimeoutMs/1000 + 10 (%v), or Kubernetes kills document workers mid-drain" $d.terminationGracePeriodSeconds (add (div (int $d.drainTimeoutMs) 1000) 10)) -}}
{{- end -}}
{{- if and (eq (int $d.replicas.min) 0) (not (and .Values.keda.enabled $d.keda.enabled)) -}}
{{- fail "documents: replicas.min 0 needs KEDA (keda.enabled and documents.keda.enabled), or nothing wakes the document workers up" -}}
{{- end -}}
{{- if gt (int $d.replicas.min) (int $d.replicas.max) -}}
{{- fail "documents: replicas.min > replicas.max" -}}
{{- end -}}
{{- end -}}

{{/* Environment of a document worker (root): the role, its pipelines, its consumers' settings. */}}
{{- define "shoal.documentsEnv" -}}
{{- $d := .Values.documents -}}
- name: SHOAL_DOCUMENTS
  value: "1"
- name: SHOAL_DOCUMENT_PIPELINES
  value: {{ join "," $d.pipelines | quote }}
{{- if $d.pipelinesConfigMap }}
- name: SHOAL_PIPELINES
  value: {{ $d.pipelinesMountPath | quote }}
{{- end }}
- name: SHOAL_ACK_WAIT_MS
  value: {{ $d.ackWaitMs | quote }}
- name: SHOAL_MAX_DELIVER
  value: {{ $d.maxDeliver | quote }}
{{- with $d.memoryBudget }}
- name: SHOAL_MEMORY_BUDGET
  value: {{ . | quote }}
{{- end }}
{{- if .Values.indexes }}
{{ include "shoal.indexesEnv" . }}
{{- end }}
- name: SHOAL_CACHE_DIR
  value: /var/cache/shoal
- name: HF_HOME
  value: /var/cache/huggingface
{{- end -}}

{{/*
Classify workers (`shoal worker --classify`): the work-queue stream of classification chunks and
run ends, <UPPER>_CLASSIFY (`<prefix>.classify.>`), and the one durable pull consumer every
classify worker shares, <lower>_classify (adapters/protocol/classify-jobs.ts classifyJobNames).
*/}}
{{- define "shoal.classifyStream" -}}{{ include "shoal.prefixUpper" . }}_CLASSIFY{{- end -}}
{{- define "shoal.classifyConsumer" -}}{{ include "shoal.prefixLower" . }}_classify{{- end -}}

{{/* Validates classify.* (fails the install with a message that says what to change). */}}
{{- define "shoal.checkClassify" -}}
{{- $c := .Values.classify -}}
{{- if le (int $c.terminationGracePeriodSeconds) (add (div (int $c.drainTimeoutMs) 1000) 10 | int) -}}
{{- fail (printf "classify: terminationGracePeriodSeconds (%v) must exceed drainTimeoutMs/1000 + 10 (%v), or Kubernetes kills classify workers mid-drain" $c.terminationGracePeriodSeconds (add (div (int $c.drainTimeoutMs) 1000) 10)) -}}
{{- end -}}
{{- if and (eq (int $c.replicas.min) 0) (not (and .Values.keda.enabled $c.keda.enabled)) -}}
{{- fail "classify: replicas.min 0 needs KEDA (keda.enabled and classify.keda.enabled), or nothing wakes the classify workers up" -}}
{{- end -}}
{{- if gt (int $c.replicas.min) (int $c.replicas.max) -}}
{{- fail "classify: replicas.min > replicas.max" -}}
{{- end -}}
{{- end -}}

{{/* Environment of a classify worker (root): the role and its consumer's settings. */}}
{{- define "shoal.classifyEnv" -}}
{{- $c := .Values.classify -}}
- name: SHOAL_CLASSIFY
  value: "1"
- name: SHOAL_ACK_WAIT_MS
  value: {{ $c.ackWaitMs | quote }}
- name: SHOAL_MAX_DELIVER
  value: {{ $c.maxDeliver | quote }}
- name: SHOAL_CACHE_DIR
  value: /var/cache/shoal
- name: HF_HOME
  value: /var/cache/huggingface
{{- end -}}

{{/* SHOAL_INDEXES (name=URI, comma-separated, by name) of the gateway, the sink and document workers; include it only when `indexes` is set. */}}
{{- define "shoal.indexesEnv" -}}
{{- $pairs := list -}}
{{- range $name, $uri := .Values.indexes -}}{{- $pairs = append $pairs (printf "%s=%s" $name $uri) -}}{{- end -}}
- name: SHOAL_INDEXES
  value: {{ join "," $pairs | quote }}
{{- end -}}

{{/*
The consumer bootstrap script (flags: the worker's own flags): starts a worker, waits until its
/readyz says it takes work (after it created its consumers), stops it with SIGTERM.
*/}}
{{- define "shoal.bootstrapScript" -}}
node /app/bin/shoal.js worker {{ .flags }} --metrics-port 9464 --metrics-host 127.0.0.1 & pid=$!
until node -e "fetch('http://127.0.0.1:9464/readyz').then(r => process.exit(r.ok ? 0 : 1), () => process.exit(1))"; do
  kill -0 $pid 2>/dev/null || exit 1
  sleep 2
done
kill -TERM $pid
wait $pid
{{- end -}}

{{- define "shoal.natsSecretName" -}}
{{- .Values.nats.auth.existingSecret | default (printf "%s-nats" (include "shoal.fullname" .)) -}}
{{- end -}}

{{/* NATS connection env for one component (gateway, worker, sink, documents, classify; the consumer bootstrap Jobs as their component): its own NATS user. */}}
{{- define "shoal.natsEnv" -}}
- name: NATS_URL
  value: {{ .root.Values.nats.url | quote }}
- name: SHOAL_SUBJECT_PREFIX
  value: {{ .root.Values.nats.subjectPrefix | quote }}
- name: SHOAL_STREAM_REPLICAS
  value: {{ .root.Values.nats.streamReplicas | default 1 | quote }}
{{- if .root.Values.nats.auth.enabled }}
- name: NATS_USER
  value: {{ .component | quote }}
- name: NATS_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ include "shoal.natsSecretName" .root }}
      key: {{ printf "%s-password" .component }}
{{- end }}
- name: SHOAL_LOG_LEVEL
  value: {{ .root.Values.logLevel | quote }}
{{- end -}}

{{/* A pool with workerDefaults under it (the pool's keys win). */}}
{{- define "shoal.pool" -}}
{{- $pool := mergeOverwrite (deepCopy .root.Values.workerDefaults) (deepCopy .pool) -}}
{{- toYaml $pool -}}
{{- end -}}

{{/* Validates one merged pool (fails the install with a message that says what to change). */}}
{{- define "shoal.checkPool" -}}
{{- $p := .pool -}}
{{- if le (int $p.terminationGracePeriodSeconds) (add (div (int $p.drainTimeoutMs) 1000) 10 | int) -}}
{{- fail (printf "pool %s: terminationGracePeriodSeconds (%v) must exceed drainTimeoutMs/1000 + 10 (%v), or Kubernetes kills workers mid-drain" $p.name $p.terminationGracePeriodSeconds (add (div (int $p.drainTimeoutMs) 1000) 10)) -}}
{{- end -}}
{{- if eq (int $p.replicas.min) 0 -}}
{{- if not (and .root.Values.keda.enabled $p.keda.enabled) -}}
{{- fail (printf "pool %s: replicas.min 0 needs KEDA (keda.enabled and the pool's keda.enabled), or nothing wakes it up" $p.name) -}}
{{- end -}}
{{- if le (int $p.keda.cooldownPeriod) (int $p.modelLoadSeconds) -}}
{{- fail (printf "pool %s: keda.cooldownPeriod (%v s) must be longer than modelLoadSeconds (%v s), or the pool can be scaled to zero while its model still loads" $p.name $p.keda.cooldownPeriod $p.modelLoadSeconds) -}}
{{- end -}}
{{- end -}}
{{- if gt (int $p.replicas.min) (int $p.replicas.max) -}}
{{- fail (printf "pool %s: replicas.min > replicas.max" $p.name) -}}
{{- end -}}
{{- end -}}

{{/*
The password of one NATS user (root, component): the value given, else the one already installed
(upgrades keep it), else a random one, generated once per render so the users Secret and the
authorization block agree.
*/}}
{{- define "shoal.natsPassword" -}}
{{- $auth := .root.Values.nats.auth -}}
{{- $given := get $auth.passwords .component -}}
{{- if $given -}}{{ $given }}
{{- else -}}
{{- $memo := get $auth "_generated" | default dict -}}
{{- if not (hasKey $memo .component) -}}
{{- $existing := (lookup "v1" "Secret" .root.Release.Namespace (printf "%s-nats" (include "shoal.fullname" .root))).data | default dict -}}
{{- $old := get $existing (printf "%s-password" .component) -}}
{{- $_ := set $memo .component (ternary ($old | b64dec) (randAlphaNum 32) (ne $old "")) -}}
{{- $_ := set $auth "_generated" $memo -}}
{{- end -}}
{{- get $memo .component -}}
{{- end -}}
{{- end -}}

{{/*
The cache volume of a pool's pods (SHOAL_CACHE_DIR and HF_HOME), one of:
- cache.ephemeral.enabled: a generic ephemeral volume, a PVC created with each pod and deleted
  with it (per pod, so no ReadWriteOnce volume is shared by pods on different nodes; larger than
  a node's root disk allows);
- cache.existingClaim: a PVC the pool's pods share (ReadWriteMany, or every pod on one node);
- else an emptyDir of cache.sizeLimit.
*/}}
{{- define "shoal.cacheVolume" -}}
{{- $c := .pool.cache -}}
{{- if and $c.ephemeral $c.ephemeral.enabled -}}
ephemeral:
  volumeClaimTemplate:
    metadata:
      labels:
        {{- include "shoal.selector" (dict "root" .root "component" (printf "worker-%s" .pool.name)) | nindent 8 }}
    spec:
      accessModes: ["ReadWriteOnce"]
      {{- with $c.ephemeral.storageClass }}
      storageClassName: {{ . }}
      {{- end }}
      resources:
        requests:
          storage: {{ $c.ephemeral.size }}
{{- else if $c.existingClaim -}}
persistentVolumeClaim:
  claimName: {{ $c.existingClaim }}
{{- else -}}
emptyDir:
  sizeLimit: {{ $c.sizeLimit }}
{{- end -}}
{{- end -}}

{{/* S3 for every component: the buckets s3:// references and result targets may use, and the region. */}}
{{- define "shoal.s3Env" -}}
{{- with .Values.s3.buckets }}
- name: SHOAL_S3_BUCKETS
  value: {{ join "," . | quote }}
{{- end }}
{{- with .Values.s3.region }}
- name: AWS_REGION
  value: {{ . | quote }}
{{- end }}
{{- end -}}
