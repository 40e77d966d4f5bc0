{{/*
Names. Every object is "<fullname>-<part>", as config/default's namePrefix "retrycap-" makes them
with the release name "retrycap". No Helm-only labels (helm.sh/chart, app.kubernetes.io/managed-by,
app.kubernetes.io/instance) are added: the objects, selectors included, stay those of
config/default, so an install moves between kustomize and Helm without a selector change.
*/}}
{{- define "retrycap.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "retrycap.managerName" -}}{{ include "retrycap.fullname" . }}-controller-manager{{- end -}}
{{- define "retrycap.webhookServiceName" -}}{{ include "retrycap.fullname" . }}-webhook-service{{- end -}}
{{- define "retrycap.certificateName" -}}{{ include "retrycap.fullname" . }}-serving-cert{{- end -}}

{{/* The Secret holding the webhook server's key pair (tls.crt, tls.key, ca.crt). */}}
{{- define "retrycap.certSecretName" -}}webhook-server-cert{{- end -}}

{{/* cert-manager mode: the Secret holding the CA that signs the serving certificate. */}}
{{- define "retrycap.caSecretName" -}}webhook-ca-cert{{- end -}}

{{- define "retrycap.selectorLabels" -}}
app.kubernetes.io/name: retrycap
control-plane: controller-manager
{{- end -}}

{{/* repository@digest when a digest is set, else repository:tag (the tag defaulting to appVersion). */}}
{{- define "retrycap.image" -}}
{{- if .image.digest -}}
{{ .image.repository }}@{{ .image.digest }}
{{- else -}}
{{ .image.repository }}:{{ .image.tag | default .appVersion }}
{{- end -}}
{{- end -}}

{{- define "retrycap.managerImage" -}}
{{ include "retrycap.image" (dict "image" .Values.image "appVersion" .Chart.AppVersion) }}
{{- end -}}

{{- define "retrycap.proxyImage" -}}
{{ include "retrycap.image" (dict "image" .Values.proxyImage "appVersion" .Chart.AppVersion) }}
{{- end -}}

{{/* The webhooks' namespaceSelector: the excluded namespaces and the release's own. */}}
{{- define "retrycap.namespaceSelector" -}}
namespaceSelector:
  matchExpressions:
  - key: kubernetes.io/metadata.name
    operator: NotIn
    values: {{ append .Values.excludedNamespaces .Release.Namespace | uniq | toJson }}
{{- end -}}

{{/*
The webhook configurations' CA: cert-manager's injection annotation, or nothing here (the
caBundle is written into each webhook's clientConfig by retrycap.clientConfigCA).
*/}}
{{- define "retrycap.webhookAnnotations" -}}
{{- if eq .Values.certificates.mode "cert-manager" -}}
annotations:
  cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/{{ include "retrycap.certificateName" . }}
{{- end -}}
{{- end -}}

{{/*
The self-signed bootstrap's key pair, generated once per render and shared by the Secret and the
caBundles: the Secret this release wrote is reused (helm install/upgrade), else a new CA signs a
new serving certificate for the webhook Service's names. Only this release's own: a Secret
cert-manager wrote (a switch from certificates.mode=cert-manager, or a namespace reused) holds a
90-day certificate nothing renews in this mode, and another's may be for other names. An adopted
one (--take-ownership) keeps cert-manager's annotations, so those are checked as well.
*/}}
{{- define "retrycap.selfSignedPair" -}}
{{- $secret := lookup "v1" "Secret" .Release.Namespace (include "retrycap.certSecretName" .) -}}
{{- $a := dict -}}
{{- if $secret -}}{{- $a = $secret.metadata.annotations | default dict -}}{{- end -}}
{{- $ours := and (eq (index $a "meta.helm.sh/release-name" | default "") .Release.Name) (eq (index $a "meta.helm.sh/release-namespace" | default "") .Release.Namespace) (not (hasKey $a "cert-manager.io/certificate-name")) -}}
{{- if and $secret $ours $secret.data (index $secret.data "ca.crt") (index $secret.data "tls.crt") (index $secret.data "tls.key") -}}
{{- dict "ca" (index $secret.data "ca.crt") "crt" (index $secret.data "tls.crt") "key" (index $secret.data "tls.key") | toJson -}}
{{- else -}}
{{- $svc := include "retrycap.webhookServiceName" . -}}
{{- $days := int .Values.certificates.selfSigned.validityDays -}}
{{- $ca := genCA "retrycap-webhook-ca" $days -}}
{{- $dns := list (printf "%s.%s.svc" $svc .Release.Namespace) (printf "%s.%s.svc.cluster.local" $svc .Release.Namespace) -}}
{{- $cert := genSignedCert (index $dns 0) nil $dns $days $ca -}}
{{- dict "ca" ($ca.Cert | b64enc) "crt" ($cert.Cert | b64enc) "key" ($cert.Key | b64enc) | toJson -}}
{{- end -}}
{{- end -}}

{{/*
A generated CRD file, with helm.sh/resource-policy: keep added to its annotations when
crds.keep is set. controller-gen writes "metadata:\n  annotations:\n" at the top of each; a file
without it fails the render rather than lose the annotation silently.
*/}}
{{- define "retrycap.crd" -}}
{{- $head := "\nmetadata:\n  annotations:\n" -}}
{{- $crd := .root.Files.Get .file -}}
{{- if not (contains $head $crd) -}}
{{- fail (printf "%s: no top-level metadata.annotations to add helm.sh/resource-policy to (make manifests writes one)" .file) -}}
{{- end -}}
{{- if .root.Values.crds.keep -}}
{{- $crd = replace $head (printf "%s    helm.sh/resource-policy: keep\n" $head) $crd -}}
{{- end -}}
{{ $crd }}
{{- end -}}

{{/*
A Kubernetes quantity ("64Mi", "500m", "1e3", 2) as a float64 in its unit, or "" when it is not
one of the forms the schema takes. Only to compare a request with its limit.
*/}}
{{- define "retrycap.quantity" -}}
{{- $q := toString . -}}
{{- $num := regexFind "^[0-9]+([.][0-9]+)?" $q -}}
{{- $suffix := trimPrefix $num $q -}}
{{- $scale := dict "" 1.0 "m" 0.001 "k" 1e3 "M" 1e6 "G" 1e9 "T" 1e12 "P" 1e15 "E" 1e18 "Ki" 1024.0 "Mi" 1048576.0 "Gi" 1073741824.0 "Ti" 1099511627776.0 "Pi" 1125899906842624.0 "Ei" 1152921504606846976.0 -}}
{{- if and $num (hasKey $scale $suffix) -}}
{{- mulf (float64 $num) (get $scale $suffix) -}}
{{- else if and $num (regexMatch "^e[0-9]{1,2}$" $suffix) -}}
{{- $v := float64 $num -}}
{{- range until (int (trimPrefix "e" $suffix)) -}}{{- $v = mulf $v 10 -}}{{- end -}}
{{- $v -}}
{{- end -}}
{{- end -}}
