package v1alpha1_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// `kubectl explain rp.status.violations.suggestion` printed an empty description for 24 status
// fields of each kind (those the Go types left without a comment). Every field of the generated
// CRDs now has one; list items and metadata are described by their list and by Kubernetes.
func TestEveryFieldIsDescribed(t *testing.T) {
	files, err := filepath.Glob("../../config/crd/bases/retrycap.dev_*.yaml")
	if err != nil || len(files) != 2 {
		t.Fatalf("CRD files: %v, %v", files, err)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(data, &crd); err != nil {
			t.Fatal(err)
		}
		var missing []string
		var walk func(path string, s apiextensionsv1.JSONSchemaProps)
		walk = func(path string, s apiextensionsv1.JSONSchemaProps) {
			if path != "" && path != "metadata" && strings.TrimSpace(s.Description) == "" {
				missing = append(missing, path)
			}
			for k, p := range s.Properties {
				walk(strings.TrimPrefix(path+"."+k, "."), p)
			}
			if s.Items != nil && s.Items.Schema != nil {
				// An item is described by its list; its fields are walked.
				for k, p := range s.Items.Schema.Properties {
					walk(path+"[]."+k, p)
				}
			}
		}
		for _, v := range crd.Spec.Versions {
			walk("", *v.Schema.OpenAPIV3Schema)
		}
		slices.Sort(missing)
		if len(missing) != 0 {
			t.Errorf("%s: %d fields without a description (kubectl explain prints none):\n%s", filepath.Base(file), len(missing), strings.Join(missing, "\n"))
		}
	}
}
