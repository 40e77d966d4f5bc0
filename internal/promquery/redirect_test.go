package promquery

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/retrycap/retrycap/internal/promquery/promtest"
)

// TestMovedPrefixAgainstPrometheus: a real Prometheus behind a proxy (a test server: the
// redirect is the proxy's, Prometheus never sends one) that moved it from /prom to /prometheus
// and redirects the old prefix with 301, 302 and 303 (what an ingress's permanent-redirect and
// most rewrites send) and with 307 and 308.
func TestMovedPrefixAgainstPrometheus(t *testing.T) {
	prom := promtest.StartTargetsArgs(t, "../..", nil, "--web.route-prefix=/prometheus")
	untilReady(t, Options{URL: prom.URL + "/prometheus"})
	target, _ := url.Parse(prom.URL)
	rp := httputil.NewSingleHostReverseProxy(target)
	for _, code := range []int{301, 302, 303, 307, 308} {
		t.Run(http.StatusText(code), func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if rest, ok := strings.CutPrefix(r.URL.Path, "/prom/"); ok {
					u := "/prometheus/" + rest
					if r.URL.RawQuery != "" {
						u += "?" + r.URL.RawQuery
					}
					http.Redirect(w, r, u, code)
					return
				}
				rp.ServeHTTP(w, r)
			}))
			t.Cleanup(srv.Close)
			err := graphErr(t, Options{URL: srv.URL + "/prom"})
			want := ""
			if code < 307 {
				want = "query " + telemetryFirstQuery(DefaultWindow) + ": HTTP " + itoa(code) + " from " + srv.URL + "/prom/api/v1/query: the POST of the query was redirected to " +
					srv.URL + "/prometheus/api/v1/query, which HTTP follows with a GET without the query: not followed (give that URL's base, " + srv.URL + "/prometheus, as --prometheus-url)"
			}
			if got := errString(err); got != want {
				t.Errorf("\n got %s\nwant %s", got, want)
			}
		})
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
