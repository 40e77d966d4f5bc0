package analyze

import (
	"fmt"
	"strings"
	"testing"
)

// TestReadTemplateThatParsesWarns: a Helm template that still parses as YAML (every expression
// quoted, or inside a longer value) was read as real objects without a word. Each object the
// graph reads is now read as written with a warning naming the object and the first field
// holding "{{"; a ConfigMap's data (Prometheus's alert templates) and other controllers'
// annotations (Vault agent's templates) are not warned of.
func TestReadTemplateThatParsesWarns(t *testing.T) {
	const doc = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata:
      labels: {app: web}
      annotations: {vault.hashicorp.com/agent-inject-template-db: "{{- with secret \"db\" -}}{{ .Data.password }}{{- end }}"}
    spec:
      containers:
      - name: web
        image: "{{ .Values.image }}"
        args: ["-qps=1", "http://{{ .Host }}:8080"]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: alerts, namespace: shop}
data: {rule: "{{ $labels.instance }} is down"}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: api, namespace: shop, annotations: {vault.hashicorp.com/x: "{{ .X }}"}}
spec:
  selector: {matchLabels: {app: api}}
  template:
    metadata:
      labels: {app: api}
      annotations: {vault.hashicorp.com/agent-inject-template-db: "{{ .Data }}"}
    spec: {containers: [{name: api, image: api}]}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec: {selector: {app: web}, ports: [{port: 80, targetPort: "{{ .Values.port }}"}]}
`
	m := NewManifests()
	if errs := (Reader{}).Read(m, "t.yaml", strings.NewReader(doc)); len(errs) != 0 {
		t.Fatalf("errors: %v", errs)
	}
	want := []string{
		`t.yaml: document 1: Deployment shop/web: a template expression in "spec.template.spec.containers[0].args[1]" ("http://{{ .Host }}:8080"): read as written; if this is a Helm chart's template, run helm template first and analyze its output`,
		`t.yaml: document 4: Service shop/web: a template expression in "spec.ports[0].targetPort" ("{{ .Values.port }}"): read as written; if this is a Helm chart's template, run helm template first and analyze its output`,
	}
	var got []string
	for _, w := range m.Warnings {
		got = append(got, w.String())
	}
	if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
		t.Fatalf("warnings\n%q\nwant\n%q", got, want)
	}
	if m.Summary.Objects != 4 || len(m.Workloads) != 2 || len(m.Services) != 1 {
		t.Fatalf("objects %d, workloads %d, Services %d: want 4, 2, 1 (read as written)", m.Summary.Objects, len(m.Workloads), len(m.Services))
	}
	// Long values are cut at 80 bytes, on a rune's start.
	long := "apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec: {externalName: \"{{ " + strings.Repeat("é", 60) + " }}\"}\n"
	m = NewManifests()
	if errs := (Reader{}).Read(m, "l.yaml", strings.NewReader(long)); len(errs) != 0 {
		t.Fatalf("errors: %v", errs)
	}
	wantLong := `l.yaml: document 1: Service default/s: a template expression in "spec.externalName" ("{{ ` + strings.Repeat("é", 38) + `..."): read as written; if this is a Helm chart's template, run helm template first and analyze its output`
	if len(m.Warnings) != 1 || m.Warnings[0].String() != wantLong {
		t.Fatalf("warnings %q, want [%q]", m.Warnings, wantLong)
	}
}
