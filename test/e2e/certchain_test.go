package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"math/big"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
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

// TestCertChainRenewals replays, with the API server's verifier (crypto/x509), the renewals the
// chain goes through; no cert-manager controller runs here, so the certificates are made as
// cert-manager's issuers make them (a self-signed CA, leaves signed by it, a new key per serving
// renewal). The caBundle is what cainjector copies: the serving Secret's ca.crt.
func TestCertChainRenewals(t *testing.T) {
	const dns = "retrycap-webhook-service.retrycap-system.svc"
	now := time.Now()
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	serial := int64(0)
	sign := func(tmpl, parent *x509.Certificate, pub *ecdsa.PublicKey, signer *ecdsa.PrivateKey) *x509.Certificate {
		serial++
		tmpl.SerialNumber = big.NewInt(serial)
		der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
		if err != nil {
			t.Fatal(err)
		}
		c, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	caTmpl := func(from time.Time) *x509.Certificate {
		return &x509.Certificate{Subject: pkix.Name{CommonName: "retrycap-webhook-ca"}, NotBefore: from, NotAfter: from.Add(43800 * time.Hour),
			IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	}
	leafTmpl := func(cn string) *x509.Certificate {
		return &x509.Certificate{Subject: pkix.Name{CommonName: cn}, DNSNames: []string{dns}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(90 * 24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	}
	trusts := func(caBundle, served *x509.Certificate) bool {
		pool := x509.NewCertPool()
		pool.AddCert(caBundle)
		_, err := served.Verify(x509.VerifyOptions{DNSName: dns, Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		return err == nil
	}

	// Before: the serving certificate is its own CA; a renewal's new key makes a new CA.
	k1, k2 := newKey(), newKey()
	self := func(k *ecdsa.PrivateKey) *x509.Certificate {
		tmpl := leafTmpl("self")
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
		return sign(tmpl, tmpl, &k.PublicKey, k)
	}
	old, renewed := self(k1), self(k2)
	if trusts(renewed, old) || trusts(old, renewed) {
		t.Errorf("self-signed serving certificates: one renewal trusts the other (want neither: the window)")
	}

	// Now: a CA, and each serving renewal a new key signed by it; the caBundle stays the CA.
	caKey := newKey()
	ca := sign(caTmpl(now.Add(-time.Hour)), caTmpl(now.Add(-time.Hour)), &caKey.PublicKey, caKey)
	leaf1 := sign(leafTmpl("serving"), ca, &newKey().PublicKey, caKey)
	leaf2 := sign(leafTmpl("serving"), ca, &newKey().PublicKey, caKey)
	for _, c := range []struct {
		what         string
		bundle, leaf *x509.Certificate
	}{{"the old serving certificate", ca, leaf1}, {"the renewed serving certificate", ca, leaf2}} {
		if !trusts(c.bundle, c.leaf) {
			t.Errorf("caBundle = the CA does not trust %s", c.what)
		}
	}
	// The CA renewed with its key kept (rotationPolicy Never): a new certificate, serial and
	// validity, the same key and subject. Serving certificates signed before verify against it,
	// and the new one against the old CA, whichever of the two the caBundle holds meanwhile.
	ca2 := sign(caTmpl(now), caTmpl(now), &caKey.PublicKey, caKey)
	leaf3 := sign(leafTmpl("serving"), ca2, &newKey().PublicKey, caKey)
	if ca2.SerialNumber.Cmp(ca.SerialNumber) == 0 || !trusts(ca2, leaf2) || !trusts(ca, leaf3) {
		t.Errorf("CA renewed with its key kept: renewed CA trusts the old serving certificate %v, old CA trusts the new %v", trusts(ca2, leaf2), trusts(ca, leaf3))
	}
	// The known limit: a new CA key. The caBundle (the serving Secret's ca.crt) and the served
	// certificate change in the same Secret update, but reach the API server and the replicas at
	// different moments: neither trusts the other's. Both CAs in the bundle (overlap) trust both.
	caKey3 := newKey()
	ca3 := sign(caTmpl(now), caTmpl(now), &caKey3.PublicKey, caKey3)
	leaf4 := sign(leafTmpl("serving"), ca3, &newKey().PublicKey, caKey3)
	if trusts(ca3, leaf2) || trusts(ca, leaf4) {
		t.Errorf("a new CA key: the new CA trusts the old serving certificate %v, the old CA the new %v (want neither)", trusts(ca3, leaf2), trusts(ca, leaf4))
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	pool.AddCert(ca3)
	for _, leaf := range []*x509.Certificate{leaf2, leaf4} {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: dns, Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("both CAs in the caBundle: %s (issuer %s) refused: %v", leaf.Subject, leaf.Issuer, err)
		}
	}
}
