package analyze

import (
	"strings"
	"testing"
)

// A type error in an object's spec names the object (kind, namespace/name) and the document, so
// a user can find it in a large kustomize build.
func TestReadTypeErrorNamesObject(t *testing.T) {
	tests := []struct {
		name, doc, want string
	}{
		{"policy", "apiVersion: retrycap.dev/v1alpha1\nkind: RetryPolicy\nmetadata: {name: checkout, namespace: shop}\nspec: {maxAmplification: \"4\"}\n",
			`test.yaml: document 1: RetryPolicy shop/checkout: json: cannot unmarshal string into Go struct field RetryPolicySpec.spec.maxAmplification of type int32`},
		{"policy without namespace", "apiVersion: retrycap.dev/v1alpha1\nkind: RetryPolicy\nmetadata: {name: checkout}\nspec: {maxAmplification: 2.5}\n",
			`test.yaml: document 1: RetryPolicy default/checkout: json: cannot unmarshal number 2.5`},
		{"deployment", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: gateway, namespace: shop}\nspec: {replicas: two}\n",
			`test.yaml: document 1: Deployment shop/gateway: json: cannot unmarshal string`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &Manifests{Sources: map[string]Source{}}
			errs := (Reader{}).Read(m, "test.yaml", strings.NewReader(tt.doc))
			if len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), tt.want) {
				t.Fatalf("errors %v, want one starting with %q", errs, tt.want)
			}
		})
	}
}
