package e2e

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// checkCertManagerChain asserts the exact cert-manager objects config/default and the chart's
// cert-manager mode render in namespace ns: a self-signed Issuer that signs only a CA
// Certificate, a CA Issuer on that CA's Secret, and the serving Certificate issued by the CA
// Issuer. Both webhook configurations name the serving Certificate in inject-ca-from: cainjector
// copies the `ca.crt` of that Certificate's Secret, which the CA Issuer fills with the CA, so the
// caBundle is the CA and a serving-certificate renewal leaves it unchanged. Before, the serving
// Certificate was issued by the self-signed Issuer (its own CA: every renewal changed the
// caBundle and the served certificate at two different moments).
func checkCertManagerChain(t *testing.T, what string, objs rendered, ns string) {
	t.Helper()
	svc := "retrycap-webhook-service." + ns + ".svc"
	want := map[string]string{
		"Issuer retrycap-selfsigned-issuer": `{"selfSigned":{}}`,
		// The CA: 5 years, its key kept when cert-manager renews it (rotationPolicy Never), so a
		// serving certificate signed before the CA's renewal still verifies against the renewed CA.
		"Certificate retrycap-webhook-ca": `{"commonName":"retrycap-webhook-ca","duration":"43800h","isCA":true,
			"issuerRef":{"kind":"Issuer","name":"retrycap-selfsigned-issuer"},
			"privateKey":{"rotationPolicy":"Never"},"secretName":"webhook-ca-cert"}`,
		"Issuer retrycap-ca-issuer": `{"ca":{"secretName":"webhook-ca-cert"}}`,
		"Certificate retrycap-serving-cert": `{"dnsNames":["` + svc + `","` + svc + `.cluster.local"],
			"issuerRef":{"kind":"Issuer","name":"retrycap-ca-issuer"},
			"privateKey":{"rotationPolicy":"Always"},"secretName":"webhook-server-cert"}`,
	}
	var got []string
	for k, u := range objs {
		if !strings.HasPrefix(u.GetAPIVersion(), "cert-manager.io/") {
			continue
		}
		got = append(got, k)
		if u.GetAPIVersion() != "cert-manager.io/v1" || u.GetNamespace() != ns {
			t.Errorf("%s: %s %s in namespace %q, want cert-manager.io/v1 in %q", what, u.GetAPIVersion(), k, u.GetNamespace(), ns)
		}
		w, ok := want[k]
		if !ok {
			continue
		}
		var wantSpec map[string]any
		if err := json.Unmarshal([]byte(w), &wantSpec); err != nil {
			t.Fatalf("want %s: %v", k, err)
		}
		if spec := u.Object["spec"]; !reflect.DeepEqual(spec, wantSpec) {
			gotJSON, _ := json.Marshal(spec)
			wantJSON, _ := json.Marshal(wantSpec)
			t.Errorf("%s: %s spec\n  %s\nwant\n  %s", what, k, gotJSON, wantJSON)
		}
	}
	slices.Sort(got)
	wantKeys := []string{"Certificate retrycap-serving-cert", "Certificate retrycap-webhook-ca", "Issuer retrycap-ca-issuer", "Issuer retrycap-selfsigned-issuer"}
	if !slices.Equal(got, wantKeys) {
		t.Errorf("%s: cert-manager objects %q, want %q", what, got, wantKeys)
	}

	const caFrom = "cert-manager.io/inject-ca-from"
	for _, cfg := range []string{"MutatingWebhookConfiguration retrycap-mutating-webhook-configuration", "ValidatingWebhookConfiguration retrycap-validating-webhook-configuration"} {
		u := objs[cfg]
		if u == nil {
			t.Errorf("%s: no %s", what, cfg)
			continue
		}
		if got, want := u.GetAnnotations()[caFrom], ns+"/retrycap-serving-cert"; got != want {
			t.Errorf("%s: %s annotation %s = %q, want %q", what, cfg, caFrom, got, want)
		}
	}
}
