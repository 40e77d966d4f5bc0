package promquery

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrycap/retrycap/internal/promquery/promtest"
	"github.com/retrycap/retrycap/internal/telemetry"
)

// bcrypt of "s3cret" (cost 4), as Prometheus' web config wants it.
const s3cretHash = "$2a$04$dAQYYrevlXQu6kWpq1GZtuaz5gilJJ07NtGOJns6cb7uEmHtUdc1G"

// refused is the error a 401 from Prometheus gives, after the query's PromQL.
const refused = ": HTTP 401 Unauthorized: Prometheus refused the query: its credentials are missing or wrong (--prometheus-bearer-token-file, or --prometheus-username and --prometheus-password-file): client_error: client error: 401"

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// graphErr runs the discover queries once with o.
func graphErr(t *testing.T, o Options) error {
	t.Helper()
	c, err := New(o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	_, err = c.Graph(context.Background(), time.Now(), nil)
	return err
}

// TestAuthOptions: inconsistent credentials are refused before anything is queried, naming the
// flags and values.
func TestAuthOptions(t *testing.T) {
	pw := writeFile(t, "pw", "s3cret")
	for _, tc := range []struct {
		auth Auth
		want string
	}{
		{Auth{BearerTokenFile: "/t", Username: "admin", PasswordFile: pw}, "--prometheus-bearer-token-file and --prometheus-username/--prometheus-password-file: give one kind of credentials, not both"},
		{Auth{Username: "admin"}, `--prometheus-username "admin": --prometheus-password-file is required with it`},
		{Auth{PasswordFile: pw}, `--prometheus-password-file "` + pw + `": --prometheus-username is required with it`},
		{Auth{CAFile: "/nonexistent/ca.pem"}, `--prometheus-ca-file "/nonexistent/ca.pem": unable to read CA cert: unable to read file /nonexistent/ca.pem: open /nonexistent/ca.pem: no such file or directory`},
		{Auth{Username: "admin", PasswordFile: pw}, ""},
		{Auth{BearerTokenFile: "/t"}, ""}, // read per query: a missing file is that query's error
	} {
		_, err := New(Options{URL: "http://prom:9090", Auth: tc.auth})
		if got := errString(err); got != tc.want {
			t.Errorf("%+v:\n got %s\nwant %s", tc.auth, got, tc.want)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestBasicAuthAgainstPrometheus: a real Prometheus asking for basic auth (--web.config.file):
// the right password answers; none or a wrong one is a 401 that says which flags set them.
func TestBasicAuthAgainstPrometheus(t *testing.T) {
	web := writeFile(t, "web.yml", "basic_auth_users:\n  admin: "+s3cretHash+"\n")
	prom := promtest.StartTargetsArgs(t, "../..", nil, "--web.config.file="+web)
	good, bad := writeFile(t, "pw", "s3cret\n"), writeFile(t, "pw", "guess")
	first := "query " + telemetryFirstQuery(DefaultWindow)
	// A server asking for credentials answers /-/ready with 401 before its storage is ready.
	untilReady(t, Options{URL: prom.URL, Auth: Auth{Username: "admin", PasswordFile: good}})
	for _, tc := range []struct {
		name string
		auth Auth
		want string
	}{
		{"no credentials", Auth{}, first + refused},
		{"a wrong password", Auth{Username: "admin", PasswordFile: bad}, first + refused},
		{"the password", Auth{Username: "admin", PasswordFile: good}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := errString(graphErr(t, Options{URL: prom.URL, Auth: tc.auth})); got != tc.want {
				t.Errorf("\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestCredentialsInTheURLAgainstPrometheus: user:password in --prometheus-url is HTTP basic auth
// (net/http sends it) against a real Prometheus asking for it, and the password is never in
// what the client says: its URL (the conditions' "Prometheus at URL" and the manager's log) and
// its errors, New's included, show "xxxxx" in its place (before: the password was in all three).
// With the credential flags as well it is refused: two sources of credentials, and the URL's
// would win silently.
func TestCredentialsInTheURLAgainstPrometheus(t *testing.T) {
	web := writeFile(t, "web.yml", "basic_auth_users:\n  admin: "+s3cretHash+"\n")
	prom := promtest.StartTargetsArgs(t, "../..", nil, "--web.config.file="+web)
	withPassword := func(pw string) string { return strings.Replace(prom.URL, "http://", "http://admin:"+pw+"@", 1) }
	redacted := strings.Replace(prom.URL, "http://", "http://admin:xxxxx@", 1)
	untilReady(t, Options{URL: withPassword("s3cret")})
	first := "query " + telemetryFirstQuery(DefaultWindow)
	for _, tc := range []struct{ name, pw, want string }{
		{"the password", "s3cret", ""},
		{"a wrong password", "guess", first + refused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(Options{URL: withPassword(tc.pw)})
			if err != nil {
				t.Fatal(err)
			}
			if c.URL() != redacted {
				t.Errorf("URL() = %s, want %s", c.URL(), redacted)
			}
			_, err = c.Graph(context.Background(), time.Now(), nil)
			if got := errString(err); got != tc.want {
				t.Errorf("\n got %s\nwant %s", got, tc.want)
			}
		})
	}
	pw := writeFile(t, "pw", "s3cret")
	for _, tc := range []struct {
		url  string
		auth Auth
		want string
	}{
		{"http://admin:s3cret@prom:99999", Auth{}, `--prometheus-url "http://admin:xxxxx@prom:99999": port 99999: want 1..65535`},
		{"ftp://admin:s3cret@prom:9090", Auth{}, `--prometheus-url "ftp://admin:xxxxx@prom:9090": want an http or https URL with a host`},
		{"http://admin:s3cret@prom:9090/%zz", Auth{}, `--prometheus-url "http://admin:xxxxx@prom:9090/%zz": want an http or https URL with a host`},
		{"http://admin:s3cret@prom:9090", Auth{Username: "admin", PasswordFile: pw}, `--prometheus-url "http://admin:xxxxx@prom:9090" holds credentials, and so do --prometheus-bearer-token-file/--prometheus-username: give them in one place`},
		{"http://admin:s3cret@prom:9090", Auth{BearerTokenFile: pw}, `--prometheus-url "http://admin:xxxxx@prom:9090" holds credentials, and so do --prometheus-bearer-token-file/--prometheus-username: give them in one place`},
	} {
		_, err := New(Options{URL: tc.url, Auth: tc.auth})
		if got := errString(err); got != tc.want {
			t.Errorf("%s %+v:\n got %s\nwant %s", tc.url, tc.auth, got, tc.want)
		}
	}
}

// TestPathPrefixAgainstPrometheus: a real Prometheus served under a path prefix
// (--web.route-prefix=/prometheus, as behind an ingress path) is queried with the prefix in
// --prometheus-url, with or without a trailing slash; without it, or with the API's own path
// pasted in, its 404 says where the queries went and what URL to give (before: "HTTP 404 Not
// Found: client_error: client error: 404" and the body alone).
func TestPathPrefixAgainstPrometheus(t *testing.T) {
	prom := promtest.StartTargetsArgs(t, "../..", nil, "--web.route-prefix=/prometheus")
	untilReady(t, Options{URL: prom.URL + "/prometheus"})
	first := "query " + telemetryFirstQuery(DefaultWindow)
	notFound := func(u string) string {
		return first + ": HTTP 404 Not Found: no Prometheus API at " + u + "/api/v1/query: give Prometheus' base URL as --prometheus-url, with the path prefix it is served under if any (--web.route-prefix, an ingress path: http://host/prometheus): client_error: client error: 404: the answer begins \"404 page not found\""
	}
	for _, tc := range []struct{ url, want string }{
		{prom.URL + "/prometheus", ""},
		{prom.URL + "/prometheus/", ""},
		{prom.URL, notFound(prom.URL)},
		{prom.URL + "/prometheus/api/v1/query", notFound(prom.URL + "/prometheus/api/v1/query")},
	} {
		if got := errString(graphErr(t, Options{URL: tc.url})); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.url, got, tc.want)
		}
	}
}

// TestPrometheusTimeoutAgainstPrometheus: a real Prometheus that gives up on a query
// (--query.timeout here; in a cluster a heavy query over a long window) answers HTTP 503 with
// its JSON error, which client_golang does not decode for a 503: the message says
// Prometheus' errorType and error and what bounds the evaluation (before: "server_error: server
// error: 503" and the raw JSON).
func TestPrometheusTimeoutAgainstPrometheus(t *testing.T) {
	prom := promtest.StartTargetsArgs(t, "../..", nil, "--query.timeout=1ms")
	c, err := New(Options{URL: prom.URL})
	if err != nil {
		t.Fatal(err)
	}
	const q = "count_over_time(vector(1)[100d:1s])" // 8.64 million steps: never within 1 ms
	_, err = c.query(context.Background(), q, time.Now())
	want := "query " + q + ": HTTP 503 Service Unavailable: Prometheus gave up on the query: timeout: query timed out in expression evaluation (its --query.timeout, or --prometheus-timeout 10s if shorter, bounds the evaluation)"
	if errString(err) != want {
		t.Errorf("\n got %v\nwant %s", err, want)
	}
}

// TestBearerTokenAgainstPrometheus: a real Prometheus behind a proxy that checks a bearer token
// (kube-rbac-proxy's place in a cluster): the token file is read on every query, so a rotated
// token is sent without a new client.
func TestBearerTokenAgainstPrometheus(t *testing.T) {
	prom := promtest.StartTargets(t, "../..", nil)
	target, err := url.Parse(prom.URL)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	want := "tok-1"
	rp := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		ok := r.Header.Get("Authorization") == "Bearer "+want
		mu.Unlock()
		if !ok {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	defer srv.Close()
	tok := writeFile(t, "token", "tok-1\n")
	c, err := New(Options{URL: srv.URL, Auth: Auth{BearerTokenFile: tok}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Graph(context.Background(), time.Now(), nil); err != nil {
		t.Fatalf("with the token: %v", err)
	}
	// Rotated on the server: refused until the file holds the new token.
	mu.Lock()
	want = "tok-2"
	mu.Unlock()
	first := "query " + telemetryFirstQuery(DefaultWindow)
	if _, err := c.Graph(context.Background(), time.Now(), nil); errString(err) != first+refused {
		t.Fatalf("stale token: %v", err)
	}
	if err := os.WriteFile(tok, []byte("tok-2"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Graph(context.Background(), time.Now(), nil); err != nil {
		t.Fatalf("rotated token: %v", err)
	}
	// A token file that is gone: the query's error names it.
	if err := os.Remove(tok); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Graph(context.Background(), time.Now(), nil); err == nil || !strings.HasPrefix(err.Error(), first+": unable to read authorization credentials: unable to read file "+tok+": open "+tok+": no such file or directory") {
		t.Fatalf("no token file: %v", err)
	}
}

// TestTLSAgainstPrometheus: a real Prometheus serving TLS under a private CA (tls_server_config)
// with basic auth: verified with --prometheus-ca-file; without it the certificate is refused.
func TestTLSAgainstPrometheus(t *testing.T) {
	caPEM, certPEM, keyPEM := testCerts(t)
	dir := t.TempDir()
	for name, b := range map[string][]byte{"ca.pem": caPEM, "cert.pem": certPEM, "key.pem": keyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	web := writeFile(t, "web.yml", "tls_server_config:\n  cert_file: "+filepath.Join(dir, "cert.pem")+"\n  key_file: "+filepath.Join(dir, "key.pem")+
		"\nbasic_auth_users:\n  admin: "+s3cretHash+"\n")
	prom := promtest.StartTargetsArgs(t, "../..", nil, "--web.config.file="+web)
	u := "https://" + strings.TrimPrefix(prom.URL, "http://")
	pw := writeFile(t, "pw", "s3cret")
	first := "query " + telemetryFirstQuery(DefaultWindow)
	untilReady(t, Options{URL: u, Auth: Auth{Username: "admin", PasswordFile: pw, CAFile: filepath.Join(dir, "ca.pem")}})
	if err := graphErr(t, Options{URL: u, Auth: Auth{Username: "admin", PasswordFile: pw}}); errString(err) != first+": tls: failed to verify certificate: x509: certificate signed by unknown authority" {
		t.Errorf("without the CA: %v", err)
	}
	if err := graphErr(t, Options{URL: u, Auth: Auth{CAFile: filepath.Join(dir, "ca.pem")}}); errString(err) != first+refused {
		t.Errorf("without the password: %v", err)
	}
}

// untilReady polls the discover queries with o until they answer (a 503 while Prometheus'
// storage starts), failing after 60 s.
func untilReady(t *testing.T, o Options) {
	t.Helper()
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "Prometheus answers with the credentials", func() (bool, string) {
		_, err := c.Graph(context.Background(), time.Now(), nil)
		return err == nil, errString(err)
	})
}

// testCerts makes a CA and a certificate of 127.0.0.1 it signs (PEM), valid for an hour.
func testCerts(t *testing.T) (ca, cert, key []byte) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "retrycap test CA"}, NotBefore: now.Add(-time.Minute), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	srvTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "prometheus"}, NotBefore: now.Add(-time.Minute), NotAfter: now.Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srvDER}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

// telemetryFirstQuery is the PromQL Graph runs first (errors name it).
func telemetryFirstQuery(window time.Duration) string {
	return telemetry.Queries(window, DefaultCallerLabel)[0].PromQL
}
